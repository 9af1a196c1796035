"""Rotary position embedding (RoPE) on the CPU, in the rotate-half layout of GPT-NeoX and LLaMA.

Shapes: x (B, H, N, D) with D even; cos and sin (N, D / 2) for the position of each token.
Feature pair (j, j + D/2) of token n is rotated by the angle whose cosine and sine are
cos[n, j], sin[n, j]. Backward rotates the gradient back by the opposite angle.
"""
from numba import prange

from .jit_options import njit
from .threads import sized_kernel

# Elements a thread must have before a launch takes it: as for the add and the head split,
# copies measured in benchmarks/small_launches.py.
GRAIN = 1 << 16


@njit(inline="always")
def _rotate(out, x, cos, sin, sign):
    B, H, N, D = x.shape
    half = D // 2
    for bhn in prange(B * H * N):
        b = bhn // (H * N)
        h = (bhn // N) % H
        n = bhn % N
        for j in range(half):
            c = cos[n, j]
            s = sign * sin[n, j]
            x1 = x[b, h, n, j]
            x2 = x[b, h, n, j + half]
            out[b, h, n, j] = x1 * c - x2 * s
            out[b, h, n, j + half] = x2 * c + x1 * s


@sized_kernel(GRAIN)
def rope_forward(out, x, cos, sin):
    _rotate(out, x, cos, sin, 1.0)


@sized_kernel(GRAIN)
def rope_backward(dx, dout, cos, sin):
    # out = R(theta) x, R orthogonal  ->  dx = R(theta)^T dout = R(-theta) dout
    _rotate(dx, dout, cos, sin, -1.0)
