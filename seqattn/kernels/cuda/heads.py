"""Splitting tokens into attention heads and merging them, on the GPU; same launchers and
semantics as ``kernels/cpu/heads``. Shapes: (B, N, P * H * D) <-> P blocks (B, H, N, D).
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
    """out (P, B, H, N, D) from x (B, N, P * H * D): block p of x's last axis is out[p]."""
    width = x.shape[2] // out.shape[0]
    for p in range(out.shape[0]):
        # Block p as a strided view of x: no copy of the packed input.
        split_heads_forward_kernel[blocks_for(out[p].size), THREADS](
            out[p], x[:, :, p * width:(p + 1) * width])


def split_heads_backward(dx, heads):
    """dx (B, N, P * H * D) from a tuple of P arrays (B, H, N, D), side by side: the merge."""
    width = dx.shape[2] // len(heads)
    for p, dout in enumerate(heads):
        split_heads_backward_kernel[blocks_for(dout.size), THREADS](
            dx[:, :, p * width:(p + 1) * width], dout)
