"""The one checked form of a graph that every encoding reads: a square scipy.sparse CSR matrix.

``adjacency[i, j] != 0`` is an edge from node i to node j with that weight (the convention of
scipy.sparse.csgraph and networkx.to_scipy_sparse_array). Dense NumPy arrays are accepted too.
An explicitly stored zero is not an edge; a self loop (i, i) is an edge like any other; a graph
of 0 nodes is a (0, 0) matrix. Checks never modify the caller's matrix.
"""
import numpy as np
import scipy.sparse as sp


def as_adjacency(adjacency, name="adjacency"):
    """``adjacency`` as a float64 CSR array (N, N) with sorted indices and no stored zeros.

    Raises for a matrix that is not square, not numeric, or holds NaN, infinite or negative
    weights (the random walks and the Laplacian read weights as connection strengths).

    Parameters
    ----------
    adjacency : scipy.sparse matrix or array, or array_like, shape (N, N)
        Entry (i, j) is the weight of the edge i -> j; zero (stored or not) is no edge.
        Numbers or booleans; the caller's matrix is never modified.
    name : str, default "adjacency"
        What the error messages call the matrix.

    Returns
    -------
    scipy.sparse.csr_array, shape (N, N), float64
        A copy with sorted indices and no stored zeros.
    """
    if sp.issparse(adjacency):
        matrix = sp.csr_array(adjacency, dtype=np.float64, copy=True)
    else:
        dense = np.asarray(adjacency)
        if dense.ndim != 2:
            raise ValueError(f"{name} has shape {dense.shape}; expected a square (N, N) matrix "
                             "(scipy.sparse or NumPy), entry (i, j) the weight of edge i -> j")
        if not (np.issubdtype(dense.dtype, np.number) or dense.dtype == np.bool_):
            raise TypeError(f"{name} has dtype {dense.dtype}; expected numbers (edge weights)")
        matrix = sp.csr_array(dense.astype(np.float64))
    if matrix.shape[0] != matrix.shape[1]:
        raise ValueError(f"{name} has shape {matrix.shape}; expected a square (N, N) matrix")
    if not np.isfinite(matrix.data).all():
        raise ValueError(f"{name} holds NaN or infinite weights; an edge's weight must be finite "
                         "(a missing edge is a zero, not NaN)")
    if (matrix.data < 0).any():
        raise ValueError(f"{name} holds negative weights (smallest {matrix.data.min()}); "
                         "expected weights >= 0, connection strengths")
    matrix.eliminate_zeros()
    matrix.sort_indices()
    return matrix


def symmetrized(adjacency):
    """The undirected graph of ``adjacency`` (CSR): an edge i - j wherever i -> j or j -> i,
    weighted by the larger of the two directions' weights (a symmetric matrix is unchanged).

    Parameters
    ----------
    adjacency : scipy.sparse matrix or array_like, shape (N, N)
        Edge weights, entry (i, j) the edge i -> j (checked by :func:`as_adjacency`).

    Returns
    -------
    scipy.sparse.csr_array, shape (N, N), float64
        The symmetric matrix.
    """
    matrix = as_adjacency(adjacency)
    return as_adjacency(matrix.maximum(matrix.T))


def unweighted(adjacency):
    """``adjacency`` with every edge's weight set to 1 (CSR).

    Parameters
    ----------
    adjacency : scipy.sparse matrix or array_like, shape (N, N)
        Edge weights, entry (i, j) the edge i -> j (checked by :func:`as_adjacency`).

    Returns
    -------
    scipy.sparse.csr_array, shape (N, N), float64
        1 at every edge, no stored zeros.
    """
    matrix = as_adjacency(adjacency)
    matrix.data = np.ones_like(matrix.data)
    return matrix
