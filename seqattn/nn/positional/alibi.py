"""ALiBi slopes (Press et al., 2022): per-head penalties on query-key distance.

Pass them as ``alibi_slopes=`` to ``seqattn.attention`` or ``MultiheadAttention``.
"""
import numpy as np


def alibi_slopes(num_heads):
    """ALiBi's slope per head: the geometric sequence 2^(-8 i / n) for the nearest power of two
    n <= H, then the odd terms of the sequence for 2n to fill the remaining heads (the paper's
    rule).

    Parameters
    ----------
    num_heads : int
        H, the number of heads.

    Returns
    -------
    array (H,)
        The slopes, largest first.
    """
    n = 2 ** int(np.floor(np.log2(num_heads)))
    slopes = 2.0 ** (-8.0 * np.arange(1, n + 1) / n)
    if n < num_heads:
        extra = 2.0 ** (-8.0 * np.arange(1, 2 * n + 1) / (2 * n))
        slopes = np.concatenate([slopes, extra[0::2][:num_heads - n]])
    return slopes
