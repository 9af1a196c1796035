"""Inverted dropout: active in training mode, the identity in evaluation mode."""
from .. import autodiff
from .init import generator
from .module import Module

SEED_LIMIT = 2**63  # seeds are non-negative int64 values for the kernels


class Dropout(Module):
    """Zeroes each element with probability ``p`` in training and scales the rest by
    1 / (1 - p); the identity in evaluation mode.

    Each forward draws a fresh mask seed from the module's generator; the backward reuses it,
    so the mask is recomputed rather than stored (see :func:`seqattn.ops.dropout`).

    Parameters
    ----------
    p : float, default 0.5
        Probability of zeroing an element.
    seed : int, numpy.random.Generator or None, default None
        Seed of the masks; None draws fresh entropy.
    """

    def __init__(self, p=0.5, seed=None):
        super().__init__()
        if not 0.0 <= p < 1.0:
            raise ValueError(f"p must be in [0, 1), got {p!r}")
        self.p = p
        self._rng = generator(seed)

    def forward(self, x):
        if not self.training or self.p == 0.0:
            return x
        return autodiff.dropout(x, self.p, int(self._rng.integers(SEED_LIMIT)))


def reseed_dropouts(module, index):
    """Give every Dropout inside ``module`` a generator of its own, derived from ``index`` and its
    own stream, so deep copies of one layer do not draw identical masks."""
    for _, m in module.named_modules():
        if isinstance(m, Dropout):
            m._rng = generator([index, int(m._rng.integers(SEED_LIMIT))])
