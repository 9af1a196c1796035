"""Graph nodes: a linear model on degree and spectral features, and label propagation.

Both read the graph from ``structure.pair_codes`` (B, N, N) as the graph adapter makes it:
nodes i and j are neighbours where the code of (i, j) or of (j, i) is one of the codes that
mark a direct edge (the graph symmetrized: an edge either way joins two nodes; no self loops),
and padded nodes from ``key_padding_mask``. Those codes are ``neighbour_codes`` when given,
else the batch's own ``placement.neighbour_codes`` (a :class:`~seqattn.adapters.GraphAdapter`
puts them in every batch: one hop in either direction, in every weight bin and of every edge
type, whatever ``directed``, ``edge_weight_bins`` and ``edge_type`` make of the codes), else
``(1,)`` (one hop of an undirected graph without edge types or weight bins, for batches that
do not say).

* :class:`NodeFeatures`: per node its own inputs, its degree and log degree, the mean of its
  neighbours' inputs, and the ``spectral`` eigenvectors of the graph's normalized Laplacian with
  the smallest nonzero eigenvalues, each signed so that its largest entry is positive (a fixed
  convention, since an eigenvector's sign is arbitrary).
* :class:`LabelPropagation`: the labels of the training nodes (read from the training batches,
  known by ``coords["node"]``, their position along the Dataset's node dim) spread over the
  normalized adjacency, ``F <- alpha S F + (1 - alpha) Y``; alpha is chosen on validation.
  Nodes of graphs with no training label get the training class frequencies. Transductive:
  the training, validation and test nodes share graphs, and only training labels seed.
"""
import numpy as np

from ..kernels.cpu.gemm.blas_library import single_threaded_blas
from .base import Baseline, target_matrix
from .estimators import PROBABILITY_FLOOR, log_loss
from .linear import LinearBaseline, token_inputs

ALPHAS = (0.5, 0.8, 0.9, 0.99)
ITERATIONS = 50


def neighbour_codes_of(batch, neighbour_codes=None):
    """The codes that mark a direct edge in `batch`: `neighbour_codes` when given, else the
    batch's ``placement.neighbour_codes``, else ``(1,)`` (see the module docstring)."""
    if neighbour_codes is not None:
        return tuple(neighbour_codes)
    found = getattr(batch.placement, "neighbour_codes", None)
    return (1,) if found is None else tuple(found)


def adjacency(batch, neighbour_codes=None):
    """(B, N, N) float 0/1 neighbours (symmetric), no self loops, padding cut off."""
    if batch.structure is None or getattr(batch.structure, "pair_codes", None) is None:
        raise ValueError("node baselines read the graph from batch.structure.pair_codes (the "
                         "graph adapter's batches); this batch has none")
    codes = np.asarray(batch.structure.pair_codes)
    if codes.ndim == 2:
        codes = np.broadcast_to(codes, (len(batch), *codes.shape))
    joined = np.isin(codes, neighbour_codes_of(batch, neighbour_codes))
    A = (joined | joined.transpose(0, 2, 1)).astype(np.float64)
    present = ~np.asarray(batch.key_padding_mask)
    A *= present[:, :, None] & present[:, None, :]
    A[:, np.arange(A.shape[1]), np.arange(A.shape[1])] = 0.0
    return A


def normalized(A):
    """D^-1/2 A D^-1/2 per graph (isolated nodes keep zero rows)."""
    degree = A.sum(axis=2)
    inverse_root = np.where(degree > 0, 1.0 / np.sqrt(np.maximum(degree, 1e-300)), 0.0)
    return A * inverse_root[:, :, None] * inverse_root[:, None, :]


def spectral_positions(A, present, count):
    """(B, N, count) Laplacian eigenvectors of each graph (see the module docstring)."""
    B, N, _ = A.shape
    out = np.zeros((B, N, count))
    for b in range(B):
        nodes = np.flatnonzero(present[b])
        laplacian = np.eye(len(nodes)) - normalized(A[b][np.ix_(nodes, nodes)][None])[0]
        # one BLAS thread: a graph's eigenproblem is too small for BLAS's threads, which on
        # busy cores mostly wait for each other (as in seqattn.graphs.laplacian)
        with single_threaded_blas():
            _, vectors = np.linalg.eigh(laplacian)
        vectors = vectors[:, 1:count + 1]
        signs = np.sign(vectors[np.abs(vectors).argmax(axis=0), np.arange(vectors.shape[1])])
        out[b, nodes, :vectors.shape[1]] = vectors * np.where(signs == 0, 1.0, signs)
    return out


