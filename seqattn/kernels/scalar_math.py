"""Scalar formulas shared by the CPU and CUDA kernels, written once as plain Python.

Each kernel family compiles them for its target (``njit`` on the CPU, ``cuda.jit(device=True)``
on the GPU), so both devices evaluate exactly the same expressions. The functions do not call
each other: a compiled function can only call compiled globals.
"""
import math

from numba import uint64

SQRT_HALF = 0.7071067811865476  # 1 / sqrt(2)
INV_SQRT_2PI = 0.3989422804014327  # 1 / sqrt(2 pi)
SQRT_2_OVER_PI = 0.7978845608028654  # sqrt(2 / pi)
GELU_TANH_CUBIC = 0.044715  # the cubic coefficient of GELU's tanh approximation
TWO_POW_MINUS_53 = 1.1102230246251565e-16


def gelu(x, approximate_tanh):
    if approximate_tanh:
        return 0.5 * x * (1.0 + math.tanh(SQRT_2_OVER_PI * (x + GELU_TANH_CUBIC * x * x * x)))
    return 0.5 * x * (1.0 + math.erf(x * SQRT_HALF))


def gelu_grad(x, approximate_tanh):
    if approximate_tanh:
        t = math.tanh(SQRT_2_OVER_PI * (x + GELU_TANH_CUBIC * x * x * x))
        inner_grad = SQRT_2_OVER_PI * (1.0 + 3.0 * GELU_TANH_CUBIC * x * x)
        return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * inner_grad
    # d/dx [x Phi(x)] = Phi(x) + x phi(x)
    return 0.5 * (1.0 + math.erf(x * SQRT_HALF)) + x * INV_SQRT_2PI * math.exp(-0.5 * x * x)


def silu(x):
    # For very negative x, exp(-x) overflows to inf and the result is -0, not NaN.
    return x / (1.0 + math.exp(-x))


def silu_grad(x):
    s = 1.0 / (1.0 + math.exp(-x))
    return s * (1.0 + x * (1.0 - s))


def uniform_from_counter(seed, i):
    """A uniform number in [0, 1) determined by (seed, i) alone: a counter-based generator.

    Dropout recomputes its mask in backward from the seed instead of storing it, and the CPU and
    GPU kernels draw the same mask for the same seed. The hash is SplitMix64's; every operand is
    uint64 because Numba would promote a mixed signed/unsigned expression to float.
    """
    z = uint64(seed) + (uint64(i) + uint64(1)) * uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> uint64(30))) * uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> uint64(27))) * uint64(0x94D049BB133111EB)
    z = z ^ (z >> uint64(31))
    # The top 53 bits as a fraction.
    return float(z >> uint64(11)) * TWO_POW_MINUS_53
