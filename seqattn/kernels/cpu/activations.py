"""Pointwise activations on the CPU: GELU (exact or tanh), ReLU, SiLU, and the SwiGLU gate.

Arrays are flat (the ops layer ravels them); every array of one call has the same size.
Backward overwrites dx with dout * f'(x). Exact GELU on float32 takes a vectorised path
(``float32_math``); everything else evaluates the shared libm formulas of ``scalar_math``.
"""
import numpy as np
from numba import prange

from .. import scalar_math
from .float32_math import FASTMATH, gelu_parts_f32
from .jit_options import njit
from .threads import sized_kernel

_gelu = njit(inline="always")(scalar_math.gelu)
_gelu_grad = njit(inline="always")(scalar_math.gelu_grad)
_silu = njit(inline="always")(scalar_math.silu)
_silu_grad = njit(inline="always")(scalar_math.silu_grad)


# Elements a thread must have before a launch takes it (benchmarks/small_launches.py).
GRAIN = 1 << 14
# Elements per parallel task of the float32 GELU: the inner loops run over contiguous chunks
# because a prange body itself does not vectorise (numba#2680).
CHUNK = 16384
# The inner loops vectorise only with reassociation allowed and without Numba's check for a
# zero divisor (its ZeroDivisionError branch); 1 / (1 + 0.35 |x|) never divides by zero.
VECTORISE = dict(fastmath=FASTMATH, error_model="numpy", cache=True)


@njit(**VECTORISE)
def _gelu_chunk_f32(out, x):
    for i in range(x.size):
        cdf, _ = gelu_parts_f32(x[i])
        out[i] = x[i] * cdf


@njit(**VECTORISE)
def _gelu_grad_chunk_f32(dx, dout, x):
    for i in range(x.size):
        cdf, density = gelu_parts_f32(x[i])
        # d/dx [x Phi(x)] = Phi(x) + x phi(x)
        dx[i] = dout[i] * (cdf + x[i] * density)


@sized_kernel(GRAIN)
def _gelu_forward_f32(out, x):
    for c in prange((x.size + CHUNK - 1) // CHUNK):
        _gelu_chunk_f32(out[c * CHUNK:(c + 1) * CHUNK], x[c * CHUNK:(c + 1) * CHUNK])


@sized_kernel(GRAIN)
def _gelu_backward_f32(dx, dout, x):
    for c in prange((x.size + CHUNK - 1) // CHUNK):
        chunk = slice(c * CHUNK, (c + 1) * CHUNK)
        _gelu_grad_chunk_f32(dx[chunk], dout[chunk], x[chunk])


@sized_kernel(GRAIN)
def _gelu_forward(out, x, approximate_tanh):
    for i in prange(x.size):
        out[i] = _gelu(x[i], approximate_tanh)


@sized_kernel(GRAIN)
def _gelu_backward(dx, dout, x, approximate_tanh):
    for i in prange(x.size):
        dx[i] = dout[i] * _gelu_grad(x[i], approximate_tanh)


def _fast_gelu(x, approximate_tanh):
    return x.dtype == np.float32 and not approximate_tanh


def gelu_forward(out, x, approximate_tanh):
    if _fast_gelu(x, approximate_tanh):
        _gelu_forward_f32(out, x)
    else:
        _gelu_forward(out, x, approximate_tanh)


def gelu_backward(dx, dout, x, approximate_tanh):
    if _fast_gelu(x, approximate_tanh):
        _gelu_backward_f32(dx, dout, x)
    else:
        _gelu_backward(dx, dout, x, approximate_tanh)


@sized_kernel(GRAIN)
def relu_forward(out, x):
    for i in prange(x.size):
        out[i] = x[i] if x[i] > 0 else 0.0


@sized_kernel(GRAIN)
def relu_backward(dx, dout, x):
    # The gradient at exactly 0 is taken as 0, as torch does.
    for i in prange(x.size):
        dx[i] = dout[i] if x[i] > 0 else 0.0


@sized_kernel(GRAIN)
def silu_forward(out, x):
    for i in prange(x.size):
        out[i] = _silu(x[i])


@sized_kernel(GRAIN)
def silu_backward(dx, dout, x):
    for i in prange(x.size):
        dx[i] = dout[i] * _silu_grad(x[i])


@sized_kernel(GRAIN)
def swiglu_forward(out, gate, up):
    """out = silu(gate) * up."""
    for i in prange(gate.size):
        out[i] = _silu(gate[i]) * up[i]


@sized_kernel(GRAIN)
def swiglu_backward(dgate, dup, dout, gate, up):
    for i in prange(gate.size):
        dgate[i] = dout[i] * up[i] * _silu_grad(gate[i])
        dup[i] = dout[i] * _silu(gate[i])
