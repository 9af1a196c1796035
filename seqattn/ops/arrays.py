"""Array arithmetic on either device: broadcast adds, their reductions, in-place sums, fills,
moving averages."""
import numpy as np

from ..backend import CPU, empty_like_on, kernels_for
from .checks import expect_shape, expect_updatable, flat, prepared, shape_of


def add(a, b):
    """``a + b``, where b's shape equals the trailing dims of a's (a residual, a bias (E,), or a
    positional table (N, E) added to every batch element).

    Parameters
    ----------
    a : array
        The larger operand, on the CPU (NumPy) or the GPU (numba.cuda device array).
    b : array
        Shaped like a's trailing dims, on the same device.

    Returns
    -------
    array
        Shaped like ``a``.
    """
    device, arrays = prepared({"a": a, "b": b})
    a, b = arrays["a"], arrays["b"]
    if b.ndim > a.ndim or shape_of(a)[a.ndim - b.ndim:] != shape_of(b):
        raise ValueError(f"b has shape {shape_of(b)}, which is not the trailing part of a's "
                         f"shape {shape_of(a)}")
    out = empty_like_on(device, shape_of(a), a.dtype)
    if a.size:
        kernels_for(device, "elementwise").add_forward(flat(out), flat(a), flat(b))
    return out


def sum_leading(x, shape, *, out=None):
    """Sum ``x`` over its leading dims down to ``shape`` (its trailing dims): the backward of
    the broadcast in :func:`add`.

    Parameters
    ----------
    x : array
        The array summed, on the CPU (NumPy) or the GPU (numba.cuda device array).
    shape : tuple of int
        The trailing dims to keep.
    out : array, optional
        If given, the sum is added into it, in place.

    Returns
    -------
    array
        The sum, of ``shape`` (``out`` when given).
    """
    shape = tuple(int(s) for s in shape)
    device, a = prepared({"x": x, "out": out})
    x = a["x"]
    if len(shape) > x.ndim or shape_of(x)[x.ndim - len(shape):] != shape:
        raise ValueError(f"shape {shape} is not the trailing part of x's shape {shape_of(x)}")
    accumulate = out is not None
    if accumulate:
        expect_shape("out", a["out"], shape, "shape")
        expect_updatable("out", out, a["out"])
        result = a["out"]
    else:
        result = empty_like_on(device, shape, x.dtype)
    size = int(np.prod(shape, dtype=np.int64))
    kernels_for(device, "reductions").sum_over_rows(
        flat(result), x.reshape(int(x.size) // size if size else 0, size), accumulate)
    return result


def add_into(dst, src):
    """``dst += src`` in place (same shape): sums gradients that reach one tensor along two
    paths.

    Parameters
    ----------
    dst : array
        Added into, on the CPU (NumPy) or the GPU (numba.cuda device array).
    src : array
        Shaped like ``dst``, on the same device.

    Returns
    -------
    array
        ``dst``.
    """
    device, a = prepared({"dst": dst, "src": src})
    expect_shape("src", a["src"], shape_of(dst), "dst.shape")
    expect_updatable("dst", dst, a["dst"])
    if dst.size:
        kernels_for(device, "elementwise").add_into(flat(dst), flat(a["src"]))
    return dst


def fill(x, value):
    """``x[...] = value`` in place, on either device (zeroing gradients).

    Parameters
    ----------
    x : array
        The array filled, on the CPU (NumPy) or the GPU (numba.cuda device array).
    value : float
        The value.

    Returns
    -------
    array
        ``x``.
    """
    device, a = prepared({"x": x})
    expect_updatable("x", x, a["x"])
    if x.size:
        kernels = kernels_for(device, "elementwise")
        if device == CPU and x.size < 2 * kernels.GRAIN:
            # where the launch would take one thread, NumPy's own fill writes the same values
            # without the launch's Python, which cost more than the writing (a small model's
            # gradients)
            x.fill(float(value))
        else:
            kernels.fill(flat(x), float(value))
    return x


def move_toward(dst, src, weight):
    """``dst += weight * (src - dst)`` in place (same shape): one step of a moving average.

    Parameters
    ----------
    dst : array
        The average, updated in place, on the CPU (NumPy) or the GPU (numba.cuda device array).
    src : array
        The new value, shaped like ``dst``, on the same device.
    weight : float
        How far ``dst`` moves toward ``src``, in [0, 1].

    Returns
    -------
    array
        ``dst``.
    """
    if not 0.0 <= weight <= 1.0:
        raise ValueError(f"weight must be in [0, 1] (how far dst moves toward src); got {weight!r}")
    device, a = prepared({"dst": dst, "src": src})
    expect_shape("src", a["src"], shape_of(dst), "dst.shape")
    expect_updatable("dst", dst, a["dst"])
    if dst.size:
        kernels_for(device, "elementwise").move_toward(flat(dst), flat(a["src"]), float(weight))
    return dst
