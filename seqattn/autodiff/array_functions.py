"""Differentiable arithmetic between layers: ``+``, ``-``, ``*``, ``/`` (with numbers,
same-shape arrays, or arrays broadcast over leading dims such as a bias (E,) or a table (N, E);
NumPy's general broadcasting on the CPU), slicing, reshape, sums and means, concatenation and
stacking.
Tensors' operators call these."""
import math
import numbers

import numpy as np

from .. import ops
from ..backend import CPU, device_of, empty_like_on
from ..ops.arithmetic import normalized_axis
from ..ops.checks import shape_of
from .function import Function
from .tensor import Tensor, unwrap


def _shape(x):
    return shape_of(unwrap(x))


def _is_number(x):
    return isinstance(x, numbers.Real) and not isinstance(x, bool)


def _trailing_pair(a, b):
    """(larger, smaller) operands whose smaller shape is the trailing part of the larger (the
    broadcast the kernels of both devices do), or None."""
    sa, sb = _shape(a), _shape(b)
    if sa[len(sa) - len(sb):] == sb and len(sb) <= len(sa):
        return a, b
    if sb[len(sb) - len(sa):] == sa and len(sa) <= len(sb):
        return b, a
    return None


def _check_general_broadcast(a, b, what):
    """Other broadcasts (a (B, 1, E) against (B, N, E)) run through NumPy, on the CPU only."""
    sa, sb = _shape(a), _shape(b)
    try:
        np.broadcast_shapes(sa, sb)
    except ValueError:
        raise ValueError(f"cannot {what} shapes {sa} and {sb}: they do not broadcast") from None
    if device_of(unwrap(a)) != CPU or device_of(unwrap(b)) != CPU:
        raise ValueError(f"cannot {what} shapes {sa} and {sb} on the GPU: there one shape must "
                         "be the trailing part of the other (a bias (E,), a table (N, E) or the "
                         "same shape); reshape or expand so it is")


def _sum_to_shape(x, shape):
    """Sum a broadcast gradient back to an operand's shape (CPU)."""
    lead = x.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(lead + i for i, s in enumerate(shape)
                                      if s == 1 and x.shape[lead + i] != 1)
    return np.ascontiguousarray(x.sum(axis=axes).reshape(shape))


class BroadcastBinary(Function):
    """a + b or a * b under NumPy's broadcasting rules (CPU)."""

    @staticmethod
    def forward(ctx, a, b, multiply):
        ctx.save(a=a, b=b, multiply=multiply)
        return np.multiply(a, b) if multiply else np.add(a, b)

    @staticmethod
    def backward(ctx, dout):
        s = ctx.saved
        da = dout * s["b"] if s["multiply"] else dout
        db = dout * s["a"] if s["multiply"] else dout
        return (_sum_to_shape(da, s["a"].shape), _sum_to_shape(db, s["b"].shape), None)


class Add(Function):
    fresh_gradients = False  # the larger operand's gradient is dout itself

    @staticmethod
    def forward(ctx, a, b):
        ctx.save(b_shape=_shape(b), same=_shape(a) == _shape(b))
        return ops.add(a, b)

    @staticmethod
    def backward(ctx, dout):
        s = ctx.saved
        db = dout if s["same"] else ops.sum_leading(dout, s["b_shape"])
        return dout, db


