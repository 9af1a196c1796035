"""Rotary position embedding on the GPU; same launchers and semantics as ``kernels/cpu/rope``.

Shapes: x (B, H, N, D), cos and sin (N, D / 2). One thread per rotated feature pair.
"""
from numba import cuda

from .grid import THREADS, blocks_for


@cuda.jit(cache=True)
def rope_forward_kernel(out, x, cos, sin, sign):
    B, H, N, D = x.shape
    half = D // 2
    i = cuda.grid(1)
    if i >= B * H * N * half:
        return
    j = i % half
    n = (i // half) % N
    h = (i // (half * N)) % H
    b = i // (half * N * H)
    c = cos[n, j]
    s = sign * sin[n, j]
    x1 = x[b, h, n, j]
    x2 = x[b, h, n, j + half]
    out[b, h, n, j] = x1 * c - x2 * s
    out[b, h, n, j + half] = x2 * c + x1 * s


def _grid(x):
    B, H, N, D = x.shape
    return blocks_for(B * H * N * (D // 2)), THREADS


def rope_forward(out, x, cos, sin):
    rope_forward_kernel[_grid(x)](out, x, cos, sin, 1.0)


def rope_backward(dx, dout, cos, sin):
    # out = R(theta) x, R orthogonal  ->  dx = R(-theta) dout
    rope_forward_kernel[_grid(dout)](dx, dout, cos, sin, -1.0)
