"""Sums over repeated rows on the GPU; same launcher and semantics as ``kernels/cpu/reductions``.

Shapes: x (G, S), out (S,). Column sums run in two deterministic passes instead of atomics, so a
training step on the GPU gives the same bits every run: each thread first sums a strip of
ROWS_PER_THREAD rows of one column into ``partials`` (strips, S) (long columns, a bias gradient
over B * N tokens, still fill the GPU), then one thread per column adds the strips in order.
Kernels elsewhere with a column sum to make (norm and additive-score parameter gradients, the
gradient-norm sum) write their own partials and finish with :func:`add_strip_sums`.
"""
import numpy as np
from numba import cuda, float64

from .elementwise import fill
from .grid import THREADS, blocks_for

ROWS_PER_THREAD = 64


def strips_for(rows):
    """Number of ROWS_PER_THREAD strips that cover ``rows`` rows (at least one)."""
    return max(1, -(-rows // ROWS_PER_THREAD))


def strip_partials(strips, columns):
    """A float64 (strips, columns) device array for per-strip partial column sums."""
    return cuda.device_array((strips, columns), dtype=np.float64)


@cuda.jit(cache=True)
def add_strip_sums_kernel(out, partials):
    s = cuda.grid(1)
    if s < out.size:
        total = float64(0)  # float64 on the simulator too (NumPy keeps 0.0 + f32 in f32)
        for g in range(partials.shape[0]):
            total += partials[g, s]
        out[s] += total


def add_strip_sums(out, partials):
    """out (S,) += sum over strips of partials (strips, S), in strip order."""
    add_strip_sums_kernel[blocks_for(out.size), THREADS](out, partials)


@cuda.jit(cache=True)
def strip_sums_kernel(partials, x):
    s = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    strip = cuda.blockIdx.y
    G, S = x.shape
    if s >= S:
        return
    total = float64(0)
    for g in range(strip * ROWS_PER_THREAD, min(G, (strip + 1) * ROWS_PER_THREAD)):
        total += x[g, s]
    partials[strip, s] = total


def sum_over_rows(out, x, accumulate):
    """out (S,) = sum over g of x (G, S); added to ``out`` when ``accumulate``."""
    G, S = x.shape
    if not accumulate:
        fill(out, 0.0)
    if G == 0 or S == 0:
        return
    partials = strip_partials(strips_for(G), S)
    strip_sums_kernel[(blocks_for(S), strips_for(G)), THREADS](partials, x)
    add_strip_sums(out, partials)
