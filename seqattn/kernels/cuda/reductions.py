"""Sums over repeated rows on the GPU; same launcher and semantics as ``kernels/cpu/reductions``.

Shapes: x (G, S), out (S,). Each thread sums a strip of ROWS_PER_THREAD rows of one column and
adds it atomically, so long columns (a bias gradient over B * N tokens) still fill the GPU.
"""
from numba import cuda

from .grid import THREADS, blocks_for
from .elementwise import fill

ROWS_PER_THREAD = 64


@cuda.jit(cache=True)
def sum_over_rows_kernel(out, x):
    s = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    strip = cuda.blockIdx.y
    G, S = x.shape
    if s >= S:
        return
    total = 0.0
    for g in range(strip * ROWS_PER_THREAD, min(G, (strip + 1) * ROWS_PER_THREAD)):
        total += x[g, s]
    cuda.atomic.add(out, s, total)


def sum_over_rows(out, x, accumulate):
    """out (S,) = sum over g of x (G, S); added to ``out`` when ``accumulate``."""
    G, S = x.shape
    if not accumulate:
        fill(out, 0.0)
    if G == 0:
        return
    strips = (G + ROWS_PER_THREAD - 1) // ROWS_PER_THREAD
    sum_over_rows_kernel[(blocks_for(S), strips), THREADS](out, x)
