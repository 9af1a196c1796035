"""Embedding lookup on the GPU; same launchers and semantics as ``kernels/cpu/embedding``.

Shapes: ids (R,), weight (V, E), out (R, E). The ops layer checks ids on the host when it can; an
id outside [0, V) that reaches this kernel yields a zero row and no gradient, never a wild read.

The backward is deterministic: instead of atomic adds from every token (whose order, and so
whose float rounding, changes from run to run), the launcher groups the tokens by id with a
stable sort on the host (R integers; llm.c does the same) and one thread per (distinct id,
column) sums its tokens' gradients in token order.
"""
import numpy as np
from numba import cuda, float64

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
def embedding_backward_kernel(dweight, dout, token_order, group_starts, group_ids):
    """Group g holds tokens token_order[group_starts[g]:group_starts[g + 1]], all with id
    group_ids[g]; dweight[group_ids[g]] += the sum of their dout rows."""
    i = cuda.grid(1)
    E = dout.shape[1]
    if i >= group_ids.size * E:
        return
    g = i // E
    e = i % E
    row = group_ids[g]
    total = float64(0)
    for j in range(group_starts[g], group_starts[g + 1]):
        total += dout[token_order[j], e]
    dweight[row, e] += total


def _token_groups(ids, V, padding_idx):
    """(token order, group starts, group ids) of the tokens whose id is in [0, V) and not
    ``padding_idx``, grouped by id, tokens in their original order within a group."""
    ids = ids.copy_to_host() if hasattr(ids, "copy_to_host") else np.asarray(ids)
    keep = np.flatnonzero((ids >= 0) & (ids < V) & (ids != padding_idx))
    order = keep[np.argsort(ids[keep], kind="stable")]
    sorted_ids = ids[order]
    starts = np.flatnonzero(np.r_[True, sorted_ids[1:] != sorted_ids[:-1]]) if order.size \
        else np.zeros(0, np.int64)
    return order, np.r_[starts, order.size], sorted_ids[starts]


def embedding_forward(out, ids, weight):
    embedding_forward_kernel[blocks_for(out.size), THREADS](out, ids, weight)


def embedding_backward(dweight, dout, ids, padding_idx):
    """dweight (V, E) is accumulated (+=)."""
    order, starts, group_ids = _token_groups(ids, dweight.shape[0], padding_idx)
    if group_ids.size == 0:
        return
    embedding_backward_kernel[blocks_for(group_ids.size * dout.shape[1]), THREADS](
        dweight, dout, cuda.to_device(order.astype(np.int64)),
        cuda.to_device(starts.astype(np.int64)), cuda.to_device(group_ids.astype(np.int64)))
