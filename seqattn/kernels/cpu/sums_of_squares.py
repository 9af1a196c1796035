"""The squared global norm of many arrays (gradient clipping's) in one CPU launch, instead of
one launch per array.

The arrays are named by their addresses in a table, as in ``optimizers._adam_update_many``, so
one compiled kernel serves any number of them; the work is split into pieces of at most PIECE
elements of one array each. Each piece's sum is returned on its own and the caller adds them in
the pieces' order: the result does not depend on the number of threads.
"""
import numpy as np
from numba import prange

from .optimizers import GRAIN, PIECE, _array_at
from .threads import sized_kernel

__all__ = ["PIECE", "sums_of_squares"]


@sized_kernel(GRAIN, work=lambda sums, pieces, addresses, sizes, like, elements: elements)
def sums_of_squares(sums, pieces, addresses, sizes, like, elements):
    """sums (S,) float64: the sum of squares of piece s, elements [start, stop) of array t for
    pieces[s] = (t, start, stop) ((S, 3) int64). addresses (T, 1) int64: the data of array t
    (C-contiguous, sizes[t] elements of ``like``'s dtype, alive for the call); elements: the
    pieces' total size (the launch's size)."""
    for s in prange(pieces.shape[0]):
        t = pieces[s, 0]
        x = _array_at(addresses, t, 0, sizes[t], like)[pieces[s, 1]:pieces[s, 2]]
        total = 0.0
        for i in range(x.size):
            # np.float64, not float(): Numba's float() keeps a float32 a float32
            # (test_sum_of_squares_of_float32_arrays_squares_in_float64)
            value = np.float64(x[i])
            total += value * value
        sums[s] = total
