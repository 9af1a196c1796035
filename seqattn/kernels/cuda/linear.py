"""Linear map y = x W^T + b on the GPU; same launchers and semantics as ``kernels/cpu/linear``.

Shapes: x (R, K), weight (O, K), bias (O,), y (R, O). The GEMMs go to :func:`.gemm.gemm`
(cuBLAS when installed, a register-blocked numba kernel otherwise).
"""
from numba import cuda

from .gemm import gemm
from .grid import THREADS, blocks_for
from .reductions import sum_over_rows


@cuda.jit(cache=True)
def add_bias_kernel(out, bias):
    i = cuda.grid(1)
    if i < out.size:
        O = bias.size
        out[i // O, i % O] += bias[i % O]


def linear_forward(out, x, weight, bias, has_bias):
    """out (R, O) = x (R, K) @ weight (O, K)^T (+ bias (O,))."""
    gemm(out, x, weight, False, True, False)
    if has_bias:
        add_bias_kernel[blocks_for(out.size), THREADS](out, bias)


def linear_backward(dx, dweight, dbias, dout, x, weight, need_dx, has_bias):
    """Gradients of linear_forward; dweight (unless None) and dbias are accumulated (+=), dx is
    overwritten."""
    # out = x W^T  ->  dx = dout W
    if need_dx:
        gemm(dx, dout, weight, False, False, False)
    # out = x W^T  ->  dW += dout^T x
    if dweight is not None:
        gemm(dweight, dout, x, True, False, True)
    # out += b  ->  db += sum of dout over rows
    if has_bias:
        sum_over_rows(dbias, dout, True)
