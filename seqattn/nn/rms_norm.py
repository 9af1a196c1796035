"""RMS normalisation over the last axis, as torch.nn.RMSNorm (a weight of shape (E,), no bias)."""
import numpy as np

from .. import autodiff
from .module import Module
from .parameter import Parameter


class RMSNorm(Module):
    """Root-mean-square normalization over the last dim (as in LLaMA): x (..., E) divided by
    its root mean square along E, times ``weight`` (E,), with no centring and no bias.

    Parameters
    ----------
    normalized_shape : int
        E, the size of the last dim.
    eps : float, default 1e-6
        Added to the mean square before the square root (torch's default of None means the
        dtype's machine epsilon; seqattn fixes it).
    dtype : NumPy float type, default numpy.float32
        Type of the parameters and of the activations they produce (float32 or float64).
    seed : object, default None
        Unused (the initial weights are ones); accepted so that every layer takes it.
    """

    def __init__(self, normalized_shape, eps=1e-6, dtype=np.float32, seed=None):
        super().__init__()
        self.normalized_shape = int(normalized_shape)
        self.eps = eps
        self.weight = Parameter(np.ones(self.normalized_shape, dtype=dtype))

    def forward(self, x):
        self.check_device(x=x)
        return autodiff.rms_norm(x, self.weight, self.eps)
