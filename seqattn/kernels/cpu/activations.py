"""Pointwise activations on the CPU: GELU (exact or tanh), ReLU, SiLU, and the SwiGLU gate.

Arrays are flat (the ops layer ravels them); every array of one call has the same size.
Backward overwrites dx with dout * f'(x).
"""
from numba import njit, prange

from .. import scalar_math

_gelu = njit(inline="always")(scalar_math.gelu)
_gelu_grad = njit(inline="always")(scalar_math.gelu_grad)
_silu = njit(inline="always")(scalar_math.silu)
_silu_grad = njit(inline="always")(scalar_math.silu_grad)


@njit(parallel=True, cache=True)
def gelu_forward(out, x, approximate_tanh):
    for i in prange(x.size):
        out[i] = _gelu(x[i], approximate_tanh)


@njit(parallel=True, cache=True)
def gelu_backward(dx, dout, x, approximate_tanh):
    for i in prange(x.size):
        dx[i] = dout[i] * _gelu_grad(x[i], approximate_tanh)


@njit(parallel=True, cache=True)
def relu_forward(out, x):
    for i in prange(x.size):
        out[i] = x[i] if x[i] > 0 else 0.0


@njit(parallel=True, cache=True)
def relu_backward(dx, dout, x):
    # The gradient at exactly 0 is taken as 0, as torch does.
    for i in prange(x.size):
        dx[i] = dout[i] if x[i] > 0 else 0.0


@njit(parallel=True, cache=True)
def silu_forward(out, x):
    for i in prange(x.size):
        out[i] = _silu(x[i])


@njit(parallel=True, cache=True)
def silu_backward(dx, dout, x):
    for i in prange(x.size):
        dx[i] = dout[i] * _silu_grad(x[i])


@njit(parallel=True, cache=True)
def swiglu_forward(out, gate, up):
    """out = silu(gate) * up."""
    for i in prange(gate.size):
        out[i] = _silu(gate[i]) * up[i]


@njit(parallel=True, cache=True)
def swiglu_backward(dgate, dup, dout, gate, up):
    for i in prange(gate.size):
        dgate[i] = dout[i] * up[i] * _silu_grad(gate[i])
        dup[i] = dout[i] * _silu(gate[i])
