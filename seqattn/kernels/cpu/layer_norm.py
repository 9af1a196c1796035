"""Layer normalisation over the last axis on the CPU, forward and backward.

Shapes: x (R, E) token rows, weight and bias (E,), mean and rstd (R,) saved for backward.
y = (x - mean) * rstd * weight + bias, rstd = 1 / sqrt(var + eps) (biased variance, as torch).
Row statistics accumulate in float64 so float32 rows of thousands of features stay accurate.
"""
import numpy as np
from numba import njit, prange

from .threads import sized_kernel

# Elements a thread must have before a launch takes it (benchmarks/small_launches.py).
GRAIN = 1 << 15


@sized_kernel(GRAIN)
def layer_norm_forward(out, mean, rstd, x, weight, bias, eps):
    R, E = x.shape
    for r in prange(R):
        m = 0.0
        for e in range(E):
            m += x[r, e]
        m /= E
        var = 0.0
        for e in range(E):
            d = x[r, e] - m
            var += d * d
        s = 1.0 / np.sqrt(var / E + eps)
        mean[r] = m
        rstd[r] = s
        for e in range(E):
            out[r, e] = (x[r, e] - m) * s * weight[e] + bias[e]


@sized_kernel(GRAIN)
def _layer_norm_backward(dx, dweight, dbias, dout, x, mean, rstd, weight, threads):
    R, E = x.shape
    chunks = min(R, threads)
    partial_w = np.zeros((chunks, E), dtype=np.float64)
    partial_b = np.zeros((chunks, E), dtype=np.float64)
    for c in prange(chunks):
        for r in range(c * R // chunks, (c + 1) * R // chunks):
            m = mean[r]
            s = rstd[r]
            # y = xhat * w + b  ->  dxhat = dy * w; dw = sum dy * xhat; db = sum dy
            mean_g = 0.0
            mean_gx = 0.0
            for e in range(E):
                xhat = (x[r, e] - m) * s
                g = dout[r, e] * weight[e]
                mean_g += g
                mean_gx += g * xhat
                partial_w[c, e] += dout[r, e] * xhat
                partial_b[c, e] += dout[r, e]
            mean_g /= E
            mean_gx /= E
            # xhat = (x - mean) * rstd
            #   ->  dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat xhat))
            for e in range(E):
                xhat = (x[r, e] - m) * s
                dx[r, e] = s * (dout[r, e] * weight[e] - mean_g - xhat * mean_gx)
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
