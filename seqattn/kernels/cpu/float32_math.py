"""float32 exp, log, sine and cosine, and the Gaussian tail, as inline scalar functions that
LLVM vectorises inside loops.

``math.erf`` and ``math.exp`` in an @njit loop are scalar libm calls on our machines (no SVML):
about 2.3 ns per exp, and attention evaluates B*H*N*M of them; exact GELU spent about 14 ns per
element in its backward. These replacements are plain arithmetic, so a loop over them compiles
to AVX-512 code. They are for float32 only; float64 kernels keep libm (gradient checks want its
accuracy).

exp(y) = 2**k * exp(r) with k = round(y log2 e) and r = y - k ln 2 (|r| <= ln(2)/2, subtracted
in two parts so that r keeps its precision), exp(r) from its degree-7 Taylor polynomial (remainder
below 6e-9) and 2**k built in the float's exponent bits: within about two ulps, and inputs at or
below -127 ln 2 (-inf, which marks masked scores, included) give exactly 0. Pinned by
tests/kernels/test_float32_math.py.

Gaussian tail Q(a) = P(Z > a) for a >= 0, written as exp(-a^2 / 2) * R(t) with t = 1 / (1 + 0.35 a):
R is Q's Mills-ratio factor 0.5 * erfcx(a / sqrt 2), smooth in t on (0, 1], so a degree-9
polynomial fits it (relative-error least squares on a in [0, 14], max relative error 2.7e-8 in
float64; about 4e-7, a few ulps, evaluated in float32). Q keeps its relative accuracy deep in the
tail, where 1 - Phi(a) computed from erf would cancel. Pinned by
tests/kernels/test_kernels_activations.py::test_gelu_float32_fast_path.

log(x) for normal x > 0 = e ln 2 + log(m) with x = 2**e m, m in [sqrt(1/2), sqrt(2)) taken from
the float's bits, and log(m) = 2 atanh(s), s = (m - 1) / (m + 1), |s| < 0.172, from its odd
series to s**9 (remainder below 1e-9); 0 gives -inf. sin and cos of u in [0, pi/2] from their
Taylor series to u**13 and u**14 (remainders below 7e-10), so sin keeps its relative accuracy
at small u, where a distance bias's envelope log(cos(a d)) needs it: callers pass u = pi/2 - a d
computed without cancellation and read cos(a d) as sin(u). Pinned by
tests/kernels/test_float32_math.py.
"""
import math

import numpy as np
from llvmlite import ir
from numba import types
from numba.extending import intrinsic

from .jit_options import njit

# Reassociation and contraction let loops vectorise; no nnan/ninf since -inf is meaningful.
FASTMATH = {"reassoc", "contract", "nsz", "arcp", "afn"}

# Taylor coefficients of exp(r): 1 / n!
C0, C1, C2, C3, C4, C5, C6, C7 = (np.float32(1.0 / math.factorial(n)) for n in range(8))
# ln 2 split so that k * LN2_HI is exact in float32 for |k| <= 128 (its low mantissa bits are 0).
LN2_HI = np.float32(0.693145751953125)
LN2_LO = np.float32(math.log(2.0) - 0.693145751953125)
# Below 2**-127 the result is 0: the biased exponent (k + 127) reaches 0, the bit pattern of +0.0.
MIN_INPUT = np.float32(-127.0 * math.log(2.0))
EXPONENT_BIAS = np.int32(127)
MANTISSA_BITS = np.int32(23)
F32_LOG2E = np.float32(1.0 / math.log(2.0))
HALF = np.float32(0.5)

TAIL_T_SCALE = np.float32(0.35)
# R(t) coefficients, highest power first (see the module docstring for the fit).
R9, R8, R7, R6, R5, R4, R3, R2, R1, R0 = (np.float32(c) for c in (
    -0.028045890146211325, 0.13825943564880153, -0.24294820895725103, 0.1431070259992666,
    -0.010599903404163983, 0.09927984593444458, 0.12180909064541776, 0.13947763216429082,
    0.13966284496135273, -1.886276159653171e-06))
ONE = np.float32(1.0)
MINUS_HALF = np.float32(-0.5)
INV_SQRT_2PI = np.float32(1.0 / math.sqrt(2.0 * math.pi))


