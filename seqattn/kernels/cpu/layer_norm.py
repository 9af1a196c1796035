"""Layer normalisation over the last axis on the CPU, forward and backward.

Shapes: x (R, E) token rows, weight and bias (E,), mean and rstd (R,) saved for backward.
y = (x - mean) * rstd * weight + bias, rstd = 1 / sqrt(var + eps) (biased variance, as torch).
Row statistics accumulate in float64 so float32 rows of thousands of features stay accurate.
Each row is its own inlined function, so that its loops vectorise inside the parallel loop
(numba#2680); reassociation lets the sums vectorise (NaN and inf keep their meaning).
"""
import numpy as np
from numba import njit, prange

from .float32_math import FASTMATH
from .threads import sized_kernel

# Elements a thread must have before a launch takes it (benchmarks/small_launches.py): the
# backward's rows cost more, but it also sums its parameter gradients over all threads' chunks.
GRAIN = 1 << 13
BACKWARD_GRAIN = 1 << 15
ROW = dict(cache=True, fastmath=FASTMATH, error_model="numpy")


@njit(**ROW)
def _normalize_row(out, x, weight, bias, eps):
    """out (E,) = the normalised row x (E,); returns its (mean, rstd)."""
    E = x.size
    m = 0.0
    for e in range(E):
        m += x[e]
    m /= E
    var = 0.0
    for e in range(E):
        d = x[e] - m
        var += d * d
    s = 1.0 / np.sqrt(var / E + eps)
    for e in range(E):
        out[e] = (x[e] - m) * s * weight[e] + bias[e]
    return m, s


@sized_kernel(GRAIN)
def layer_norm_forward(out, mean, rstd, x, weight, bias, eps):
    for r in prange(x.shape[0]):
        mean[r], rstd[r] = _normalize_row(out[r], x[r], weight, bias, eps)


@njit(**ROW)
def _row_backward(dx, partial_w, partial_b, dout, x, m, s, weight):
    """dx (E,) of one row; its weight and bias gradients added into partial_w, partial_b."""
    E = x.size
    # y = xhat * w + b  ->  dxhat = dy * w; dw = sum dy * xhat; db = sum dy
    mean_g = 0.0
    mean_gx = 0.0
    for e in range(E):
        xhat = (x[e] - m) * s
        g = dout[e] * weight[e]
        mean_g += g
        mean_gx += g * xhat
        partial_w[e] += dout[e] * xhat
        partial_b[e] += dout[e]
    mean_g /= E
    mean_gx /= E
    # xhat = (x - mean) * rstd
    #   ->  dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat xhat))
    for e in range(E):
        xhat = (x[e] - m) * s
        dx[e] = s * (dout[e] * weight[e] - mean_g - xhat * mean_gx)


@sized_kernel(BACKWARD_GRAIN)
def _layer_norm_backward(dx, dweight, dbias, dout, x, mean, rstd, weight, threads):
    R, E = x.shape
    chunks = min(R, threads)
    partial_w = np.zeros((chunks, E), dtype=np.float64)
    partial_b = np.zeros((chunks, E), dtype=np.float64)
    for c in prange(chunks):
        for r in range(c * R // chunks, (c + 1) * R // chunks):
            _row_backward(dx[r], partial_w[c], partial_b[c], dout[r], x[r], mean[r], rstd[r],
                          weight)
    for e in range(E):
        w = 0.0
        b = 0.0
        for c in range(chunks):
            w += partial_w[c, e]
            b += partial_b[c, e]
        dweight[e] += w
        dbias[e] += b


def layer_norm_backward(dx, dweight, dbias, dout, x, mean, rstd, weight):
    """dx is overwritten; dweight and dbias are accumulated (+=)."""
    # The kernel splits rows into one chunk per thread; the count is passed in, since a
    # kernel that reads it cannot be cached.
    threads = _layer_norm_backward.threads(x.size)
    _layer_norm_backward.run(threads, dx, dweight, dbias, dout, x, mean, rstd, weight, threads)
