"""Dynamic time warping distances between two sets of series on the CPU (the distance of
:class:`seqattn.baselines.WarpingNeighbour`).

Shapes: queries (Q, T, F) and references (R, S, F), F channels per step; query q's first
``query_lengths[q]`` steps are real, the rest ignored (references alike); distances (Q, R).

The distance of series a (n steps) and b (m steps) is the least sum of squared Euclidean
distances ``||a_i - b_j||^2`` along a warping path from (1, 1) to (n, m), each step advancing i,
j or both (no normalization by the path's length). A Sakoe-Chiba band keeps the path within
``|i - j| <= w`` with ``w = floor(band * max(n, m))``, widened to ``|n - m|`` so that the path
can reach (n, m): band 0 between series of one length is their squared Euclidean distance, band
1 no band at all. A series of no step is at distance 0 from another and infinitely far from
every longer one. Each pair keeps two rows of the accumulated cost (O(S) memory) and sums in
float64; pairs are independent, so the result does not depend on the number of threads.
"""
import numpy as np
from numba import prange

from .threads import sized_kernel

# Cells of the cost table a thread must have before a launch takes it: a cell costs a few
# nanoseconds, so a thread's share is at least about a millisecond.
GRAIN = 1 << 18


def _cells(distances, queries, query_lengths, references, reference_lengths, band):
    return distances.size * queries.shape[1] * references.shape[1]


@sized_kernel(GRAIN, work=_cells)
def warping_distances(distances, queries, query_lengths, references, reference_lengths, band):
    """distances (Q, R) float64 out: the DTW distance of query q and reference r within a
    Sakoe-Chiba band of ``band`` (a fraction of the longer length; see the module docstring).
    queries (Q, T, F), references (R, S, F) float64; lengths (Q,), (R,) int64."""
    R = references.shape[0]
    F = queries.shape[2]
    for pair in prange(distances.size):
        q, r = pair // R, pair % R
        n, m = query_lengths[q], reference_lengths[r]
        w = max(int(np.floor(band * max(n, m))), abs(n - m))
        # previous[j]: the least cost of a path to (i - 1, j); column 0 and row 0 are the
        # table's border, reachable only at (0, 0)
        previous = np.full(m + 1, np.inf)
        current = np.full(m + 1, np.inf)
        previous[0] = 0.0
        for i in range(1, n + 1):
            lo, hi = max(1, i - w), min(m, i + w)
            current[lo - 1] = np.inf  # left of the band (the border, for lo = 1)
            for j in range(lo, hi + 1):
                cost = 0.0
                for f in range(F):
                    d = queries[q, i - 1, f] - references[r, j - 1, f]
                    cost += d * d
                best = min(previous[j - 1], previous[j], current[j - 1])
                current[j] = cost + best
            if hi < m:
                current[hi + 1] = np.inf  # right of the band: the next row reads it
            previous, current = current, previous
        distances[q, r] = previous[m]


def warping_distance_matrix(queries, query_lengths, references, reference_lengths, band):
    """The (Q, R) float64 DTW distances of :func:`warping_distances`, checked and allocated.

    Parameters
    ----------
    queries : numpy.ndarray
        (Q, T, F) series, the real steps of each first.
    query_lengths : numpy.ndarray
        (Q,) the real steps of each query, 0 to T.
    references : numpy.ndarray
        (R, S, F) series, the real steps of each first.
    reference_lengths : numpy.ndarray
        (R,) the real steps of each reference, 0 to S.
    band : float
        The Sakoe-Chiba band as a fraction of the longer series' length, 0 to 1.

    Returns
    -------
    numpy.ndarray
        (Q, R) float64 distances.
    """
    queries = np.ascontiguousarray(queries, np.float64)
    references = np.ascontiguousarray(references, np.float64)
    query_lengths = np.ascontiguousarray(query_lengths, np.int64)
    reference_lengths = np.ascontiguousarray(reference_lengths, np.int64)
    if queries.ndim != 3 or references.ndim != 3 or queries.shape[2] != references.shape[2]:
        raise ValueError(f"queries have shape {queries.shape} and references {references.shape}; "
                         "expected (Q, T, F) and (R, S, F) with the same channels F")
    for name, lengths, series in (("query_lengths", query_lengths, queries),
                                  ("reference_lengths", reference_lengths, references)):
        if lengths.shape != series.shape[:1] or lengths.min(initial=0) < 0 \
                or lengths.max(initial=0) > series.shape[1]:
            raise ValueError(f"{name} has shape {lengths.shape} and values "
                             f"{lengths.min(initial=0)} to {lengths.max(initial=0)}; expected "
                             f"({series.shape[0]},) lengths from 0 to {series.shape[1]}")
    if not 0.0 <= band <= 1.0:
        raise ValueError(f"band={band!r}; expected a fraction of the length from 0 to 1")
    distances = np.empty((len(queries), len(references)))
    warping_distances(distances, queries, query_lengths, references, reference_lengths,
                      float(band))
    return distances
