"""Splitting token vectors into attention heads and merging them back, on the CPU.

Shapes: tokens (B, N, P * H * D) <-> P blocks of heads (B, H, N, D), P = 1 for plain heads and
3 for q, k and v side by side from one packed in-projection. Merging is the backward of
splitting and vice versa, so each direction serves both passes. All P blocks move in one
launch, so one parallel region instead of P: each region waits for its slowest thread, which
on a shared machine may be waiting for a core. Both loop over (block, batch, head) and copy
rows of D in their own function so that the copy vectorises (measured: 1.8x faster for the
split than looping over tokens). The merge picks its block out of the tuple once per
(block, batch, head): indexing a tuple by a variable is a branch over its elements, and once
per row of D it made the merge several times slower than the split (measured at the small
models' sizes).
"""
from numba import prange

from .jit_options import njit
from .threads import sized_kernel

# Elements a thread must have before a launch takes it (benchmarks/small_launches.py).
GRAIN = 1 << 15


@njit(cache=True)
def _copy_row(dst, src):
    for d in range(dst.size):
        dst[d] = src[d]


@sized_kernel(GRAIN)
def split_heads_forward(out, x):
    """out (P, B, H, N, D) from x (B, N, P * H * D): block p of x's last axis is out[p]."""
    P, B, H, N, D = out.shape
    for pbh in prange(P * B * H):
        p = pbh // (B * H)
        b = pbh // H % B
        h = pbh % H
        start = (p * H + h) * D
        for n in range(N):
            _copy_row(out[p, b, h, n], x[b, n, start:start + D])


@sized_kernel(GRAIN)
def split_heads_backward(dx, heads):
    """dx (B, N, P * H * D) from a tuple of P arrays (B, H, N, D), side by side: the merge."""
    B, H, N, D = heads[0].shape
    for pbh in prange(len(heads) * B * H):
        p = pbh // (B * H)
        b = pbh // H % B
        h = pbh % H
        start = (p * H + h) * D
        block = heads[p][b, h]
        for n in range(N):
            _copy_row(dx[b, n, start:start + D], block[n])
