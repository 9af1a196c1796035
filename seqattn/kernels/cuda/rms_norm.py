"""RMS normalisation on the GPU; same launchers and semantics as ``kernels/cpu/rms_norm``.

Shapes: x (R, E), weight (E,), rstd (R,). One block per row, as in ``cuda/layer_norm``; the
weight gradient is a column sum over strips of rows, finished in strip order (no atomics).
"""
import math

from numba import cuda, float64

from .block_reduce import ROW_THREADS, block_sum, row_threads
from .grid import THREADS, blocks_for
from .reductions import ROWS_PER_THREAD, add_strip_sums, strip_partials, strips_for


@cuda.jit(cache=True)
def rms_norm_forward_kernel(out, rstd, x, weight, eps):
    scratch = cuda.shared.array(ROW_THREADS, float64)
    r = cuda.blockIdx.x
    t = cuda.threadIdx.x
    E = x.shape[1]
    partial = 0.0
    for e in range(t, E, cuda.blockDim.x):
        partial += x[r, e] * x[r, e]
    s = 1.0 / math.sqrt(block_sum(scratch, partial) / E + eps)
    if t == 0:
        rstd[r] = s
    for e in range(t, E, cuda.blockDim.x):
        out[r, e] = x[r, e] * s * weight[e]


@cuda.jit(cache=True)
def rms_norm_input_grad_kernel(dx, dout, x, rstd, weight):
    scratch = cuda.shared.array(ROW_THREADS, float64)
    r = cuda.blockIdx.x
    t = cuda.threadIdx.x
    E = x.shape[1]
    s = rstd[r]
    partial = 0.0
    for e in range(t, E, cuda.blockDim.x):
        partial += dout[r, e] * weight[e] * x[r, e] * s
    mean_gx = block_sum(scratch, partial) / E
    # xhat = x * rstd(x)  ->  dx = rstd * (dxhat - xhat * mean(dxhat xhat))
    for e in range(t, E, cuda.blockDim.x):
        dx[r, e] = s * (dout[r, e] * weight[e] - x[r, e] * s * mean_gx)


@cuda.jit(cache=True)
def rms_norm_param_grad_kernel(partial_w, dout, x, rstd):
    e = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    strip = cuda.blockIdx.y
    R, E = x.shape
    if e >= E:
        return
    w = 0.0
    for r in range(strip * ROWS_PER_THREAD, min(R, (strip + 1) * ROWS_PER_THREAD)):
        w += dout[r, e] * x[r, e] * rstd[r]
    partial_w[strip, e] = w


def rms_norm_forward(out, rstd, x, weight, eps):
    if x.shape[0] == 0:
        return
    rms_norm_forward_kernel[x.shape[0], row_threads(x.shape[1])](out, rstd, x, weight, eps)


def rms_norm_backward(dx, dweight, dout, x, rstd, weight):
    """dx is overwritten; dweight is accumulated (+=)."""
    R, E = x.shape
    if R == 0:
        return
    rms_norm_input_grad_kernel[R, row_threads(E)](dx, dout, x, rstd, weight)
    partial_w = strip_partials(strips_for(R), E)
    rms_norm_param_grad_kernel[(blocks_for(E), strips_for(R)), THREADS](partial_w, dout, x, rstd)
    add_strip_sums(dweight, partial_w)
