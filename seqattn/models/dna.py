"""Strand symmetry for DNA models: a prediction that is the same for a sequence and its reverse
complement (for per-base outputs: the same, read from the other end).

DNA is double-stranded and a peak or a binding site has no preferred strand, but a model reads a
sequence in one direction. :class:`StrandSymmetric` runs the model on both strands and averages,
so the symmetry holds exactly whatever the model learned (as in the reverse-complement
"conjoined" networks of Shrikumar et al. 2017).
"""
import numpy as np

from .. import autodiff
from ..autodiff import Tensor
from ..backend import CPU
from ..nn import Module
from ..nn.placement import moved


def _reversal_order(key_padding_mask):
    """(B, N) token order reversing each row up to its last unpadded token (padding, which
    the adapters put at the end, stays there)."""
    mask = np.asarray(moved(key_padding_mask, CPU))
    B, N = mask.shape
    t = np.arange(N)[None, :]
    lengths = np.where(mask.all(axis=1), 0, N - np.argmax(~mask[:, ::-1], axis=1))[:, None]
    return np.where(t < lengths, lengths - 1 - t, t)


class StrandSymmetric(Module):
    """``0.5 * (model(x) + R model(rc(x)))`` for tokens x (B, N, F) float or (B, N) ids.

    ``rc`` reverses each sequence's tokens (up to its last unpadded one) and replaces every
    token by its complement: ``complement`` is the permutation of one-hot columns or ids that
    the reverse strand applies (``GenomeAdapter.complement``). ``R`` reverses per-token outputs
    (B, N, F_out) back to the forward strand; per-sequence outputs (B, F_out) need no ``R``. A
    masked base inside a sequence (``ambiguous="mask"``) keeps symmetry as long as it is not
    the last one; use ``ambiguous="token"`` for exact symmetry with trailing N. CPU only.

    Parameters
    ----------
    model : seqattn.nn.Module
        The model run on both strands, e.g. a :class:`TokenModel` or :class:`SequenceModel`.
    complement : array_like of int, shape (V,)
        The permutation of token ids or one-hot columns that the reverse strand applies (its
        own inverse), e.g. ``GenomeAdapter.complement``.
    """

    def __init__(self, model, complement):
        super().__init__()
        complement = np.asarray(complement, np.int64)
        if complement.ndim != 1 or not np.array_equal(np.sort(complement),
                                                      np.arange(len(complement))):
            raise ValueError("complement must be a permutation of the token ids or one-hot "
                             f"columns (GenomeAdapter.complement); got {complement!r:.80}")
        if not np.array_equal(complement[complement], np.arange(len(complement))):
            raise ValueError("complement must be its own inverse (the reverse strand of the "
                             "reverse strand is the forward strand)")
        self.model = model
        self.complement = complement

    def forward(self, tokens, key_padding_mask=None, coords=None):
        B, N = (int(s) for s in tokens.shape[:2])
        if key_padding_mask is None:
            order = np.tile(np.arange(N)[::-1], (B, 1))
        else:
            order = _reversal_order(key_padding_mask)
        rows = np.arange(B)[:, None]
        if isinstance(tokens, Tensor):  # float features: the gather is recorded
            width = int(tokens.shape[2])
            if width != len(self.complement):
                raise ValueError(f"tokens have {width} features but complement permutes "
                                 f"{len(self.complement)}; build it from the same adapter")
            reverse = autodiff.take(tokens, (rows[:, :, None], order[:, :, None],
                                             self.complement[None, None, :]))
        else:  # integer ids
            ids = np.asarray(moved(tokens, CPU))
            reverse = moved(np.ascontiguousarray(self.complement[ids[rows, order]]), self.device)
        mask = None if key_padding_mask is None else moved(
            np.ascontiguousarray(np.asarray(moved(key_padding_mask, CPU))[rows, order]),
            self.device)
        forward_strand = self.model(tokens, key_padding_mask, coords)
        reverse_strand = self.model(reverse, mask, coords)
        if len(reverse_strand.shape) == 3:
            reverse_strand = autodiff.take(reverse_strand, (rows, order))
        return (forward_strand + reverse_strand) * 0.5
