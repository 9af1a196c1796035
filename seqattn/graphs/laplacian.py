"""Laplacian eigenvector positions: where a node sits in its graph, from the smallest
non-trivial eigenvectors of the symmetric normalized Laplacian.

L = D^-1/2 (D - A) D^-1/2 of the undirected graph (symmetrize a directed one first), with D
the weighted degrees and D^-1/2 = 0 at isolated nodes (networkx's normalized_laplacian_matrix).
Each connected component has one zero eigenvalue (the trivial eigenvector sqrt(D) on it), so
positions are computed per component: node i gets the ``k`` eigenvectors of its component
after the trivial one, by increasing eigenvalue. A component with s <= k nodes has only s - 1
of them; the remaining columns are 0 (so an isolated node, and every node of a graph of one
node, has all-zero positions). A graph of 0 nodes gives a (0, k) array.

An eigenvector's sign is arbitrary: here each column is made to have its largest-magnitude
entry positive, so the positions are reproducible, and :func:`random_sign_flips` gives the
per-column signs a model multiplies them by in training (so that it learns not to depend on
the sign). Repeated eigenvalues leave the basis of their eigenspace arbitrary (a cycle, a
complete graph); nothing fixes that here.
"""
import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components
from scipy.sparse.linalg import eigsh

from ..kernels.cpu.gemm.blas_library import single_threaded_blas
from .adjacency import as_adjacency

DENSE_UP_TO = 256  # components up to this size are solved densely (eigh beats eigsh there)


def normalized_laplacian(adjacency):
    """L = D^-1/2 (D - A) D^-1/2 (CSR, float64) of a symmetric ``adjacency``.

    Parameters
    ----------
    adjacency : scipy.sparse matrix or array_like, shape (N, N)
        Symmetric edge weights A; D is their row sums (D^-1/2 is 0 at isolated nodes).

    Returns
    -------
    scipy.sparse.csr_array, shape (N, N), float64
        The symmetric normalized Laplacian.
    """
    matrix = as_adjacency(adjacency)
    degree = np.asarray(matrix.sum(axis=1)).ravel()
    scale = np.zeros_like(degree)
    scale[degree > 0] = degree[degree > 0] ** -0.5
    laplacian = sp.diags_array(degree) - matrix
    return sp.csr_array(sp.diags_array(scale) @ laplacian @ sp.diags_array(scale))


def _smallest_eigenvectors(laplacian, count, seed):
    """The ``count`` eigenvectors of smallest eigenvalue of a connected component's L."""
    n = laplacian.shape[0]
    if n <= DENSE_UP_TO or count >= n - 1:
        _, vectors = np.linalg.eigh(laplacian.toarray())
        return vectors[:, :count]
    # The largest eigenvalues of 2 I - L (L's spectrum lies in [0, 2]) converge much faster in
    # Lanczos than the smallest of L; a fixed start vector makes the result reproducible.
    shifted = 2.0 * sp.identity(n, format="csr") - laplacian
    start = np.random.default_rng(seed).standard_normal(n)
    values, vectors = eigsh(shifted, k=count, which="LA", v0=start)
    return vectors[:, np.argsort(-values)]


def _with_canonical_signs(vectors):
    """Each column's sign chosen so that its largest-magnitude entry is positive."""
    if vectors.size == 0:
        return vectors
    rows = np.argmax(np.abs(vectors), axis=0)
    signs = np.sign(vectors[rows, np.arange(vectors.shape[1])])
    return vectors * np.where(signs == 0, 1.0, signs)


def laplacian_positions(adjacency, k, seed=0):
    """(N, k) float64 positions of every node of the undirected graph ``adjacency`` (N, N);
    see the module docstring. ``seed`` fixes the eigensolver's start vector.

    Parameters
    ----------
    adjacency : scipy.sparse matrix or array_like, shape (N, N)
        Symmetric edge weights (symmetrize a directed graph first: :func:`symmetrized`).
    k : int
        Eigenvectors per node, at least 1.
    seed : int, default 0
        Seed of the start vector of the sparse eigensolver, used for components of more than
        256 nodes.

    Returns
    -------
    numpy.ndarray, shape (N, k), float64
        Row i: node i's ``k`` smallest non-trivial eigenvectors of its component, by increasing
        eigenvalue, each column's largest-magnitude entry positive; 0 where a component has
        fewer.
    """
    if not isinstance(k, (int, np.integer)) or k < 1:
        raise ValueError(f"k must be an integer >= 1 (eigenvectors per node), got {k!r}")
    matrix = as_adjacency(adjacency)
    if (matrix != matrix.T).nnz:
        raise ValueError("laplacian_positions needs an undirected graph (a symmetric matrix); "
                         "symmetrize a directed one first, e.g. seqattn.graphs.symmetrized")
    n = matrix.shape[0]
    positions = np.zeros((n, k))
    if n == 0:
        return positions
    laplacian = normalized_laplacian(matrix)
    _, component = connected_components(matrix, directed=False)
    for label in np.unique(component):
        nodes = np.flatnonzero(component == label)
        count = min(k, len(nodes) - 1)
        if count == 0:
            continue
        block = laplacian[nodes][:, nodes]
        # A graph's eigenproblem is too small for BLAS threads, which then mostly wait on each
        # other on busy cores (BENCHMARKS.md, "Whole examples").
        with single_threaded_blas():
            vectors = _smallest_eigenvectors(block, count + 1, seed)[:, 1:]  # drop the trivial
        positions[np.ix_(nodes, np.arange(count))] = _with_canonical_signs(vectors)
    return positions


def random_sign_flips(rng, shape):
    """+1 / -1 with equal odds, of ``shape`` (e.g. (B, 1, k): one sign per graph and
    eigenvector, the same for all its nodes).

    Parameters
    ----------
    rng : numpy.random.Generator
        The random numbers.
    shape : tuple of int
        Shape of the result.

    Returns
    -------
    numpy.ndarray of float64, shape ``shape``
        Each entry -1.0 or 1.0.
    """
    return rng.choice(np.array([-1.0, 1.0]), size=shape)
