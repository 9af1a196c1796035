"""Vectorisable row primitives for the softmax inside the CPU attention kernels: exp and max.

``np.exp`` inside an @njit loop is a scalar libm call on our machines (no SVML), about 2.3 ns per
element, and attention evaluates B*H*N*M of them: the exp decides the kernel's speed. For float32
we compute exp(x) = 2**k * exp(r) with k = round(x * log2(e)) and r = x - k ln 2 (|r| <= ln(2)/2,
subtracted in two parts so that r keeps its precision), exp(r) from a short Taylor polynomial, and
2**k built directly in the float's exponent bits. Written as plain loops
without calls, LLVM vectorises both loops (AVX-512 here). float64 keeps ``np.exp``: it is used
where accuracy matters more than speed (gradient checks).

Accuracy: the degree-7 remainder on |r| <= 0.347 is below 6e-9, so the float32 result is
within about one ulp (pinned by tests/test_fast_exp.py). Inputs at or below -127 * ln 2
(including -inf, which marks masked scores) give exactly 0.

The row max is the other pass LLVM refuses to vectorise when written on floats (numba's float
max keeps NaN semantics; measured 0.6 ns per element, scalar). Mapped to integers that sort like
the floats, it becomes an integer max that vectorises.
"""
import math

import numpy as np
from numba import njit, types
from numba.extending import overload

LOG2E = 1.0 / math.log(2.0)
# Taylor coefficients of exp(r): 1 / n!
C0, C1, C2, C3, C4, C5, C6, C7 = (np.float32(1.0 / math.factorial(n)) for n in range(8))
# ln 2 split so that k * LN2_HI is exact in float32 for |k| <= 128 (its low mantissa bits are 0).
LN2_HI = np.float32(0.693145751953125)
LN2_LO = np.float32(math.log(2.0) - 0.693145751953125)
# Below 2**-127 the result is 0: the biased exponent (k + 127) reaches 0, the bit pattern of +0.0.
MIN_INPUT = np.float32(-127.0 * math.log(2.0))
EXPONENT_BIAS = np.int32(127)
MANTISSA_BITS = np.int32(23)
F32_LOG2E = np.float32(LOG2E)
HALF = np.float32(0.5)
# Reassociation and contraction let the loops vectorise; no nnan/ninf since -inf is meaningful.
FASTMATH = {"reassoc", "contract", "nsz", "arcp", "afn"}


@njit(fastmath=FASTMATH, cache=True)
def _exp_shifted_f32(x, shift, bits):
    n = x.shape[0]
    for j in range(n):
        y = max(x[j] - shift, MIN_INPUT)
        k = np.floor(y * F32_LOG2E + HALF)
        f = (y - k * LN2_HI) - k * LN2_LO
        p = C7
        p = p * f + C6
        p = p * f + C5
        p = p * f + C4
        p = p * f + C3
        p = p * f + C2
        p = p * f + C1
        p = p * f + C0
        x[j] = p
        bits[j] = (np.int32(k) + EXPONENT_BIAS) << MANTISSA_BITS
    two_to_k = bits[:n].view(np.float32)
    total = np.float32(0.0)
    for j in range(n):
        x[j] *= two_to_k[j]
        total += x[j]
    return total


@njit(fastmath=FASTMATH, cache=True)
def _exp_shifted_f64(x, shift, bits):
    total = 0.0
    for j in range(x.shape[0]):
        x[j] = np.exp(x[j] - shift)
        total += x[j]
    return total


def exp_shifted(x, shift, bits):
    """In place, x[j] = exp(x[j] - shift) for a 1-D row, returning the row's new sum (the
    softmax needs it, and summing in the same loop saves a pass); ``bits`` is int32 scratch.

    In place on purpose: with a separate output that may alias x, LLVM's overlap check sends the
    loop down its scalar path (7x slower, measured). Callable from @njit code only; the
    implementation is chosen by dtype at compile time.
    """
    raise NotImplementedError("exp_shifted is only callable from @njit code")


@overload(exp_shifted, jit_options={"cache": True})
def _exp_shifted_impl(x, shift, bits):
    if x.dtype == types.float32:
        return lambda x, shift, bits: _exp_shifted_f32(x, shift, bits)
    return lambda x, shift, bits: _exp_shifted_f64(x, shift, bits)


# A float32's bits, read as int32 and with the low 31 bits flipped when negative, sort like the
# floats themselves (-inf lowest); the map is its own inverse.
SIGN_SHIFT = np.int32(31)
MAGNITUDE_BITS = np.int32(0x7FFFFFFF)
LOWEST_KEY = np.int32(-(2 ** 31))


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
