"""Linear layer y = x W^T + b, with torch.nn.Linear's parameter names, shapes and init."""
import numpy as np

from .. import autodiff
from .init import generator, uniform
from .module import Module
from .parameter import Parameter


class Linear(Module):
    """x (..., in_features) -> (..., out_features); weight (out, in), bias (out,)."""

    def __init__(self, in_features, out_features, bias=True, dtype=np.float32, seed=None):
        super().__init__()
        rng = generator(seed)
        bound = 1.0 / np.sqrt(in_features)
        self.in_features, self.out_features = in_features, out_features
        self.weight = Parameter(uniform(rng, (out_features, in_features), bound, dtype))
        self.bias = Parameter(uniform(rng, (out_features,), bound, dtype)) if bias else None

    def forward(self, x):
        self.check_device(x=x)
        if x.ndim == 0 or int(x.shape[x.ndim - 1]) != self.in_features:
            raise ValueError(f"x has shape {tuple(x.shape)}; Linear expects its last dim to be "
                             f"in_features = {self.in_features}")
        return autodiff.linear(x, self.weight, self.bias)
