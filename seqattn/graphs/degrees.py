"""In- and out-degrees: how many edges arrive at and leave each node.

Counts edges, not weights: ``out_degree[i]`` is the number of edges i -> j, ``in_degree[j]``
the number of edges i -> j (networkx's ``DiGraph.out_degree`` / ``in_degree``). A self loop
counts once in each; an isolated node has degree 0; for an undirected graph (a symmetric
matrix) both are the number of neighbours. A model embeds them as small integers, clipped at a
largest degree (:func:`clipped`), as Graphormer's degree embeddings do.
"""
import numpy as np

from .adjacency import as_adjacency


def in_out_degrees(adjacency):
    """(in_degree (N,), out_degree (N,)) int64 of ``adjacency`` (N, N), nonzero = edge."""
    matrix = as_adjacency(adjacency)
    out_degree = np.diff(matrix.indptr).astype(np.int64)
    in_degree = np.bincount(matrix.indices, minlength=matrix.shape[0]).astype(np.int64)
    return in_degree, out_degree


def clipped(degree, max_degree):
    """Degrees as embedding ids 0 .. ``max_degree`` (larger degrees share the last id)."""
    return np.minimum(np.asarray(degree), max_degree)