class Multiply(Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.save(a=a, b=b, b_shape=_shape(b))
        return ops.multiply(a, b)

    @staticmethod
    def backward(ctx, dout):
        s = ctx.saved
        da = ops.multiply(dout, s["b"]) if ctx.needs_grad[0] else None
        db = None
        if ctx.needs_grad[1]:
            db = ops.multiply(dout, s["a"])
            if _shape(db) != s["b_shape"]:
                db = ops.sum_leading(db, s["b_shape"])
        return da, db


class Affine(Function):
    @staticmethod
    def forward(ctx, x, scale, shift):
        ctx.save(scale=scale)
        return ops.affine(x, scale, shift)

    @staticmethod
    def backward(ctx, dout):
        return ops.affine(dout, ctx.saved["scale"]), None, None


class Reciprocal(Function):
    @staticmethod
    def forward(ctx, x):
        out = ops.reciprocal(x)
        ctx.save(out=out)
        return out

    @staticmethod
    def backward(ctx, dout):
        # d(1/x)/dx = -1/x^2 = -out^2
        out = ctx.saved["out"]
        return ops.affine(ops.multiply(ops.multiply(dout, out), out), -1.0)


def _elementwise(a, b, multiply):
    for x, y in ((a, b), (b, a)):  # a number on either side: one affine map
        if _is_number(y):
            return Affine.apply(x, float(y), 0.0) if multiply else Affine.apply(x, 1.0, float(y))
    pair = _trailing_pair(a, b)
    if pair is None:
        _check_general_broadcast(a, b, "multiply" if multiply else "add")
        return BroadcastBinary.apply(a, b, multiply)
    return (Multiply if multiply else Add).apply(*pair)


def add(a, b):
    """a + b for Tensors, arrays and numbers (see the module docstring for broadcasting).

    Parameters
    ----------
    a : Tensor, array or float
        The left operand, any shape.
    b : Tensor, array or float
        The right operand: a number, the same shape as `a`, or a shape that broadcasts with it
        (on the GPU, the trailing part of `a`'s shape or the other way round).

    Returns
    -------
    Tensor
        a + b, of the broadcast shape; the gradient reaches whichever operands record one.
    """
    return _elementwise(a, b, multiply=False)


def multiply(a, b):
    """a * b for Tensors, arrays and numbers (see the module docstring for broadcasting).

    Parameters
    ----------
    a : Tensor, array or float
        The left operand, any shape.
    b : Tensor, array or float
        The right operand: a number, the same shape as `a`, or a shape that broadcasts with it
        (on the GPU, the trailing part of `a`'s shape or the other way round).

    Returns
    -------
    Tensor
        a * b, of the broadcast shape; the gradient reaches whichever operands record one.
    """
    return _elementwise(a, b, multiply=True)


def subtract(a, b):
    """a - b.

    Parameters
    ----------
    a : Tensor, array or float
        The left operand, any shape.
    b : Tensor, array or float
        The right operand: a number, the same shape as `a`, or a shape that broadcasts with it
        (on the GPU, the trailing part of `a`'s shape or the other way round).

    Returns
    -------
    Tensor
        a - b, of the broadcast shape; the gradient reaches whichever operands record one.
    """
    if _is_number(b):
        return Affine.apply(a, 1.0, -float(b))
    return add(a, multiply(b, -1.0))


def divide(a, b):
    """a / b.

    Parameters
    ----------
    a : Tensor, array or float
        The left operand, any shape.
    b : Tensor, array or float
        The right operand: a number, the same shape as `a`, or a shape that broadcasts with it
        (on the GPU, the trailing part of `a`'s shape or the other way round).

    Returns
    -------
    Tensor
        a / b, of the broadcast shape; the gradient reaches whichever operands record one.
    """
    if _is_number(b):
        return multiply(a, 1.0 / float(b))
    return multiply(a, Reciprocal.apply(b))


class Reshape(Function):
    fresh_gradients = False  # the gradient is a view of dout

    @staticmethod
    def forward(ctx, x, shape):
        ctx.save(shape=_shape(x))
        return _contiguous(x).reshape(shape)

    @staticmethod
    def backward(ctx, dout):
        return _contiguous(dout).reshape(ctx.saved["shape"]), None


def _contiguous(x):
    if device_of(x) == CPU:
        return np.ascontiguousarray(x)
    if not x.is_c_contiguous():
        raise ValueError("a non-contiguous device array cannot be reshaped; copy it first")
    return x


def _resolved_shape(shape, size):
    shape = tuple(int(s) for s in shape)
    if shape.count(-1) > 1:
        raise ValueError(f"shape {shape} has more than one -1")
    if -1 in shape:
        known = math.prod(s for s in shape if s != -1)
        if known == 0 or size % known:
            raise ValueError(f"cannot reshape {size} elements into {shape}")
        shape = tuple(size // known if s == -1 else s for s in shape)
    if math.prod(shape) != size:
        raise ValueError(f"cannot reshape {size} elements into {shape}")
    return shape


def reshape(x, shape):
    """x with a new shape of the same size (one dim may be -1).

    Parameters
    ----------
    x : Tensor or array
        The values, any shape; a device array must be contiguous.
    shape : tuple of int
        The new shape, with as many elements as `x`; one entry may be -1 (inferred).

    Returns
    -------
    Tensor
        `x`'s elements in `shape`.
    """
    return Reshape.apply(x, _resolved_shape(shape, math.prod(_shape(x))))


class Take(Function):
    @staticmethod
    def forward(ctx, x, index):
        ctx.save(layout=(device_of(x), _shape(x), np.dtype(x.dtype)), index=index)
        if device_of(x) == CPU:
            return np.ascontiguousarray(x[index])
        return x[index]

    @staticmethod
    def backward(ctx, dout):
        s = ctx.saved
        device, shape, dtype = s["layout"]
        dx = ops.fill(empty_like_on(device, shape, dtype), 0.0)
        if device == CPU:
            np.add.at(dx, s["index"], dout)  # repeated indices add up
        else:
            ops.add_into(dx[s["index"]], dout)
        return dx, None


def _check_device_index(index, shape):
    """On the GPU only an integer or a unit-step slice on the first axis is supported: it keeps
    the result contiguous."""
    first = index[0] if isinstance(index, tuple) and len(index) == 1 else index
    ok = isinstance(first, (int, np.integer)) or (isinstance(first, slice) and
                                                  first.step in (None, 1))
    if not ok:
        raise ValueError(f"index {index!r} on a GPU tensor of shape {shape}: only an integer or "
                         "a slice with step 1 on the first axis is supported there; reshape "
                         "(or move the computation to the CPU) first")


def take(x, index):
    """x[index]; the gradient flows back into the selected elements.

    Parameters
    ----------
    x : Tensor or array
        The values, any shape.
    index : int, slice, array, tuple or Tensor
        A NumPy index into `x` (a Tensor is read as its array); on the GPU only an integer or a
        slice of step 1 on the first axis.

    Returns
    -------
    Tensor
        ``x[index]``; repeated indices add up their gradients.
    """
    if isinstance(index, Tensor):
        index = index.numpy()
    if device_of(unwrap(x)) != CPU:
        _check_device_index(index, _shape(x))
    return Take.apply(x, index)


class MeanAlong(Function):
    @staticmethod
    def forward(ctx, x, axis, scale):
        ctx.save(shape=_shape(x), axis=axis, scale=scale)
        return ops.mean_along(x, axis, scale)

    @staticmethod
    def backward(ctx, dout):
        s = ctx.saved
        return ops.mean_along_backward(dout, s["shape"], s["axis"], s["scale"]), None, None


def _reduce(x, axis, keepdims, mean):
    shape = _shape(x)
    if axis is None:
        x, axes = reshape(x, (-1,)), (0,)
    else:
        axes = tuple(sorted({normalized_axis(a, len(shape)) for a in
                             (axis if isinstance(axis, tuple) else (axis,))}, reverse=True))
    for a in axes:  # from the last axis down, so earlier axis numbers stay valid
        x = MeanAlong.apply(x, a, 1.0 / _shape(x)[a] if mean else 1.0)
    if keepdims:
        kept = tuple(1 if (axis is None or i in axes) else s for i, s in enumerate(shape))
        x = reshape(x, kept)
    return x


def reduce_sum(x, axis=None, keepdims=False):
    """Sum over ``axis`` (an int, a tuple of ints, or None for all).

    Parameters
    ----------
    x : Tensor or array
        The values, any shape.
    axis : int, tuple of int or None, default None
        The axes to reduce (negative counts from the end); None: every axis.
    keepdims : bool, default False
        Whether the reduced axes stay, with size 1.

    Returns
    -------
    Tensor
        The sum over `axis`: `x`'s shape without (or with size 1 at) the reduced axes.
    """
    return _reduce(x, axis, keepdims, mean=False)


def reduce_mean(x, axis=None, keepdims=False):
    """Mean over ``axis`` (an int, a tuple of ints, or None for all).

    Parameters
    ----------
    x : Tensor or array
        The values, any shape.
    axis : int, tuple of int or None, default None
        The axes to reduce (negative counts from the end); None: every axis.
    keepdims : bool, default False
        Whether the reduced axes stay, with size 1.

    Returns
    -------
    Tensor
        The mean over `axis`: `x`'s shape without (or with size 1 at) the reduced axes.
    """
    return _reduce(x, axis, keepdims, mean=True)


class Concat(Function):
    @staticmethod
    def forward(ctx, *inputs):
        *arrays, axis = inputs
        axis = normalized_axis(axis, len(_shape(arrays[0])))
        ctx.save(sizes=[_shape(a)[axis] for a in arrays], axis=axis)
        return ops.concat(arrays, axis)

    @staticmethod
    def backward(ctx, dout):
        s = ctx.saved
        return (*ops.concat_backward(dout, s["sizes"], s["axis"]), None)


def concat(tensors, axis=0):
    """Join Tensors (or arrays) along ``axis``; each gets its slice of the gradient.

    Parameters
    ----------
    tensors : sequence of Tensor or array
        At least one; their shapes equal except along `axis`.
    axis : int, default 0
        The axis to join along (negative counts from the end).

    Returns
    -------
    Tensor
        The inputs end to end along `axis`.
    """
    tensors = list(tensors)
    if not tensors:
        raise ValueError("concat needs at least one tensor")
    return Concat.apply(*tensors, axis)


def stack(tensors, axis=0):
    """Join Tensors of one shape along a new ``axis``.

    Parameters
    ----------
    tensors : sequence of Tensor or array
        At least one, all of one shape.
    axis : int, default 0
        Where the new axis goes in the result (negative counts from the end).

    Returns
    -------
    Tensor
        The inputs' shape with a new axis of size ``len(tensors)`` at `axis`.
    """
    tensors = list(tensors)
    if not tensors:
        raise ValueError("stack needs at least one tensor")
    shape = _shape(tensors[0])
    axis = normalized_axis(axis, len(shape) + 1)
    expanded = shape[:axis] + (1,) + shape[axis:]
    return concat([reshape(t, expanded) for t in tensors], axis)
