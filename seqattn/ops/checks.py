"""Argument checks shared by every op in ``seqattn.ops`` (attention, layers, losses, ...).

Each check raises an error that names the argument and says what was expected, so the kernels
behind the ops can assume contiguous arrays of one float dtype with consistent shapes.
"""
import numbers

import numpy as np

from ..backend import CPU, CUDA, backend_of

FLOAT_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


def shape_of(x):
    # A NumPy array's shape is a tuple of ints already; other arrays' may hold other integers.
    return x.shape if type(x) is np.ndarray else tuple(int(s) for s in x.shape)


def prepared(names_and_arrays, float_names=None):
    """(device, dict of contiguous arrays) for the named arrays (None values pass through).

    All arrays must share a device; those in ``float_names`` (default: all) must share one
    float dtype. CPU inputs are made contiguous; device arrays must already be.
    """
    # Contiguous NumPy arrays of one float dtype (every CPU call of a training step) pass as
    # they are, with no device census; anything else takes the general path, which also
    # words the errors.
    out = {}
    dtype = None
    for name, x in names_and_arrays.items():
        if x is None:
            out[name] = None
        elif type(x) is np.ndarray and x.flags.c_contiguous:
            if float_names is None or name in float_names:
                # a second array of the accepted dtype holds that very dtype object (NumPy's
                # built-in dtypes are singletons); any other dtype goes the general way
                if dtype is None and x.dtype in FLOAT_DTYPES:
                    dtype = x.dtype
                elif x.dtype is not dtype:
                    return _prepared_in_general(names_and_arrays, float_names)
            out[name] = x
        else:
            return _prepared_in_general(names_and_arrays, float_names)
    return CPU, out


def _prepared_in_general(names_and_arrays, float_names):
    """:func:`prepared` for any arrays: device arrays, strided or non-NumPy ones, bad dtypes."""
    device = (CPU if all(type(x) is np.ndarray or x is None for x in names_and_arrays.values())
              else backend_of(**names_and_arrays))
    float_names = names_and_arrays.keys() if float_names is None else float_names
    dtype = None
    out = {}
    for name, x in names_and_arrays.items():
        if x is None:
            out[name] = None
            continue
        if device != CUDA and not isinstance(x, np.ndarray) and not hasattr(x, "__array__"):
            raise TypeError(f"{name} must be an array, got {type(x).__name__}")
        x = contiguous(name, x, device)
        if name in float_names:
            dt = np.dtype(x.dtype)
            if dt not in FLOAT_DTYPES:
                raise TypeError(f"{name} has dtype {dt}; expected float32 or float64")
            if dtype is None:
                dtype = dt
            elif dt != dtype:
                raise TypeError(f"{name} has dtype {dt} but the other inputs have {dtype}; "
                                f"cast them to one dtype (e.g. {name}.astype({dtype.name}))")
        out[name] = x
    return device, out


def contiguous(name, x, device):
    """x as a C-contiguous array: a copy on the CPU if needed; on the GPU an error instead, since
    a silent device copy would hide a slow path."""
    if device == CUDA:
        if not x.is_c_contiguous():
            raise ValueError(f"{name} is a non-contiguous device array; pass a C-contiguous one "
                             "(copy it on the device first)")
        return x
    x = np.asarray(x)
    # np.ascontiguousarray would turn a 0-d array into shape (1,); 0-d is always contiguous
    return x if x.flags.c_contiguous else np.ascontiguousarray(x)


def expect_shape(name, x, shape, legend):
    """Raise unless x has exactly ``shape``; ``legend`` names the dims, e.g. '(O, K)'."""
    if shape_of(x) != tuple(shape):
        raise ValueError(f"{name} has shape {shape_of(x)}; expected {legend} = {tuple(shape)}")


def expect_last_dim(name, x, size, what):
    if x.ndim == 0 or shape_of(x)[-1] != size:
        raise ValueError(f"{name} has shape {shape_of(x)}; its last dim must be {size} "
                         f"({what})")


def expect_probability(name, p):
    if not isinstance(p, numbers.Real) or not 0.0 <= p < 1.0:
        raise ValueError(f"{name} must be a number in [0, 1), got {p!r}")


def expect_positive(name, value):
    if not isinstance(value, numbers.Real) or not value > 0:
        raise ValueError(f"{name} must be a positive number, got {value!r}")


def rows(x):
    """x viewed as (R, last dim): token rows for the row-wise kernels."""
    last = shape_of(x)[-1]
    return x.reshape(int(x.size) // last if last else 0, last)


def flat(x):
    """x viewed as one flat dimension for the elementwise kernels."""
    return x.reshape(int(x.size))


def expect_updatable(name, original, checked):
    """Raise unless ``checked`` (from :func:`prepared`) is ``original`` itself: an array updated
    in place must not have been copied to make it contiguous, or the update would be lost."""
    if original is not None and checked is not original:
        raise ValueError(f"{name} is updated in place, so it must be a C-contiguous array of its "
                         "own (not a strided view or a list)")
