"""Shortest-path distances as attention pair codes: a breadth-first search from every node,
in parallel over the sources (on one thread for small graphs), written as one byte per pair.

Pair codes (what ``seqattn.ops.PairBias`` reads, one learnable bias per head and code) for
``max_distance`` D:

* ``0`` a node and itself; ``d`` for 1 <= d <= D hops from the row's node to the column's;
* ``D + 1`` (:func:`farther_code`) reachable in more than D hops;
* ``D + 2`` (:func:`unreachable_code`) no path at all (another connected component, or against
  the direction of every edge in a directed graph).

``hide_farther=True`` makes every pair beyond D hops (unreachable ones too) ``-1`` instead,
which PairBias reads as "not connected": the key is hidden from the query. With D = 1 that is
attention restricted to the edges (and each node itself). Distances count edges (weights are
ignored); a self loop changes nothing (a node is at distance 0 from itself anyway); an isolated
node is at distance 0 from itself and unreachable from every other; a graph of 0 nodes gives a
(0, 0) array.

The codes are int8 when they fit (D <= 125), int16 otherwise: N x N bytes for N nodes, never a
float N x N matrix.
"""
import numpy as np
from numba import prange

from ..kernels.cpu.threads import sized_kernel
from .adjacency import as_adjacency

HIDDEN = -1  # PairBias: a negative code hides the key from the query
# Pairs a thread must have before a launch takes it (a pair costs tens of nanoseconds of search
# and a write): graphs of up to about 90 nodes run the serial version, which a first run
# compiles several times faster than the parallel one.
GRAIN = 1 << 12


def farther_code(max_distance):
    """The code of pairs more than ``max_distance`` hops apart.

    Parameters
    ----------
    max_distance : int
        D, the largest hop distance that has a code of its own.

    Returns
    -------
    int
        D + 1.
    """
    return max_distance + 1


def unreachable_code(max_distance):
    """The code of pairs with no path between them.

    Parameters
    ----------
    max_distance : int
        D, the largest hop distance that has a code of its own.

    Returns
    -------
    int
        D + 2.
    """
    return max_distance + 2


def num_distance_codes(max_distance, hide_farther=False):
    """How many codes :func:`shortest_path_codes` uses (the PairBias table's C).

    Parameters
    ----------
    max_distance : int
        D, the largest hop distance that has a code of its own.
    hide_farther : bool, default False
        Whether pairs beyond D hops are hidden (code -1) rather than coded.

    Returns
    -------
    int
        D + 1 with ``hide_farther``, else D + 3.
    """
    return max_distance + 1 if hide_farther else max_distance + 3


@sized_kernel(GRAIN)
def breadth_first_codes(codes, indptr, indices, max_distance, depth_limit, farther, unreachable):
    """codes (N, N) int8/int16 out: codes[s, t] for the hop distance d from s to t along the
    CSR edges (indptr (N + 1,), indices (E,)): d if d <= max_distance, ``farther`` if greater,
    ``unreachable`` if there is no path. The search stops at ``depth_limit`` hops; nodes not
    reached by then get ``unreachable`` (callers pass max_distance when both codes agree)."""
    n = codes.shape[0]
    for source in prange(n):
        distance = np.full(n, -1, np.int64)
        queue = np.empty(n, np.int64)
        distance[source] = 0
        queue[0] = source
        head, tail = 0, 1
        while head < tail:
            node = queue[head]
            head += 1
            if distance[node] >= depth_limit:
                continue  # its neighbours would lie beyond the limit
            for e in range(indptr[node], indptr[node + 1]):
                neighbour = indices[e]
                if distance[neighbour] < 0:
                    distance[neighbour] = distance[node] + 1
                    queue[tail] = neighbour
                    tail += 1
        for target in range(n):
            d = distance[target]
            if d < 0:
                codes[source, target] = unreachable
            elif d <= max_distance:
                codes[source, target] = d
            else:
                codes[source, target] = farther


def code_dtype(largest_code):
    """The smallest PairBias code dtype holding codes up to ``largest_code``.

    Parameters
    ----------
    largest_code : int
        The largest code to hold.

    Returns
    -------
    numpy.dtype
        int8, int16 or int32; a code beyond int32 raises ValueError.
    """
    for dtype in (np.int8, np.int16, np.int32):
        if largest_code <= np.iinfo(dtype).max:
            return np.dtype(dtype)
    raise ValueError(f"a code of {largest_code} does not fit int32")


def shortest_path_codes(adjacency, max_distance, hide_farther=False):
    """(N, N) pair codes of the hop distance from node i (row) to node j (column) along the
    edges i -> j of ``adjacency`` (scipy.sparse or dense (N, N); nonzero = edge). See the
    module docstring for the codes. Symmetrize a directed graph first for undirected distances;
    transpose it for the distance from j to i.

    Parameters
    ----------
    adjacency : scipy.sparse matrix or array_like, shape (N, N)
        Entry (i, j) nonzero for an edge i -> j; weights are ignored.
    max_distance : int
        D, the largest hop distance with a code of its own, at least 1.
    hide_farther : bool, default False
        Code every pair beyond D hops, unreachable ones included, -1 (hidden from attention)
        instead of D + 1 and D + 2.

    Returns
    -------
    numpy.ndarray, shape (N, N), int8 (int16 where D > 125)
        The pair codes.
    """
    if not isinstance(max_distance, (int, np.integer)) or max_distance < 1:
        raise ValueError(f"max_distance must be an integer >= 1, got {max_distance!r}")
    matrix = as_adjacency(adjacency)
    n = matrix.shape[0]
    if hide_farther:
        farther = unreachable = HIDDEN
    else:
        farther, unreachable = farther_code(max_distance), unreachable_code(max_distance)
    codes = np.empty((n, n), code_dtype(max(max_distance, unreachable)))
    if n == 0:
        return codes
    depth_limit = max_distance if farther == unreachable else n
    breadth_first_codes(codes, matrix.indptr.astype(np.int64), matrix.indices.astype(np.int64),
                        max_distance, depth_limit, farther, unreachable)
    return codes
