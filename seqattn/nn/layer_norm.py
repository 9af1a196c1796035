"""Layer normalisation over the last axis, as torch.nn.LayerNorm (weight and bias of shape (E,))."""
import numpy as np

from .. import autodiff
from .module import Module
from .parameter import Parameter


class LayerNorm(Module):
    """Layer normalization over the last dim, as torch.nn.LayerNorm.

    x (..., E) is centred and scaled to unit variance along its last dim, then multiplied by
    ``weight`` (E,) (initially ones) and shifted by ``bias`` (E,) (initially zeros).

    Parameters
    ----------
    normalized_shape : int
        E, the size of the last dim.
    eps : float, default 1e-5
        Added to the variance before the square root.
    dtype : NumPy float type, default numpy.float32
        Type of the parameters and of the activations they produce (float32 or float64).
    seed : object, default None
        Unused (the initial weights are constant); accepted so that every layer takes it.
    """

    def __init__(self, normalized_shape, eps=1e-5, dtype=np.float32, seed=None):
        super().__init__()
        self.normalized_shape = int(normalized_shape)
        self.eps = eps
        self.weight = Parameter(np.ones(self.normalized_shape, dtype=dtype))
        self.bias = Parameter(np.zeros(self.normalized_shape, dtype=dtype))

    def forward(self, x):
        self.check_device(x=x)
        return autodiff.layer_norm(x, self.weight, self.bias, self.eps)
