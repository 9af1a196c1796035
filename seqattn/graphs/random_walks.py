"""Random-walk structural encodings: the probability that a walk from a node is back at that
node after 1, 2, ..., K steps (GraphGPS's RWSE), which tells cycles, triangles and hubs apart.

A walk at node i moves along one of i's out-edges, chosen with probability proportional to its
weight (P = D_out^-1 A); a walk at a node without out-edges (an isolated node, a sink of a
directed graph) stops there and lands nowhere, so its probabilities are 0. A self loop is an
edge like any other (the walk may stay put). Row i of the result holds (P^1)_ii .. (P^K)_ii.
Computed a block of start nodes at a time, so memory is O(block x N), never N x N.
"""
import numpy as np
import scipy.sparse as sp

from .adjacency import as_adjacency

START_BLOCK = 256


def transition_matrix(adjacency):
    """P = D_out^-1 A (CSR): row i the one-step landing probabilities of a walk at node i
    (all zero for a node without out-edges).

    Parameters
    ----------
    adjacency : scipy.sparse matrix or array_like, shape (N, N)
        Edge weights, entry (i, j) the edge i -> j (checked by :func:`as_adjacency`).

    Returns
    -------
    scipy.sparse.csr_array, shape (N, N), float64
        Each row of a node with out-edges sums to 1.
    """
    matrix = as_adjacency(adjacency)
    out_weight = np.asarray(matrix.sum(axis=1)).ravel()
    inverse = np.zeros_like(out_weight)
    inverse[out_weight > 0] = 1.0 / out_weight[out_weight > 0]
    return sp.csr_array(sp.diags_array(inverse) @ matrix)


def return_probabilities(adjacency, steps):
    """(N, steps) float64: column s - 1 the probability that an s-step walk from each node
    ends where it started (see the module docstring).

    Parameters
    ----------
    adjacency : scipy.sparse matrix or array_like, shape (N, N)
        Edge weights, entry (i, j) the edge i -> j; a walk picks an out-edge in proportion to
        its weight.
    steps : int
        K, the longest walk, at least 1.

    Returns
    -------
    numpy.ndarray, shape (N, steps), float64
        Row i: (P^1)_ii .. (P^K)_ii.
    """
    if not isinstance(steps, (int, np.integer)) or steps < 1:
        raise ValueError(f"steps must be an integer >= 1, got {steps!r}")
    transition = transition_matrix(adjacency)
    n = transition.shape[0]
    probabilities = np.zeros((n, steps))
    transposed = sp.csr_array(transition.T)
    for start in range(0, n, START_BLOCK):
        rows = np.arange(start, min(start + START_BLOCK, n))
        # walks (N, block): column c the distribution over nodes of the walk from start node
        # rows[c]; one step is d -> d P, i.e. walks -> P^T walks
        walks = np.zeros((n, len(rows)))
        walks[rows, np.arange(len(rows))] = 1.0
        for step in range(steps):
            walks = transposed @ walks
            probabilities[rows, step] = walks[rows, np.arange(len(rows))]
    return probabilities
