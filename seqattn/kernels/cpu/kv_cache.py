"""Writing new keys and values into a preallocated key/value cache on the CPU.

Shapes: cache (B, H, M, D) for M positions, new (B, H, n, D) written at positions
start .. start + n - 1. The launcher's caller checks start + n <= M.
"""
from numba import njit, prange


@njit(parallel=True, cache=True)
def write_positions(cache, new, start):
    B, H, n, D = new.shape
    for bh in prange(B * H):
        b, h = bh // H, bh % H
        for i in range(n):
            for d in range(D):
                cache[b, h, start + i, d] = new[b, h, i, d]
