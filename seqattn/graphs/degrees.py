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
    """(in_degree (N,), out_degree (N,)) int64 of ``adjacency`` (N, N), nonzero = edge.

    Parameters
    ----------
    adjacency : scipy.sparse matrix or array_like, shape (N, N)
        Edge weights, entry (i, j) the edge i -> j; only which entries are nonzero counts.

    Returns
    -------
    in_degree, out_degree : numpy.ndarray, shape (N,), int64
        The number of edges that arrive at and that leave each node.
    """
    matrix = as_adjacency(adjacency)
    out_degree = np.diff(matrix.indptr).astype(np.int64)
    in_degree = np.bincount(matrix.indices, minlength=matrix.shape[0]).astype(np.int64)
    return in_degree, out_degree


def clipped(degree, max_degree):
    """Degrees as embedding ids 0 .. ``max_degree`` (larger degrees share the last id).

    Parameters
    ----------
    degree : array_like of int, any shape
        Degrees, e.g. from :func:`in_out_degrees`.
    max_degree : int
        The largest id; every larger degree is mapped to it.

    Returns
    -------
    numpy.ndarray, the shape of ``degree``
        ``min(degree, max_degree)`` elementwise.
    """
    return np.minimum(np.asarray(degree), max_degree)
