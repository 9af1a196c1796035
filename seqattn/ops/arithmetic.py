"""Arithmetic between layers on either device: products, affine maps, reciprocals, concatenation
and means or sums along one axis (with their backward). ``seqattn.autodiff`` records them, so
what a model writes between its layers takes part in the gradient."""
import math
import numbers

import numpy as np

from ..backend import empty_like_on, kernels_for
from .checks import expect_shape, flat, prepared, shape_of


def _trailing(a, b):
    if b.ndim > a.ndim or shape_of(a)[a.ndim - b.ndim:] != shape_of(b):
        raise ValueError(f"b has shape {shape_of(b)}, which is not the trailing part of a's "
                         f"shape {shape_of(a)}; broadcast by trailing dims only (reshape first)")


def multiply(a, b):
    """``a * b``, where b's shape equals the trailing dims of a's (or a's whole shape).

    Parameters
    ----------
    a : array
        The left factor, on the CPU (NumPy) or the GPU (numba.cuda device array).
    b : array
        The right factor, shaped like a's trailing dims, on the same device.

    Returns
    -------
    array
        Shaped like ``a``.
    """
    device, arrays = prepared({"a": a, "b": b})
    a, b = arrays["a"], arrays["b"]
    _trailing(a, b)
    out = empty_like_on(device, shape_of(a), a.dtype)
    if a.size and b.size:
        kernels_for(device, "arithmetic").multiply_forward(flat(out), flat(a), flat(b))
    return out


def affine(x, scale, shift=0.0):
    """``x * scale + shift`` for numbers ``scale`` and ``shift``.

    Parameters
    ----------
    x : array
        Inputs, on the CPU (NumPy) or the GPU (numba.cuda device array).
    scale : float
        The factor.
    shift : float, default 0.0
        The offset.

    Returns
    -------
    array
        Shaped like ``x``.
    """
    for name, value in (("scale", scale), ("shift", shift)):
        if not isinstance(value, numbers.Real):
            raise TypeError(f"{name} must be a number, got {type(value).__name__}")
    device, arrays = prepared({"x": x})
    x = arrays["x"]
    out = empty_like_on(device, shape_of(x), x.dtype)
    if x.size:
        # literals of the array's dtype: a float64 scalar would promote float32 kernels
        kernels_for(device, "arithmetic").affine_forward(flat(out), flat(x), x.dtype.type(scale),
                                                         x.dtype.type(shift))
    return out


def reciprocal(x):
    """``1 / x`` elementwise.

    Parameters
    ----------
    x : array
        Inputs, on the CPU (NumPy) or the GPU (numba.cuda device array).

    Returns
    -------
    array
        Shaped like ``x``.
    """
    device, arrays = prepared({"x": x})
    x = arrays["x"]
    out = empty_like_on(device, shape_of(x), x.dtype)
    if x.size:
        kernels_for(device, "arithmetic").reciprocal_forward(flat(out), flat(x))
    return out


def normalized_axis(axis, ndim, name="axis"):
    if not isinstance(axis, (int, np.integer)) or not -ndim <= axis < ndim:
        raise ValueError(f"{name} must be an integer in [-{ndim}, {ndim}) for a {ndim}-d "
                         f"array, got {axis!r}")
    return int(axis) % ndim


def around_axis(shape, axis):
    """(P, L, Q): the sizes before, along and after ``axis``."""
    return math.prod(shape[:axis]), shape[axis], math.prod(shape[axis + 1:])


