"""A learnable array and the gradient accumulated for it."""
import numpy as np


class Parameter:
    """``data`` and ``grad`` are arrays of one shape, dtype and device; ``grad`` starts at zero
    and backward passes add into it until ``Module.zero_grad()``."""

    def __init__(self, data):
        self.data = data
        self.grad = np.zeros_like(data)

    @property
    def shape(self):
        return tuple(int(s) for s in self.data.shape)

    @property
    def dtype(self):
        return np.dtype(self.data.dtype)

    def __repr__(self):
        return f"Parameter(shape={self.shape}, dtype={self.dtype})"
