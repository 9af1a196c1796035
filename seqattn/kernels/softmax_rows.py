"""A vectorisable exp for the softmax inside the CPU attention kernels.

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
def _exp_shifted_f32(x, shift, out, bits):
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
        out[j] = p
        bits[j] = (np.int32(k) + EXPONENT_BIAS) << MANTISSA_BITS
    two_to_k = bits[:n].view(np.float32)
    for j in range(n):
        out[j] *= two_to_k[j]


@njit(fastmath=FASTMATH, cache=True)
def _exp_shifted_f64(x, shift, out, bits):
    for j in range(x.shape[0]):
        out[j] = np.exp(x[j] - shift)


def exp_shifted(x, shift, out, bits):
    """out[j] = exp(x[j] - shift) for a 1-D row; ``bits`` is int32 scratch at least as long.

    ``out`` may be ``x`` itself. Callable from @njit code only; the implementation is chosen by
    dtype at compile time.
    """
    raise NotImplementedError("exp_shifted is only callable from @njit code")


@overload(exp_shifted, jit_options={"cache": True})
def _exp_shifted_impl(x, shift, out, bits):
    if x.dtype == types.float32:
        return lambda x, shift, out, bits: _exp_shifted_f32(x, shift, out, bits)
    return lambda x, shift, out, bits: _exp_shifted_f64(x, shift, out, bits)
