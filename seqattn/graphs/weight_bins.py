"""Edge weights as pair codes: the weight of the edge that joins two nodes, in one of a few
quantile bins, so that attention can tell a strong connection from a weak one.

Hop distances alone ignore weights: on a dense weighted graph (a connectome of synapse counts)
nearly every pair is "1 hop", whatever the weight. Binning splits that code:

* :func:`fit_weight_thresholds` cuts the weights of the training edges at their quantiles
  1/K, ..., (K - 1)/K; repeated weights (integer synapse counts) merge bins, so there may be
  fewer than K - 1 thresholds, never a bin that the training edges leave empty at the top;
* :func:`weight_bins` gives an edge of weight w the bin ``b`` with
  ``thresholds[b - 1] < w <= thresholds[b]`` (bins ``0 .. len(thresholds)``);
* :func:`split_one_hop` turns the distance code 1 (an edge joins the pair) into ``1 + b`` and
  moves every larger code up by ``len(thresholds)``; codes 0 (a node and itself) and negative
  (hidden) stay.
"""
import numpy as np
import scipy.sparse as sp

from .shortest_paths import code_dtype


def fit_weight_thresholds(weights, bins):
    """The thresholds (sorted float64, at most ``bins - 1``) between ``bins`` quantile bins of
    ``weights`` (the training edges' weights); none when ``bins`` is 1 or there is no edge.

    Parameters
    ----------
    weights : array_like of float, any shape
        The training edges' weights, finite; flattened.
    bins : int
        K, the number of quantile bins asked for, at least 1 (1: weights not binned).

    Returns
    -------
    numpy.ndarray, shape (T,), float64
        The distinct quantiles 1/K .. (K - 1)/K below the largest weight, sorted; T <= K - 1.
    """
    if not isinstance(bins, (int, np.integer)) or isinstance(bins, bool) or bins < 1:
        raise ValueError(f"bins = {bins!r}; expected an integer >= 1 (1: weights not binned)")
    weights = np.asarray(weights, dtype=np.float64).ravel()
    if weights.size == 0 or bins == 1:
        return np.zeros(0)
    if not np.isfinite(weights).all():
        raise ValueError("weights hold NaN or infinite values; expected finite edge weights")
    thresholds = np.unique(np.quantile(weights, np.arange(1, bins) / bins))
    return thresholds[thresholds < weights.max()]  # no bin above the largest training weight


def weight_bins(weights, thresholds):
    """The bin (int64, 0 .. len(thresholds)) of each of ``weights``: see the module docstring.

    Parameters
    ----------
    weights : array_like of float, any shape
        Edge weights.
    thresholds : array_like of float, shape (T,)
        Sorted thresholds, as :func:`fit_weight_thresholds` returns them.

    Returns
    -------
    numpy.ndarray of int64, the shape of ``weights``
        Bin b where ``thresholds[b - 1] < w <= thresholds[b]``.
    """
    return np.searchsorted(np.asarray(thresholds), np.asarray(weights, np.float64), side="left")


def split_one_hop(codes, adjacency, thresholds):
    """A copy of distance ``codes`` (N, N) where each pair at code 1 gets ``1 + bin`` of the
    weight ``adjacency[i, j]`` (the edge that makes the pair one hop apart, in the orientation
    the codes were computed in) and codes above 1 move up by ``len(thresholds)``.

    Parameters
    ----------
    codes : numpy.ndarray of int, shape (N, N)
        Distance codes from :func:`seqattn.graphs.shortest_path_codes`; not modified.
    adjacency : scipy.sparse matrix or array_like, shape (N, N)
        The edge weights the codes were computed from, in the same orientation.
    thresholds : array_like of float, shape (T,)
        The bins' thresholds (:func:`fit_weight_thresholds`); none leaves the codes as they are.

    Returns
    -------
    numpy.ndarray of int, shape (N, N)
        The codes, in their dtype or a wider one that holds the largest code.
    """
    extra = len(thresholds)
    if extra == 0:
        return codes.copy()
    matrix = sp.csr_array(adjacency)
    if matrix.shape != codes.shape:
        raise ValueError(f"adjacency has shape {matrix.shape} but the codes are {codes.shape}")
    out = codes.astype(np.promote_types(codes.dtype, code_dtype(int(codes.max(initial=0))
                                                                + extra)))
    out[codes > 1] += extra
    rows, cols = np.nonzero(codes == 1)
    if rows.size:  # scipy gives no array for an empty fancy index
        out[rows, cols] = 1 + weight_bins(np.asarray(matrix[rows, cols]).ravel(), thresholds)
    return out
