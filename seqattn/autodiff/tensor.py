"""Tensor: an array (NumPy on the CPU, numba.cuda on the GPU) that remembers the op that made it.

Inside a module's ``forward`` every value is a Tensor; differentiable ops (``seqattn.autodiff``'s
functions and the operators below) record themselves on the Tensors they produce, so the
gradient of anything computed there flows back through every path without hand-written backward
code. NumPy functions cannot take part in that record, so a recorded Tensor refuses to become a
NumPy array (``np.concatenate([a, b])`` raises and says what to call instead) rather than being
silently left out of the gradient.
"""
import math

import numpy as np

from ..backend import CPU, device_of
from .recording import is_recording


class Tensor:
    # NumPy ufuncs (np.add(a, t), a * t with a an ndarray) must not turn a Tensor into an array:
    # with this, NumPy defers to the reflected operators below or raises TypeError.
    __array_ufunc__ = None

    def __init__(self, data, requires_grad=False):
        if isinstance(data, Tensor):
            raise TypeError("Tensor(data) takes an array, not a Tensor; use tensor.detach()")
        self.data = data
        self.requires_grad = bool(requires_grad)
        self.grad = None
        self._node = None  # the recorded op that produced this tensor (None for a leaf)
        self._index = 0    # which of that op's outputs it is

    # -- what it is ------------------------------------------------------------------------

    @property
    def shape(self):
        data = self.data
        # a NumPy array's shape is a tuple of ints already; other arrays' may hold other
        # integers
        return data.shape if type(data) is np.ndarray else tuple(int(s) for s in data.shape)

    @property
    def ndim(self):
        return len(self.data.shape)

    @property
    def size(self):
        return math.prod(self.shape)

    @property
    def dtype(self):
        return np.dtype(self.data.dtype)

    @property
    def device(self):
        return device_of(self.data)

    @property
    def is_leaf(self):
        return self._node is None

    def __len__(self):
        return self.shape[0]

    def __repr__(self):
        grad = ", requires_grad=True" if self.requires_grad else ""
        return f"Tensor(shape={self.shape}, dtype={self.dtype}, device={self.device!r}{grad})"

    # -- leaving the record ----------------------------------------------------------------

    def detach(self):
        """The same data as a constant: no gradient flows through it."""
        return Tensor(self.data)

    def numpy(self):
        """A host NumPy copy of the data (a constant, outside the record)."""
        return np.array(self.data) if self.device == CPU else self.data.copy_to_host()

    def __array__(self, dtype=None, copy=None):
        if self.requires_grad and is_recording():
            raise TypeError(
                "this Tensor takes part in a gradient, and NumPy would silently leave it out: "
                "use seqattn.autodiff's ops instead (+, -, *, /, slicing, .reshape, .mean, .sum, "
                "autodiff.concat, autodiff.stack), or .detach() / .numpy() for a constant copy")
        host = self.numpy()
        return host if dtype is None else host.astype(dtype)

    def backward(self, dout=None):
        """Backpropagate from this tensor: ``dout`` is dLoss/dself (default 1 for a single
        value). Leaf tensors that require gradients get ``.grad`` (added to what they hold)."""
        from .backward import backward

        backward([self], [dout])

    # -- arithmetic (recorded; see seqattn.autodiff.array_functions) -----------------------

    def __add__(self, other):
        from .array_functions import add
        return add(self, other)

    def __radd__(self, other):
        from .array_functions import add
        return add(other, self)

    def __sub__(self, other):
        from .array_functions import subtract
        return subtract(self, other)

    def __rsub__(self, other):
        from .array_functions import subtract
        return subtract(other, self)

    def __mul__(self, other):
        from .array_functions import multiply
        return multiply(self, other)

    def __rmul__(self, other):
        from .array_functions import multiply
        return multiply(other, self)

    def __truediv__(self, other):
        from .array_functions import divide
        return divide(self, other)

    def __rtruediv__(self, other):
        from .array_functions import divide
        return divide(other, self)

    def __neg__(self):
        from .array_functions import multiply
        return multiply(self, -1.0)

    def __getitem__(self, index):
        from .array_functions import take
        return take(self, index)

    def reshape(self, *shape):
        from .array_functions import reshape
        return reshape(self, shape[0] if len(shape) == 1 and isinstance(shape[0], tuple)
                       else shape)

    def sum(self, axis=None, keepdims=False):
        from .array_functions import reduce_sum
        return reduce_sum(self, axis, keepdims)

    def mean(self, axis=None, keepdims=False, **_numpy_defaults):
        # np.mean(tensor) calls tensor.mean(axis=..., dtype=None, out=None): those defaults are
        # accepted, anything else is refused by reduce_mean's checks.
        from .array_functions import reduce_mean
        if any(v is not None for v in _numpy_defaults.values()):
            raise TypeError(f"Tensor.mean takes axis and keepdims only, got {_numpy_defaults}")
        return reduce_mean(self, axis, keepdims)


def unwrap(x):
    """The array behind a Tensor; anything else unchanged.

    Parameters
    ----------
    x : Tensor or object
        A Tensor, or anything else (an array, a number, None).

    Returns
    -------
    array or object
        ``x.data`` for a Tensor, else `x`.
    """
    return x.data if isinstance(x, Tensor) else x


def as_tensor(x):
    """x itself if it is a Tensor, else a constant Tensor around the array (None stays None).

    Parameters
    ----------
    x : Tensor, array or None
        The value.

    Returns
    -------
    Tensor or None
        `x` if it is a Tensor or None, else a Tensor around it that records no gradient.
    """
    if x is None or isinstance(x, Tensor):
        return x
    return Tensor(x)
