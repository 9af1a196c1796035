"""Layer normalisation over the last axis on the CPU, forward and backward.

Shapes: x (R, E) token rows, weight and bias (E,), mean and rstd (R,) saved for backward.
y = (x - mean) * rstd * weight + bias, rstd = 1 / sqrt(var + eps) (biased variance, as torch).
Row statistics accumulate in float64 so float32 rows of thousands of features stay accurate.
The rows' loops live in their own functions, so that they vectorise inside the parallel loop
(numba#2680); each call takes a run of rows, since a call per row cost more than the work of a
short row (measured on rows of 16-64 features, forward and backward). Reassociation lets the
sums vectorise (NaN and inf keep their meaning).
"""
import numpy as np
from numba import prange

from .float32_math import FASTMATH
from .jit_options import njit
from .threads import sized_kernel

# Elements a thread must have before a launch takes it (benchmarks/small_launches.py): the
# backward's rows cost more, but it also sums its parameter gradients over all threads' chunks.
GRAIN = 1 << 13
BACKWARD_GRAIN = 1 << 15
# Rows in one call of the forward's row function (a block of the parallel loop).
ROWS = 16
ROW = dict(cache=True, fastmath=FASTMATH, error_model="numpy")


@njit(**ROW)
def _normalize_rows(out, mean, rstd, x, weight, bias, eps, first, last):
    """out[first:last] = the normalised rows x[first:last]; their mean and rstd saved."""
    E = x.shape[1]
    for r in range(first, last):
        m = 0.0
        for e in range(E):
            m += x[r, e]
        m /= E
        var = 0.0
        for e in range(E):
            d = x[r, e] - m
            var += d * d
        s = 1.0 / np.sqrt(var / E + eps)
        for e in range(E):
            out[r, e] = (x[r, e] - m) * s * weight[e] + bias[e]
        mean[r] = m
        rstd[r] = s


@sized_kernel(GRAIN)
def layer_norm_forward(out, mean, rstd, x, weight, bias, eps):
    R = x.shape[0]
    for block in prange((R + ROWS - 1) // ROWS):
        _normalize_rows(out, mean, rstd, x, weight, bias, eps, block * ROWS,
                        min(R, (block + 1) * ROWS))


@njit(**ROW)
def _rows_backward(dx, partial_w, partial_b, dout, x, mean, rstd, weight, c, first, last):
    """dx[first:last] of the rows first..last-1; their weight and bias gradients added into
    partial_w[c], partial_b[c], row by row."""
    E = x.shape[1]
    for r in range(first, last):
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


@sized_kernel(BACKWARD_GRAIN)
def _layer_norm_backward(dx, dweight, dbias, dout, x, mean, rstd, weight, threads):
    R, E = x.shape
    chunks = min(R, threads)
    partial_w = np.zeros((chunks, E), dtype=np.float64)
    partial_b = np.zeros((chunks, E), dtype=np.float64)
    for c in prange(chunks):
        _rows_backward(dx, partial_w, partial_b, dout, x, mean, rstd, weight, c,
                       c * R // chunks, (c + 1) * R // chunks)
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
