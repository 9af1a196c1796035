"""Sums over repeated rows on the CPU: the backward of broadcasting (bias, positional tables).

Shapes: x (G, S) is G repeats of a block of S values; out (S,).
"""
import numpy as np
from numba import prange

from .jit_options import njit
from .threads import sized_kernel

# Elements a thread must have before a launch takes it (benchmarks/small_launches.py).
GRAIN = 1 << 19


@njit(cache=True)
def _add_rows(total, x, g0, g1):
    """total (S,) += rows g0..g1 of x; its own function so the loop vectorises (numba#2680)."""
    for g in range(g0, g1):
        row = x[g]
        for s in range(row.size):
            total[s] += row[s]


@sized_kernel(GRAIN)
def _sum_over_rows(out, x, accumulate, threads):
    G, S = x.shape
    # Each thread sums a contiguous range of rows into its own partial row, so no two threads
    # write the same memory and the reads stay sequential.
    chunks = min(G, threads)
    partial = np.zeros((chunks, S), dtype=np.float64)
    for c in prange(chunks):
        _add_rows(partial[c], x, c * G // chunks, (c + 1) * G // chunks)
    for s in range(S):
        total = out[s] if accumulate else 0.0
        for c in range(chunks):
            total += partial[c, s]
        out[s] = total


def sum_over_rows(out, x, accumulate):
    """out (S,) = sum over g of x (G, S); added to ``out`` when ``accumulate``."""
    if x.shape[0] == 0:
        if not accumulate:
            out[:] = 0
        return
    threads = _sum_over_rows.threads(x.size)
    _sum_over_rows.run(threads, out, x, accumulate, threads)
