"""Pointwise activations on the GPU; same launchers and semantics as ``kernels/cpu/activations``.

Arrays are flat device arrays of one size. The formulas are the CPU's (``kernels/scalar_math``).
"""
from numba import cuda

from .. import scalar_math
from .grid import THREADS, blocks_for

_gelu = cuda.jit(device=True)(scalar_math.gelu)
_gelu_grad = cuda.jit(device=True)(scalar_math.gelu_grad)
_silu = cuda.jit(device=True)(scalar_math.silu)
_silu_grad = cuda.jit(device=True)(scalar_math.silu_grad)


@cuda.jit(cache=True)
def gelu_forward_kernel(out, x, approximate_tanh):
    i = cuda.grid(1)
    if i < x.size:
        out[i] = _gelu(x[i], approximate_tanh)


@cuda.jit(cache=True)
def gelu_backward_kernel(dx, dout, x, approximate_tanh):
    i = cuda.grid(1)
    if i < x.size:
        dx[i] = dout[i] * _gelu_grad(x[i], approximate_tanh)


@cuda.jit(cache=True)
def relu_forward_kernel(out, x):
    i = cuda.grid(1)
    if i < x.size:
        out[i] = x[i] if x[i] > 0 else 0.0


@cuda.jit(cache=True)
def relu_backward_kernel(dx, dout, x):
    i = cuda.grid(1)
    if i < x.size:
        dx[i] = dout[i] if x[i] > 0 else 0.0


@cuda.jit(cache=True)
def silu_forward_kernel(out, x):
    i = cuda.grid(1)
    if i < x.size:
        out[i] = _silu(x[i])


@cuda.jit(cache=True)
def silu_backward_kernel(dx, dout, x):
    i = cuda.grid(1)
    if i < x.size:
        dx[i] = dout[i] * _silu_grad(x[i])


@cuda.jit(cache=True)
def swiglu_forward_kernel(out, gate, up):
    i = cuda.grid(1)
    if i < gate.size:
        out[i] = _silu(gate[i]) * up[i]


@cuda.jit(cache=True)
def swiglu_backward_kernel(dgate, dup, dout, gate, up):
    i = cuda.grid(1)
    if i < gate.size:
        dgate[i] = dout[i] * up[i] * _silu_grad(gate[i])
        dup[i] = dout[i] * _silu(gate[i])


def _grid(x):
    return blocks_for(x.size), THREADS


def gelu_forward(out, x, approximate_tanh):
    gelu_forward_kernel[_grid(x)](out, x, approximate_tanh)


def gelu_backward(dx, dout, x, approximate_tanh):
    gelu_backward_kernel[_grid(x)](dx, dout, x, approximate_tanh)


def relu_forward(out, x):
    relu_forward_kernel[_grid(x)](out, x)


def relu_backward(dx, dout, x):
    relu_backward_kernel[_grid(x)](dx, dout, x)


def silu_forward(out, x):
    silu_forward_kernel[_grid(x)](out, x)


def silu_backward(dx, dout, x):
    silu_backward_kernel[_grid(x)](dx, dout, x)


def swiglu_forward(out, gate, up):
    """out = silu(gate) * up."""
    swiglu_forward_kernel[_grid(gate)](out, gate, up)


def swiglu_backward(dgate, dup, dout, gate, up):
    swiglu_backward_kernel[_grid(gate)](dgate, dup, dout, gate, up)
