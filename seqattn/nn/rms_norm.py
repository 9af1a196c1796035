"""RMS normalisation over the last axis, as torch.nn.RMSNorm (a weight of shape (E,), no bias)."""
import numpy as np

from .. import autodiff
from .module import Module
from .parameter import Parameter


class RMSNorm(Module):
    """eps defaults to 1e-6 (torch's default of None means the dtype's machine epsilon)."""

    def __init__(self, normalized_shape, eps=1e-6, dtype=np.float32, seed=None):
        super().__init__()
        self.normalized_shape = int(normalized_shape)
        self.eps = eps
        self.weight = Parameter(np.ones(self.normalized_shape, dtype=dtype))

    def forward(self, x):
        self.check_device(x=x)
        return autodiff.rms_norm(x, self.weight, self.eps)
