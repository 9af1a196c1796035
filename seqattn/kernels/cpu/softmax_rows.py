"""Vectorisable row primitives for the softmax inside the CPU attention kernels: exp and max.

Both run over one contiguous row of a score tile. The float32 exp is ``float32_math.exp_f32``
inlined into a loop that also sums the row (the softmax needs the sum, and one pass saves a
memory sweep); float64 keeps ``np.exp``.

The row max is the pass LLVM refuses to vectorise when written on floats (Numba's float max keeps
NaN semantics: measured 0.6 ns per element, scalar). Mapped to integers that sort like the
floats, it becomes an integer max that vectorises. Pinned by tests/test_float32_math.py.
"""
import numpy as np
from numba import njit, types
from numba.extending import overload

from .float32_math import FASTMATH, exp_f32

# A float32's bits, read as int32 and with the low 31 bits flipped when negative, sort like the
# floats themselves (-inf lowest); the map is its own inverse.
SIGN_SHIFT = np.int32(31)
MAGNITUDE_BITS = np.int32(0x7FFFFFFF)
LOWEST_KEY = np.int32(-(2 ** 31))


@njit(fastmath=FASTMATH, cache=True)
def _exp_shifted_f32(x, shift):
    total = np.float32(0.0)
    for j in range(x.shape[0]):
        x[j] = exp_f32(x[j] - shift)
        total += x[j]
    return total


@njit(fastmath=FASTMATH, cache=True)
def _exp_shifted_f64(x, shift):
    total = 0.0
    for j in range(x.shape[0]):
        x[j] = np.exp(x[j] - shift)
        total += x[j]
    return total


def exp_shifted(x, shift):
    """In place, x[j] = exp(x[j] - shift) for a contiguous 1-D row; returns the row's new sum.

    In place on purpose: with a separate output that may alias x, LLVM's overlap check sends the
    loop down its scalar path (7x slower, measured). Callable from @njit code only; the
    implementation is chosen by dtype at compile time.
    """
    raise NotImplementedError("exp_shifted is only callable from @njit code")


@overload(exp_shifted, jit_options={"cache": True})
def _exp_shifted_impl(x, shift):
    if x.dtype == types.float32:
        return lambda x, shift: _exp_shifted_f32(x, shift)
    return lambda x, shift: _exp_shifted_f64(x, shift)


@njit(cache=True)
def _row_max_f32(x, bits):
    keys = x.view(np.int32)
    best = LOWEST_KEY
    for j in range(keys.shape[0]):
        key = keys[j] ^ ((keys[j] >> SIGN_SHIFT) & MAGNITUDE_BITS)
        best = key if key > best else best
    bits[0] = best ^ ((best >> SIGN_SHIFT) & MAGNITUDE_BITS)
    return bits[:1].view(np.float32)[0]


@njit(cache=True)
def _row_max_f64(x, bits):
    best = -np.inf
    for j in range(x.shape[0]):
        best = max(best, x[j])
    return best


def row_max(x, bits):
    """The largest value of a contiguous 1-D row (-inf for an all -inf row); ``bits`` is int32
    scratch of length >= 1. Callable from @njit code only."""
    raise NotImplementedError("row_max is only callable from @njit code")


@overload(row_max, jit_options={"cache": True})
def _row_max_impl(x, bits):
    if x.dtype == types.float32:
        return lambda x, bits: _row_max_f32(x, bits)
    return lambda x, bits: _row_max_f64(x, bits)
