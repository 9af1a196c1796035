"""Edge types as pair codes: the pairs joined by an edge get a code per edge type, on top of
the distance codes of :mod:`seqattn.graphs.shortest_paths`.

``edge_types`` is a sparse (N, N) matrix of the same pattern as the adjacency whose value at
(i, j) is the type of edge i -> j plus one (stored zeros are no edge, so type 0 is stored as
1); :func:`type_matrix` builds it from edge lists. An edge of type t gets the code
``first_code + t``; every other pair keeps the code it had. A pair (i, i) keeps its distance
code 0 even with a self loop, so a node always sees itself.
"""
import numpy as np
import scipy.sparse as sp

from .shortest_paths import code_dtype


def type_matrix(source, target, types, num_nodes):
    """The (N, N) CSR edge-type matrix (value = type + 1) of edges ``source[e] -> target[e]``
    of type ``types[e]`` (integers 0 .. T - 1). Two edges of different types between the same
    pair are an error (one pair, one code).

    Parameters
    ----------
    source, target : array_like of int, shape (E,)
        The node each edge leaves and the node it arrives at, 0 .. N - 1.
    types : array_like of int, shape (E,)
        Each edge's type, 0 .. T - 1. An edge listed twice with one type counts once.
    num_nodes : int
        N, the number of nodes.

    Returns
    -------
    scipy.sparse.csr_array, shape (N, N), int64
        Type + 1 at each edge (i, j), nothing stored elsewhere.
    """
    source, target, types = (np.asarray(a) for a in (source, target, types))
    if not (source.shape == target.shape == types.shape and source.ndim == 1):
        raise ValueError(f"source, target and types must be 1-d of one length; got shapes "
                         f"{source.shape}, {target.shape}, {types.shape}")
    if not np.issubdtype(types.dtype, np.integer) or (types.size and types.min() < 0):
        raise ValueError("edge types must be integers >= 0 (one code per type)")
    if types.size and _conflicting(source, target, types):
        raise ValueError("two edges of different types join the same pair of nodes; give each "
                         "pair one type")
    pairs, first = np.unique(np.stack([source, target]), axis=1, return_index=True)
    return sp.csr_array((types[first].astype(np.int64) + 1, (pairs[0], pairs[1])),
                        shape=(num_nodes, num_nodes))


def _conflicting(source, target, types):
    order = np.lexsort((types, target, source))
    s, t, y = source[order], target[order], types[order]
    same_pair = (s[1:] == s[:-1]) & (t[1:] == t[:-1])
    return bool(np.any(same_pair & (y[1:] != y[:-1])))


def with_edge_types(codes, edge_types, first_code):
    """A copy of ``codes`` (N, N) where every edge i -> j (i != j) of ``edge_types`` (see the
    module docstring) has the code ``first_code + type``; the dtype widens if needed.

    Parameters
    ----------
    codes : numpy.ndarray of int, shape (N, N)
        Pair codes, e.g. from :func:`seqattn.graphs.shortest_path_codes`; not modified.
    edge_types : scipy.sparse matrix or array_like, shape (N, N)
        Type + 1 of each edge (i, j), as :func:`type_matrix` builds it; 0 is no edge.
    first_code : int
        The code of edge type 0; type t gets ``first_code + t``.

    Returns
    -------
    numpy.ndarray of int, shape (N, N)
        The codes with each off-diagonal edge's type code, in ``codes``' dtype or a wider one
        that holds the largest code.
    """
    matrix = sp.coo_array(edge_types)
    if matrix.shape != codes.shape:
        raise ValueError(f"edge_types has shape {matrix.shape} but the codes are {codes.shape}")
    off_diagonal = matrix.row != matrix.col
    rows, cols = matrix.row[off_diagonal], matrix.col[off_diagonal]
    types = matrix.data[off_diagonal].astype(np.int64) - 1
    if types.size and types.min() < 0:
        raise ValueError("edge_types holds values < 1; store type t as t + 1 (0 is no edge)")
    largest = int(max(codes.max(initial=0), first_code + types.max(initial=0)))
    out = codes.astype(np.promote_types(codes.dtype, code_dtype(largest)))
    out[rows, cols] = first_code + types
    return out
