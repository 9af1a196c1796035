"""RMS normalisation on the GPU; same launchers and semantics as ``kernels/cpu/rms_norm``.

Shapes: x (R, E), weight (E,), rstd (R,). One block per row, as in ``cuda/layer_norm``.
"""
import math

from numba import cuda, float64

from .grid import THREADS, blocks_for
from .block_reduce import ROW_THREADS, block_sum

ROWS_PER_THREAD = 64


@cuda.jit(cache=True)
def rms_norm_forward_kernel(out, rstd, x, weight, eps):
    scratch = cuda.shared.array(ROW_THREADS, float64)
    r = cuda.blockIdx.x
    t = cuda.threadIdx.x
    E = x.shape[1]
    partial = 0.0
    for e in range(t, E, ROW_THREADS):
        partial += x[r, e] * x[r, e]
    s = 1.0 / math.sqrt(block_sum(scratch, partial) / E + eps)
    if t == 0:
        rstd[r] = s
    for e in range(t, E, ROW_THREADS):
        out[r, e] = x[r, e] * s * weight[e]


@cuda.jit(cache=True)
def rms_norm_input_grad_kernel(dx, dout, x, rstd, weight):
    scratch = cuda.shared.array(ROW_THREADS, float64)
    r = cuda.blockIdx.x
    t = cuda.threadIdx.x
    E = x.shape[1]
    s = rstd[r]
    partial = 0.0
    for e in range(t, E, ROW_THREADS):
        partial += dout[r, e] * weight[e] * x[r, e] * s
    mean_gx = block_sum(scratch, partial) / E
    # xhat = x * rstd(x)  ->  dx = rstd * (dxhat - xhat * mean(dxhat xhat))
    for e in range(t, E, ROW_THREADS):
        dx[r, e] = s * (dout[r, e] * weight[e] - x[r, e] * s * mean_gx)


@cuda.jit(cache=True)
def rms_norm_param_grad_kernel(dweight, dout, x, rstd):
    e = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    strip = cuda.blockIdx.y
    R, E = x.shape
    if e >= E:
        return
    w = 0.0
    for r in range(strip * ROWS_PER_THREAD, min(R, (strip + 1) * ROWS_PER_THREAD)):
        w += dout[r, e] * x[r, e] * rstd[r]
    cuda.atomic.add(dweight, e, w)


def rms_norm_forward(out, rstd, x, weight, eps):
    if x.shape[0] == 0:
        return
    rms_norm_forward_kernel[x.shape[0], ROW_THREADS](out, rstd, x, weight, eps)


def rms_norm_backward(dx, dweight, dout, x, rstd, weight):
    """dx is overwritten; dweight is accumulated (+=)."""
    R, E = x.shape
    if R == 0:
        return
    rms_norm_input_grad_kernel[R, ROW_THREADS](dx, dout, x, rstd, weight)
    strips = (R + ROWS_PER_THREAD - 1) // ROWS_PER_THREAD
    rms_norm_param_grad_kernel[(blocks_for(E), strips), THREADS](dweight, dout, x, rstd)
