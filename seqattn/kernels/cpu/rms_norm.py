"""Root-mean-square normalisation over the last axis on the CPU, forward and backward.

Shapes: x (R, E), weight (E,), rstd (R,) saved for backward.
y = x * rstd * weight with rstd = 1 / sqrt(mean(x^2) + eps), as torch.nn.RMSNorm.
"""
import numpy as np
from numba import prange

from .threads import sized_kernel

# Elements a thread must have before a launch takes it: as for the layer norm measured in
# benchmarks/small_launches.py.
GRAIN = 1 << 13


@sized_kernel(GRAIN)
def rms_norm_forward(out, rstd, x, weight, eps):
    R, E = x.shape
    for r in prange(R):
        ms = 0.0
        for e in range(E):
            ms += x[r, e] * x[r, e]
        s = 1.0 / np.sqrt(ms / E + eps)
        rstd[r] = s
        for e in range(E):
            out[r, e] = x[r, e] * s * weight[e]


@sized_kernel(GRAIN)
def _rms_norm_backward(dx, dweight, dout, x, rstd, weight, threads):
    R, E = x.shape
    chunks = min(R, threads)
    partial_w = np.zeros((chunks, E), dtype=np.float64)
    for c in prange(chunks):
        for r in range(c * R // chunks, (c + 1) * R // chunks):
            s = rstd[r]
            # y = xhat * w  ->  dxhat = dy * w; dw = sum dy * xhat
            mean_gx = 0.0
            for e in range(E):
                xhat = x[r, e] * s
                mean_gx += dout[r, e] * weight[e] * xhat
                partial_w[c, e] += dout[r, e] * xhat
            mean_gx /= E
            # xhat = x * rstd(x)  ->  dx = rstd * (dxhat - xhat * mean(dxhat xhat))
            for e in range(E):
                dx[r, e] = s * (dout[r, e] * weight[e] - x[r, e] * s * mean_gx)
    for e in range(E):
        w = 0.0
        for c in range(chunks):
            w += partial_w[c, e]
        dweight[e] += w


def rms_norm_backward(dx, dweight, dout, x, rstd, weight):
    """dx is overwritten; dweight is accumulated (+=)."""
    # The kernel splits rows into one chunk per thread; the count is passed in, since a
    # kernel that reads it cannot be cached.
    threads = _rms_norm_backward.threads(x.size)
    _rms_norm_backward.run(threads, dx, dweight, dout, x, rstd, weight, threads)