class NodeFeatures(LinearBaseline):
    """Ridge (values) or logistic regression (classes) per node on its inputs, degree, its
    neighbours' mean inputs and spectral positions (see the module docstring), for targets
    per node; the penalty chosen on validation.

    Parameters
    ----------
    spectral : int, default 4
        The number of Laplacian eigenvectors (smallest nonzero eigenvalues) per node; a
        graph with fewer nodes fills the rest with zeros.
    neighbour_codes : tuple of int, optional
        The pair codes of ``structure.pair_codes`` (B, N, N) that mark a direct edge.
        Default: the batch's ``placement.neighbour_codes``, else ``(1,)``.
    """

    kind = "node"

    def __init__(self, spectral=4, neighbour_codes=None):
        self.spectral = int(spectral)
        self.neighbour_codes = None if neighbour_codes is None else tuple(neighbour_codes)

    def _fit(self, train, validation):
        if not self.layout.per_token:
            raise ValueError("NodeFeatures predicts per node; these targets are per graph")
        return super()._fit(train, validation)

    def features(self, batch):
        inputs = token_inputs(batch)
        A = adjacency(batch, self.neighbour_codes)
        degree = A.sum(axis=2, keepdims=True)
        neighbours = A @ inputs / np.maximum(degree, 1.0)
        present = ~np.asarray(batch.key_padding_mask)
        return np.concatenate([inputs, degree, np.log1p(degree), neighbours,
                               spectral_positions(A, present, self.spectral)], axis=2)


class LabelPropagation(Baseline):
    """The training nodes' labels spread over the normalized adjacency,
    ``F <- alpha S F + (1 - alpha) Y``, alpha chosen on validation by log loss (see the
    module docstring); for class targets per node, transductive.

    Parameters
    ----------
    alphas : tuple of float, default (0.5, 0.8, 0.9, 0.99)
        The candidate weights of the neighbours' labels against the node's own seed, each
        in [0, 1).
    neighbour_codes : tuple of int, optional
        The pair codes of ``structure.pair_codes`` (B, N, N) that mark a direct edge.
        Default: the batch's ``placement.neighbour_codes``, else ``(1,)``.
    """

    name = "label propagation"

    def __init__(self, alphas=ALPHAS, neighbour_codes=None):
        self.alphas = tuple(alphas)
        self.neighbour_codes = None if neighbour_codes is None else tuple(neighbour_codes)

    @staticmethod
    def nodes(batch):
        if "node" not in batch.coords:
            raise ValueError("LabelPropagation knows training nodes by coords['node'] (the graph "
                             f"adapter's); the batch has {sorted(batch.coords)}")
        return np.asarray(batch.coords["node"])

    def _fit(self, train, validation):
        if not (self.layout.per_token and self.layout.classes):
            raise ValueError("LabelPropagation labels nodes: it needs class targets per node")
        self.labels = {}
        for batch in train:
            targets, known, tokens = target_matrix(batch, self.layout)
            nodes = self.nodes(batch)[tokens]
            self.labels.update(zip(nodes[known].astype(np.int64).tolist(),
                                   targets[known].tolist()))
        counts = np.bincount(list(self.labels.values()), minlength=self.layout.n_outputs)
        self.prior = counts / counts.sum()
        scores = {}
        for alpha in self.alphas:
            self.alpha = alpha
            logits, labels = [], []
            for batch in validation:
                targets, known, tokens = target_matrix(batch, self.layout)
                logits.append(self._predict(batch)[tokens][known])
                labels.append(targets[known])
            scores[alpha] = log_loss(np.concatenate(logits), np.concatenate(labels))
        self.alpha = min(scores, key=scores.get)
        return {"alpha": self.alpha, "validation_log_loss": scores}

    def _predict(self, batch):
        S = normalized(adjacency(batch, self.neighbour_codes))
        nodes = self.nodes(batch)
        B, N = nodes.shape
        seeds = np.zeros((B, N, self.layout.n_outputs))
        for (b, n), node in np.ndenumerate(nodes):
            if np.isfinite(node) and int(node) in self.labels:
                seeds[b, n, self.labels[int(node)]] = 1.0
        spread = seeds.copy()
        for _ in range(ITERATIONS):
            spread = self.alpha * S @ spread + (1 - self.alpha) * seeds
        total = spread.sum(axis=2, keepdims=True)
        probabilities = np.where(total > 0, spread / np.where(total > 0, total, 1.0), self.prior)
        # a little of the prior keeps a node that one seed dominates from a log loss of infinity
        probabilities = 0.99 * probabilities + 0.01 * self.prior
        return np.log(np.maximum(probabilities, PROBABILITY_FLOOR)).astype(np.float32)
