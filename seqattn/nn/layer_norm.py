"""Layer normalisation over the last axis, as torch.nn.LayerNorm (weight and bias of shape (E,))."""
import numpy as np

from .. import autodiff
from .module import Module
from .parameter import Parameter


class LayerNorm(Module):
    def __init__(self, normalized_shape, eps=1e-5, dtype=np.float32, seed=None):
        super().__init__()
        self.normalized_shape = int(normalized_shape)
        self.eps = eps
        self.weight = Parameter(np.ones(self.normalized_shape, dtype=dtype))
        self.bias = Parameter(np.zeros(self.normalized_shape, dtype=dtype))

    def forward(self, x):
        self.check_device(x=x)
        return autodiff.layer_norm(x, self.weight, self.bias, self.eps)
