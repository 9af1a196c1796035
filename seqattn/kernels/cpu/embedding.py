"""Embedding lookup on the CPU: one learned vector per category (base, atom type, node type).

Shapes: ids (R,) integer, weight (V, E), out (R, E). The ops layer checks 0 <= ids < V.
Backward adds dout rows into the rows of dweight they came from; rows whose id equals
``padding_idx`` get no gradient (pass -1 for none).
"""
from numba import prange

from .threads import sized_kernel

# Elements a thread must have before a launch takes it: as for the add and the head split,
# copies measured in benchmarks/small_launches.py.
GRAIN = 1 << 16


@sized_kernel(GRAIN)
def embedding_forward(out, ids, weight):
    R, E = out.shape
    for r in prange(R):
        for e in range(E):
            out[r, e] = weight[ids[r], e]


@sized_kernel(GRAIN)
def _embedding_backward(dweight, dout, ids, padding_idx, threads):
    R, E = dout.shape
    # Threads own disjoint column ranges, so repeated ids never race on the same element.
    chunks = min(E, threads)
    for c in prange(chunks):
        for r in range(R):
            row = ids[r]
            if row == padding_idx:
                continue
            for e in range(c * E // chunks, (c + 1) * E // chunks):
                dweight[row, e] += dout[r, e]


def embedding_backward(dweight, dout, ids, padding_idx):
    """dweight (V, E) is accumulated (+=)."""
    # The thread count is passed in: a kernel that reads it cannot be cached.
    threads = _embedding_backward.threads(dout.size)
    _embedding_backward.run(threads, dweight, dout, ids, padding_idx, threads)