def concat(arrays, axis=0):
    """Join arrays of one dtype and device along ``axis`` (other dims equal).

    Parameters
    ----------
    arrays : sequence of arrays
        The parts, on the CPU (NumPy) or the GPU (numba.cuda device array).
    axis : int, default 0
        The axis they are joined along.

    Returns
    -------
    array
        The joined array.
    """
    arrays = list(arrays)
    if not arrays:
        raise ValueError("concat needs at least one array")
    names = [f"arrays[{i}]" for i in range(len(arrays))]
    device, a = prepared(dict(zip(names, arrays)))
    first = a[names[0]]
    axis = normalized_axis(axis, first.ndim)
    for name in names[1:]:
        s = shape_of(a[name])
        if len(s) != first.ndim or s[:axis] + s[axis + 1:] != shape_of(first)[:axis] + \
                shape_of(first)[axis + 1:]:
            raise ValueError(f"{name} has shape {s}; expected {shape_of(first)} except along "
                             f"axis {axis}")
    total = sum(shape_of(a[n])[axis] for n in names)
    shape = shape_of(first)[:axis] + (total,) + shape_of(first)[axis + 1:]
    out = empty_like_on(device, shape, first.dtype)
    kernel = kernels_for(device, "arithmetic").concat_forward
    out3 = out.reshape(around_axis(shape, axis))
    offset = 0
    for name in names:
        x = a[name]
        if x.size:
            kernel(out3, x.reshape(around_axis(shape_of(x), axis)), offset)
        offset += shape_of(x)[axis]
    return out


def concat_backward(dout, sizes, axis):
    """The gradients of :func:`concat`'s inputs: ``dout`` cut along ``axis`` into ``sizes``.

    Parameters
    ----------
    dout : array
        dLoss/dout of the joined array.
    sizes : sequence of int
        Each input's size along ``axis``.
    axis : int
        The axis of the forward call.

    Returns
    -------
    list of arrays
        One gradient per input.
    """
    device, a = prepared({"dout": dout})
    dout = a["dout"]
    shape = shape_of(dout)
    axis = normalized_axis(axis, len(shape))
    dout3 = dout.reshape(around_axis(shape, axis))
    kernel = kernels_for(device, "arithmetic").concat_backward
    grads, offset = [], 0
    for size in sizes:
        g_shape = shape[:axis] + (size,) + shape[axis + 1:]
        g = empty_like_on(device, g_shape, dout.dtype)
        if g.size:
            kernel(g.reshape(around_axis(g_shape, axis)), dout3, offset)
        grads.append(g)
        offset += size
    return grads


def mean_along(x, axis, scale):
    """``scale * (sum of x along axis)``, that axis removed (``scale = 1 / L`` gives the mean).

    Parameters
    ----------
    x : array
        Inputs, on the CPU (NumPy) or the GPU (numba.cuda device array).
    axis : int
        The axis summed over.
    scale : float
        The factor applied to the sum.

    Returns
    -------
    array
        ``x``'s shape without ``axis``.
    """
    device, a = prepared({"x": x})
    x = a["x"]
    shape = shape_of(x)
    axis = normalized_axis(axis, len(shape))
    P, L, Q = around_axis(shape, axis)
    out = empty_like_on(device, shape[:axis] + shape[axis + 1:], x.dtype)
    if out.size:
        kernels_for(device, "arithmetic").mean_forward(out.reshape(P, Q), x.reshape(P, L, Q),
                                                       x.dtype.type(scale))
    return out


def mean_along_backward(dout, shape, axis, scale):
    """dx of :func:`mean_along`: ``scale * dout`` spread along ``axis``.

    Parameters
    ----------
    dout : array
        dLoss/dout.
    shape : tuple of int
        The forward call's input shape.
    axis : int
        The axis of the forward call.
    scale : float
        The factor of the forward call.

    Returns
    -------
    array
        dx, of ``shape``.
    """
    device, a = prepared({"dout": dout})
    dout = a["dout"]
    axis = normalized_axis(axis, len(shape))
    P, L, Q = around_axis(tuple(shape), axis)
    expect_shape("dout", dout, tuple(shape[:axis]) + tuple(shape[axis + 1:]),
                 "the input's shape without the reduced axis")
    dx = empty_like_on(device, tuple(shape), dout.dtype)
    if dx.size:
        kernels_for(device, "arithmetic").mean_backward(dx.reshape(P, L, Q), dout.reshape(P, Q),
                                                        dout.dtype.type(scale))
    return dx
