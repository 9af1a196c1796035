"""Parameter: a learnable leaf Tensor whose gradient accumulates in ``.grad``."""
import numpy as np

from .tensor import Tensor


class Parameter(Tensor):
    """``data`` and ``grad`` are arrays of one shape, dtype and device; ``grad`` starts at zero
    and backward passes add into it until ``Module.zero_grad()``.

    Parameters
    ----------
    data : array
        The parameter's values, any shape, on the CPU (NumPy) or the GPU; held as they are (not
        copied); ``grad`` starts as zeros like them.
    """

    def __init__(self, data):
        super().__init__(data, requires_grad=True)
        self.grad = np.zeros_like(data)

    def __repr__(self):
        return f"Parameter(shape={self.shape}, dtype={self.dtype})"
