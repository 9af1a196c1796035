"""Encoded graphs and the batches made of them: :class:`GraphSample` (one graph, its structure
computed once), :class:`GraphBatches` (the protocol's batch producer over them) and the
:class:`GraphPlacement` that tells :meth:`GraphAdapter.decode` where each node and graph of a
batch came from."""
from dataclasses import dataclass

import numpy as np

from .. import graphs
from ..data.batch import Batch, Template
from ..data.protocol import Batches
from ..data.targets import MISSING_CLASS
from ..nn import Structure


@dataclass(frozen=True)
class GraphPlacement:
    """Where the samples of a graph batch came from: ``graphs`` (B,) positions along the graph
    dim, ``nodes`` (B, N) positions along the node dim (-1 at padding), ``selected`` (B, N)
    the nodes that ``where`` chose (their targets are kept and their predictions decoded),
    ``neighbour_codes`` the pair codes that mark a direct edge (one hop, either direction, any
    weight bin or edge type: ``GraphAdapter.neighbour_codes``), or None."""

    template: Template
    graphs: np.ndarray
    nodes: np.ndarray
    selected: np.ndarray
    neighbour_codes: tuple = None


@dataclass
class GraphSample:
    """One encoded graph of n nodes: ``features`` (n, F) and ``valid`` (n, Fv), ``coords``
    name -> (n,), ``codes`` (n, n) pair codes, ``nodes`` (n,) positions along the node dim,
    ``graph`` its position along the graph dim, ``selected`` (n,) bool; ``targets`` (n, ...)
    per node or (...) per graph (missing: MISSING_CLASS for classes, NaN for values), or
    None."""

    features: np.ndarray
    valid: np.ndarray
    coords: dict
    codes: np.ndarray
    nodes: np.ndarray
    graph: int
    selected: np.ndarray
    targets: np.ndarray = None
    per_node: bool = False


class GraphBatches(Batches):
    """Batches of encoded graphs, ``batch_size`` graphs each, each batch padded to its largest
    graph; see :class:`seqattn.data.protocol.Batches` for epochs and shuffling.

    What ``GraphAdapter.batches`` returns.

    Parameters
    ----------
    samples : list of GraphSample
        The encoded graphs, one sample each.
    template : Template
        The graph Dataset's coordinates (no data variables), which placements refer to.
    batch_size : int or None, default 32
        Graphs per batch; None puts all graphs in one batch.
    shuffle : bool, default False
        Whether each epoch draws a new order of the graphs.
    seed : int or None, default 0
        Seed of the shuffled order, which depends only on (seed, epoch).
    drop_last : bool, default False
        Whether to leave out the last batch when it has fewer than `batch_size` graphs.
    neighbour_codes : tuple of int, optional
        The pair codes that mark a direct edge (``GraphAdapter.neighbour_codes``), passed on to
        each batch's placement; default None.
    """

    def __init__(self, samples, template, batch_size=32, shuffle=False, seed=0,
                 drop_last=False, neighbour_codes=None):
        super().__init__(batch_size, shuffle, seed, drop_last)
        self.samples, self.template = samples, template
        self.neighbour_codes = neighbour_codes
        self.n_samples = len(samples)

    def collate(self, indices):
        return collate([self.samples[i] for i in indices], self.template, self.neighbour_codes)


def collate(samples, template, neighbour_codes=None):
    """One :class:`Batch` of ``samples`` padded to the largest graph among them. Value targets
    missing (NaN) are 0 in ``targets`` and False in ``target_valid``; class targets missing are
    MISSING_CLASS."""
    B, N = len(samples), max(len(s.nodes) for s in samples)
    tokens = np.zeros((B, N, samples[0].features.shape[1]), np.float32)
    valid = np.zeros((B, N, samples[0].valid.shape[1]), bool)
    padding = np.ones((B, N), bool)
    nodes = np.full((B, N), -1, np.int64)
    selected = np.zeros((B, N), bool)
    codes = np.full((B, N, N), graphs.HIDDEN, np.result_type(*[s.codes.dtype for s in samples]))
    coords = {name: np.full((B, N), np.nan) for name in samples[0].coords}
    for b, s in enumerate(samples):
        n = len(s.nodes)
        tokens[b, :n], valid[b, :n], padding[b, :n] = s.features, s.valid, False
        nodes[b, :n], selected[b, :n], codes[b, :n, :n] = s.nodes, s.selected, s.codes
        for name, values in s.coords.items():
            coords[name][b, :n] = values
    targets = target_valid = None
    if samples[0].targets is not None:
        targets = np.stack([_padded(s.targets, s.per_node, N) for s in samples])
        if targets.dtype.kind == "f":
            target_valid = ~np.isnan(targets)
            targets = np.where(target_valid, targets, 0).astype(np.float32)
    placement = GraphPlacement(template, np.array([s.graph for s in samples]), nodes, selected,
                               neighbour_codes)
    return Batch(tokens=tokens, key_padding_mask=padding, valid=valid, coords=coords,
                 placement=placement, targets=targets, target_valid=target_valid,
                 structure=Structure(pair_codes=codes))


def _padded(targets, per_node, N):
    """A sample's targets padded to N nodes with the missing value (node-level ones)."""
    if not per_node:
        return targets
    missing = MISSING_CLASS if targets.dtype.kind in "iu" else np.nan
    padded = np.full((N,) + targets.shape[1:], missing, targets.dtype)
    padded[:len(targets)] = targets
    return padded
