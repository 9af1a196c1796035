"""Layer normalisation on the GPU; same launchers and semantics as ``kernels/cpu/layer_norm``.

Shapes: x (R, E), weight and bias (E,), mean and rstd (R,). One block per row (of
``block_reduce.row_threads(E)`` threads) computes the row statistics with a shared-memory tree sum
(float64 accumulation, as on the CPU); the weight and bias gradients are column sums over strips
of rows, finished in strip order (no atomics: see ``reductions``).
"""
import math

from numba import cuda, float64

from .block_reduce import ROW_THREADS, block_sum, row_threads
from .grid import THREADS, blocks_for
from .reductions import ROWS_PER_THREAD, add_strip_sums, strip_partials, strips_for


@cuda.jit(cache=True)
def layer_norm_forward_kernel(out, mean, rstd, x, weight, bias, eps):
    scratch = cuda.shared.array(ROW_THREADS, float64)
    r = cuda.blockIdx.x
    t = cuda.threadIdx.x
    E = x.shape[1]
    partial = 0.0
    for e in range(t, E, cuda.blockDim.x):
        partial += x[r, e]
    m = block_sum(scratch, partial) / E
    partial = 0.0
    for e in range(t, E, cuda.blockDim.x):
        d = x[r, e] - m
        partial += d * d
    s = 1.0 / math.sqrt(block_sum(scratch, partial) / E + eps)
    if t == 0:
        mean[r] = m
        rstd[r] = s
    for e in range(t, E, cuda.blockDim.x):
        out[r, e] = (x[r, e] - m) * s * weight[e] + bias[e]


@cuda.jit(cache=True)
def layer_norm_input_grad_kernel(dx, dout, x, mean, rstd, weight):
    scratch = cuda.shared.array(ROW_THREADS, float64)
    r = cuda.blockIdx.x
    t = cuda.threadIdx.x
    E = x.shape[1]
    m = mean[r]
    s = rstd[r]
    # y = xhat * w + b  ->  dxhat = dy * w
    partial_g = 0.0
    partial_gx = 0.0
    for e in range(t, E, cuda.blockDim.x):
        g = dout[r, e] * weight[e]
        partial_g += g
        partial_gx += g * (x[r, e] - m) * s
    mean_g = block_sum(scratch, partial_g) / E
    mean_gx = block_sum(scratch, partial_gx) / E
    # xhat = (x - mean) * rstd  ->  dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat xhat))
    for e in range(t, E, cuda.blockDim.x):
        xhat = (x[r, e] - m) * s
        dx[r, e] = s * (dout[r, e] * weight[e] - mean_g - xhat * mean_gx)


@cuda.jit(cache=True)
def layer_norm_param_grad_kernel(partial_w, partial_b, dout, x, mean, rstd):
    e = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    strip = cuda.blockIdx.y
    R, E = x.shape
    if e >= E:
        return
    # y = xhat * w + b  ->  dw = sum dy * xhat; db = sum dy
    w = 0.0
    b = 0.0
    for r in range(strip * ROWS_PER_THREAD, min(R, (strip + 1) * ROWS_PER_THREAD)):
        w += dout[r, e] * (x[r, e] - mean[r]) * rstd[r]
        b += dout[r, e]
    partial_w[strip, e] = w
    partial_b[strip, e] = b


def layer_norm_forward(out, mean, rstd, x, weight, bias, eps):
    if x.shape[0] == 0:
        return
    layer_norm_forward_kernel[x.shape[0], row_threads(x.shape[1])](out, mean, rstd, x, weight,
                                                                    bias, eps)


def layer_norm_backward(dx, dweight, dbias, dout, x, mean, rstd, weight):
    """dx is overwritten; dweight and dbias are accumulated (+=)."""
    R, E = x.shape
    if R == 0:
        return
    layer_norm_input_grad_kernel[R, row_threads(E)](dx, dout, x, mean, rstd, weight)
    partial_w, partial_b = strip_partials(strips_for(R), E), strip_partials(strips_for(R), E)
    layer_norm_param_grad_kernel[(blocks_for(E), strips_for(R)), THREADS](
        partial_w, partial_b, dout, x, mean, rstd)
    add_strip_sums(dweight, partial_w)
    add_strip_sums(dbias, partial_b)
