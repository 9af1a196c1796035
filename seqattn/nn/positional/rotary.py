"""Rotary position embedding (RoPE, Su et al.) applied to per-head queries and keys."""
import numpy as np

from ... import autodiff
from ...autodiff import unwrap
from ...backend import device_of
from ..module import Module
from ..placement import moved


class RotaryEmbedding(Module):
    """Rotary position embedding (RoPE): rotates feature pairs (j, j + D/2) of the token at
    position n by the angle n * base^(-2j/D) (the rotate-half layout).

    Stateless apart from cached angle tables; ``MultiheadAttention(rotary=...)`` calls
    :meth:`rotate` on the queries and keys, so their dot products depend on relative positions.

    Parameters
    ----------
    head_dim : int
        D, the width of each head; must be even.
    base : float, default 10000.0
        Base of the angles' geometric sequence.
    dtype : NumPy float type, default numpy.float32
        Type of the angle tables.
    """

    def __init__(self, head_dim, base=10000.0, dtype=np.float32):
        super().__init__()
        if head_dim % 2:
            raise ValueError(f"head_dim must be even for rotary embeddings, got {head_dim}")
        self.head_dim, self.base, self.table_dtype = head_dim, base, np.dtype(dtype)
        self._tables = {}

    def tables(self, N, device, dtype):
        """(cos, sin), each (N, D / 2), on ``device``."""
        key = (N, device, np.dtype(dtype))
        if key not in self._tables:
            inv_freq = self.base ** (-np.arange(0, self.head_dim, 2) / self.head_dim)
            angles = np.arange(N)[:, None] * inv_freq[None, :]
            self._tables[key] = (moved(np.cos(angles).astype(dtype), device),
                                 moved(np.sin(angles).astype(dtype), device))
        return self._tables[key]

    def rotate(self, x):
        """x (B, H, N, D) rotated by the positions 0..N-1 (recorded for the gradient)."""
        cos, sin = self.tables(int(x.shape[2]), device_of(unwrap(x)), x.dtype)
        return autodiff.rope(x, cos, sin)