LN2 = np.float32(math.log(2.0))
SQRT_HALF = np.float32(math.sqrt(0.5))
MANTISSA_MASK = np.int32((1 << 23) - 1)
ONE_BITS = np.int32(127 << 23)
TWO = np.float32(2.0)
# 1 / (2 n + 1) of the atanh series, n = 1 .. 4
A3, A5, A7, A9 = (np.float32(1.0 / n) for n in (3, 5, 7, 9))
# (-1)**n / (2 n + 1)! and (-1)**n / (2 n)!, n = 1 .. 7
S3, S5, S7, S9, S11, S13 = (np.float32((-1) ** n / math.factorial(2 * n + 1)) for n in range(1, 7))
K2, K4, K6, K8, K10, K12, K14 = (np.float32((-1) ** n / math.factorial(2 * n)) for n in range(1, 8))


@intrinsic
def _bits_of_float32(typingctx, x):
    """The int32 bit pattern of the float32 ``x`` (a register move, no memory)."""
    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.IntType(32))

    return types.int32(types.float32), codegen


@intrinsic
def _float32_from_bits(typingctx, bits):
    """The float32 whose bit pattern is the int32 ``bits`` (a register move, no memory)."""
    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.FloatType())

    return types.float32(types.int32), codegen


@njit(inline="always")
def exp_f32(y):
    y = max(y, MIN_INPUT)
    k = np.floor(y * F32_LOG2E + HALF)
    r = (y - k * LN2_HI) - k * LN2_LO
    p = C7
    p = p * r + C6
    p = p * r + C5
    p = p * r + C4
    p = p * r + C3
    p = p * r + C2
    p = p * r + C1
    p = p * r + C0
    return p * _float32_from_bits((np.int32(k) + EXPONENT_BIAS) << MANTISSA_BITS)


@njit(inline="always")
def gaussian_tail_f32(a, density):
    """Q(a) = P(Z > a) for a >= 0, given density = exp(-a^2 / 2) (callers reuse it)."""
    t = ONE / (ONE + TAIL_T_SCALE * a)
    p = R9
    p = p * t + R8
    p = p * t + R7
    p = p * t + R6
    p = p * t + R5
    p = p * t + R4
    p = p * t + R3
    p = p * t + R2
    p = p * t + R1
    p = p * t + R0
    return density * p


@njit(inline="always")
def gelu_parts_f32(x):
    """(Phi(x), phi(x)): the standard normal CDF and density at float32 x."""
    a = abs(x)
    density = exp_f32(MINUS_HALF * a * a)
    tail = gaussian_tail_f32(a, density)
    cdf = ONE - tail if x > 0 else tail
    return cdf, density * INV_SQRT_2PI


@njit(inline="always")
def log_f32(x):
    """log(x) for float32 x >= 0 (normal or 0; 0 gives -inf), a few ulps (module docstring)."""
    bits = _bits_of_float32(x)
    e = (bits >> MANTISSA_BITS) - EXPONENT_BIAS
    m = _float32_from_bits((bits & MANTISSA_MASK) | ONE_BITS)  # in [1, 2)
    high = m > TWO * SQRT_HALF
    m = m * HALF if high else m
    e = e + 1 if high else e
    s = (m - ONE) / (m + ONE)
    s2 = s * s
    p = A9
    p = p * s2 + A7
    p = p * s2 + A5
    p = p * s2 + A3
    p = p * s2 + ONE
    value = np.float32(e) * LN2 + TWO * s * p
    return value if x > 0 else np.float32(-np.inf)


@njit(inline="always")
def sin_cos_f32(u):
    """(sin u, cos u) for float32 u in [0, pi/2] (module docstring)."""
    u2 = u * u
    s = S13
    s = s * u2 + S11
    s = s * u2 + S9
    s = s * u2 + S7
    s = s * u2 + S5
    s = s * u2 + S3
    s = s * u2 + ONE
    c = K14
    c = c * u2 + K12
    c = c * u2 + K10
    c = c * u2 + K8
    c = c * u2 + K6
    c = c * u2 + K4
    c = c * u2 + K2
    c = c * u2 + ONE
    return u * s, c
