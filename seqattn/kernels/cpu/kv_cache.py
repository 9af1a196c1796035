"""Writing new keys and values into a preallocated key/value cache on the CPU.

Shapes: cache (B, H, M, D) for M positions, new (B, H, n, D) written at positions
start .. start + n - 1. The launcher's caller checks start + n <= M.
"""
from numba import prange

from .threads import sized_kernel

# Elements a thread must have before a launch takes it: as for the add and the head split,
# copies measured in benchmarks/small_launches.py.
GRAIN = 1 << 16


def _new_size(cache, new, start):
    return new.size


@sized_kernel(GRAIN, work=_new_size)
def write_positions(cache, new, start):
    B, H, n, D = new.shape
    for bh in prange(B * H):
        b, h = bh // H, bh % H
        for i in range(n):
            for d in range(D):
                cache[b, h, start + i, d] = new[b, h, i, d]
