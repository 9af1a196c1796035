"""Splitting tokens into attention heads and merging them, on the GPU; same launchers and
semantics as ``kernels/cpu/heads``. Shapes: (B, N, H * D) <-> (B, H, N, D).
"""
from numba import cuda

from .grid import THREADS, blocks_for


@cuda.jit(cache=True)
def split_heads_forward_kernel(out, x):
    B, H, N, D = out.shape
    i = cuda.grid(1)  # over x in memory order, so reads are coalesced
    if i >= B * N * H * D:
        return
    hd = i % (H * D)
    n = (i // (H * D)) % N
    b = i // (H * D * N)
    out[b, hd // D, n, hd % D] = x[b, n, hd]


@cuda.jit(cache=True)
def split_heads_backward_kernel(dx, dout):
    B, H, N, D = dout.shape
    i = cuda.grid(1)  # over dx in memory order, so writes are coalesced
    if i >= B * N * H * D:
        return
    hd = i % (H * D)
    n = (i // (H * D)) % N
    b = i // (H * D * N)
    dx[b, n, hd] = dout[b, hd // D, n, hd % D]


def split_heads_forward(out, x):
    """out (B, H, N, D) from x (B, N, H * D)."""
    split_heads_forward_kernel[blocks_for(out.size), THREADS](out, x)


def split_heads_backward(dx, dout):
    """dx (B, N, H * D) from dout (B, H, N, D): the merge."""
    split_heads_backward_kernel[blocks_for(dout.size), THREADS](dx, dout)
