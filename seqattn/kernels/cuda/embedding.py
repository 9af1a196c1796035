"""Embedding lookup on the GPU; same launchers and semantics as ``kernels/cpu/embedding``.

Shapes: ids (R,), weight (V, E), out (R, E). The ops layer checks ids on the host when it can; an
id outside [0, V) that reaches this kernel yields a zero row and no gradient, never a wild read.
"""
from numba import cuda

from .grid import THREADS, blocks_for


@cuda.jit(cache=True)
def embedding_forward_kernel(out, ids, weight):
    i = cuda.grid(1)
    R, E = out.shape
    if i >= R * E:
        return
    r = i // E
    e = i % E
    row = ids[r]
    out[r, e] = weight[row, e] if 0 <= row < weight.shape[0] else 0.0


@cuda.jit(cache=True)
def embedding_backward_kernel(dweight, dout, ids, padding_idx):
    i = cuda.grid(1)
    R, E = dout.shape
    if i >= R * E:
        return
    r = i // E
    row = ids[r]
    if row != padding_idx and 0 <= row < dweight.shape[0]:
        # Repeated ids add into the same row: atomics keep every contribution.
        cuda.atomic.add(dweight, (row, i % E), dout[r, i % E])


def embedding_forward(out, ids, weight):
    embedding_forward_kernel[blocks_for(out.size), THREADS](out, ids, weight)


def embedding_backward(dweight, dout, ids, padding_idx):
    """dweight (V, E) is accumulated (+=)."""
    embedding_backward_kernel[blocks_for(dout.size), THREADS](dweight, dout, ids, padding_idx)
