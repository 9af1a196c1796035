"""GraphAdapter: graphs (a Dataset of nodes and edges, see :mod:`seqattn.graphs.datasets`) as
batches of node tokens with pair codes, and predictions back onto the nodes or the graphs.

Each graph is a sample; its nodes are its tokens, graph after graph padded to the largest in
the batch (``key_padding_mask``). Per node the tokens hold the normalized ``node_features``
(none: a constant 1), and ``coords`` hold ``position`` (the node's index in its graph), ``node``
(its position along the Dataset's node dim) and the encodings asked for (names in
:mod:`seqattn.models.graph`): in/out degrees (``max_degree``), ``laplacian`` eigenvector
positions, ``random_walk`` return probabilities. NaN marks padding there.

Per pair of nodes ``structure.pair_codes`` (B, N, N), int8 while the codes fit, say what
attention may use (``attention``):

* ``"global"``: every node sees every node of its graph, with a learnable bias per hop
  distance 0 .. ``max_distance``, "farther" and "unreachable" (codes of
  :mod:`seqattn.graphs.shortest_paths`);
* ``"edges"``: a node sees itself and its neighbours only (other pairs are -1, hidden).

``edge_type`` (an edge variable of integers 0 .. ``num_edge_types`` - 1) gives neighbours a code
per type instead. With ``directed=False`` the graph is read as undirected (an edge either way
joins two nodes); with ``directed=True`` query node i sees key node j at the distance of a path
j -> i (messages flow along the edges), the random walks follow the edges, and the Laplacian is
still that of the undirected graph; ``directed="both"`` is the same but the pair code is that of
the two distances (j -> i, i -> j) together, K * K codes for K per direction (no edge types
then; with ``"edges"`` a pair is hidden when neither direction has an edge). Padded pairs are
-1. ``edge_weight`` (an edge variable) weights the random walks and the Laplacian; degrees and
distances count edges.

Targets (:meth:`GraphAdapter.batches`) are a node variable (N -> N) or a graph variable (N -> 1):
integers are class ids (missing: -100, CrossEntropyLoss's ignore_index), floats values (missing:
NaN, for skip_nan losses). ``mask`` (a bool node variable) keeps the targets of its nodes only:
one large graph with train/validation/test nodes (transductive); a bool graph variable keeps
its graphs only (inductive splits of many graphs).

A graph with no nodes, an edge between two graphs or out of range, NaN node features (unless
``validity_channels``, which appends a 0/1 presence column per feature) are errors.
"""
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
import xarray as xr

from .. import graphs
from ..models.graph import (IN_DEGREE, OUT_DEGREE, GraphModelConfig, laplacian_coord,
                            random_walk_coord)
from ..nn import Structure
from ..data.batch import Batch, Template
from ..data.checks import require_dims, require_variables
from ..data.model_call import ModelCall
from ..data.normalize import Normalizer
from ..data.persistence import Persistable

ATTENTION = ("global", "edges")
DIRECTED = (False, True, "both")
MISSING_CLASS = -100  # CrossEntropyLoss's default ignore_index


@dataclass(frozen=True)
class GraphPlacement:
    """Where the samples of a graph batch came from: ``graphs`` (B,) positions along the graph
    dim, ``nodes`` (B, N) positions along the node dim (-1 at padding)."""

    template: Template
    graphs: np.ndarray
    nodes: np.ndarray


@dataclass
class GraphSample:
    """One encoded graph of n nodes: ``features`` (n, F) and ``valid`` (n, F), ``coords``
    name -> (n,), ``codes`` (n, n), ``nodes`` (n,) positions along the node dim, ``graph``
    its position along the graph dim, ``targets`` (n, ...) or (...) or None."""

    features: np.ndarray
    valid: np.ndarray
    coords: dict
    codes: np.ndarray
    nodes: np.ndarray
    graph: int
    targets: np.ndarray = None
    per_node: bool = False  # whether targets are per node (n, ...) or for the graph


class GraphAdapter(Persistable):
    """Graphs <-> batches of node tokens; see the module docstring for every option."""

    def __init__(self, node_features=(), *, attention="global", max_distance=4, directed=False,
                 edge_weight=None, edge_type=None, num_edge_types=None, max_degree=None,
                 laplacian=0, random_walk=0, validity_channels=False, node_dim="node",
                 edge_dim="edge", graph_dim="graph", graph_index="graph_index",
                 source="source", target="target", normalizer=None):
        if isinstance(node_features, str):
            node_features = [node_features]
        if directed not in DIRECTED:
            raise ValueError(f"directed must be one of {DIRECTED}, got {directed!r}")
        if directed == "both" and edge_type is not None:
            raise ValueError('directed="both" pairs the distances of both directions in one '
                             "code, which leaves no room for edge types; use directed=True")
        if attention not in ATTENTION:
            raise ValueError(f"attention must be one of {ATTENTION}, got {attention!r}")
        if (edge_type is None) != (num_edge_types is None):
            raise ValueError("give edge_type (an edge variable) with num_edge_types (how many "
                             "types), or neither")
        for name, value in (("laplacian", laplacian), ("random_walk", random_walk)):
            if not isinstance(value, (int, np.integer)) or value < 0:
                raise ValueError(f"{name} must be an integer >= 0, got {value!r}")
        if max_degree is not None and (not isinstance(max_degree, (int, np.integer))
                                       or max_degree < 1):
            raise ValueError(f"max_degree must be an integer >= 1 or None, got {max_degree!r}")
        self.node_features = list(node_features)
        self.attention, self.max_distance, self.directed = attention, max_distance, directed
        self.edge_weight, self.edge_type, self.num_edge_types = (edge_weight, edge_type,
                                                                 num_edge_types)
        self.max_degree, self.laplacian, self.random_walk = max_degree, laplacian, random_walk
        self.validity_channels = validity_channels
        self.node_dim, self.edge_dim, self.graph_dim = node_dim, edge_dim, graph_dim
        self.graph_index, self.source, self.target = graph_index, source, target
        self.normalizer = normalizer

    def config(self):
        return dict(node_features=self.node_features, attention=self.attention,
                    max_distance=self.max_distance, directed=self.directed,
                    edge_weight=self.edge_weight, edge_type=self.edge_type,
                    num_edge_types=self.num_edge_types, max_degree=self.max_degree,
                    laplacian=self.laplacian, random_walk=self.random_walk,
                    validity_channels=self.validity_channels, node_dim=self.node_dim,
                    edge_dim=self.edge_dim, graph_dim=self.graph_dim,
                    graph_index=self.graph_index, source=self.source, target=self.target)

    # ---- what the model needs to know --------------------------------------------------

    @property
    def codes_per_direction(self):
        """Distance codes of one direction (in "edges" attention, "not connected" as one more
        when both directions are paired)."""
        if self.attention == "edges":
            return graphs.num_distance_codes(1, hide_farther=True) + (self.directed == "both")
        return graphs.num_distance_codes(self.max_distance)

    @property
    def first_type_code(self):
        """The code of edge type 0 (the distance codes come first)."""
        per_direction = self.codes_per_direction
        return per_direction ** 2 if self.directed == "both" else per_direction

    @property
    def num_codes(self):
        """The number of pair codes (the pair-bias table's size)."""
        return self.first_type_code + (self.num_edge_types or 0)

    def model_config(self, ds, out_features, task="node", **options):
        """A :class:`GraphModelConfig` that reads this adapter's batches of ``ds``: its node
        features, encodings and pair codes; ``options`` are the other config fields."""
        features = sum(int(np.prod(ds[v].shape[1:])) for v in self.node_features) or 1
        features *= 2 if self.validity_channels and self.node_features else 1
        return GraphModelConfig(in_features=features, out_features=out_features, task=task,
                                max_degree=self.max_degree, laplacian=self.laplacian,
                                random_walk=self.random_walk,
                                pair_bias={"num_codes": self.num_codes}, **options)

    # ---- reading the Dataset -----------------------------------------------------------

    def fit(self, ds):
        """Fit the node features' normalization (mean, std per feature) on ``ds``."""
        self.check(ds)
        if self.node_features:
            per_dims = {d for v in self.node_features for d in ds[v].dims[1:]}
            self.normalizer = Normalizer.fit(ds, self.node_features, per_dims=tuple(per_dims))
        return self

    def check(self, ds):
        """Refuse a Dataset this adapter cannot read, saying why."""
        require_dims(ds, [self.node_dim, self.edge_dim], "graph")
        edge_vars = [self.source, self.target] + [v for v in (self.edge_weight,
                                                               self.edge_type) if v]
        require_variables(ds, self.node_features + edge_vars)
        for name in self.node_features:
            if ds[name].dims[0] != self.node_dim:
                raise ValueError(f"node feature {name!r} has dims {ds[name].dims}; expected "
                                 f"({self.node_dim!r}, ...)")
        for name in edge_vars:
            if ds[name].dims != (self.edge_dim,):
                raise ValueError(f"edge variable {name!r} has dims {ds[name].dims}; expected "
                                 f"({self.edge_dim!r},)")

    def _graph_of_node(self, ds):
        n = ds.sizes[self.node_dim]
        if n == 0:
            raise ValueError(f"the Dataset has no nodes (its {self.node_dim!r} dim is empty); a "
                             "graph needs at least one node to be a sample")
        if self.graph_index not in ds:
            return np.zeros(n, np.int64), 1
        graph_of_node = np.asarray(ds[self.graph_index].values)
        if not np.issubdtype(graph_of_node.dtype, np.integer):
            raise TypeError(f"{self.graph_index!r} must hold integers (each node's graph), got "
                            f"{graph_of_node.dtype}")
        count = ds.sizes.get(self.graph_dim, int(graph_of_node.max(initial=-1)) + 1)
        if graph_of_node.size and (graph_of_node.min() < 0 or graph_of_node.max() >= count):
            raise ValueError(f"{self.graph_index!r} holds values outside 0 .. {count - 1} (the "
                             f"graphs along {self.graph_dim!r})")
        sizes = np.bincount(graph_of_node, minlength=count)
        if (sizes == 0).any():
            raise ValueError(f"graph {int(np.flatnonzero(sizes == 0)[0])} has no nodes; a graph "
                             "needs at least one node to be a sample (drop it from the graph dim)")
        return graph_of_node.astype(np.int64), count

    def _edges(self, ds, graph_of_node):
        n = len(graph_of_node)
        ends = []
        for name in (self.source, self.target):
            values = np.asarray(ds[name].values)
            if not np.issubdtype(values.dtype, np.integer):
                raise TypeError(f"edge variable {name!r} must hold node positions (integers), "
                                f"got {values.dtype}")
            if values.size and (values.min() < 0 or values.max() >= n):
                raise ValueError(f"edge variable {name!r} holds node positions outside 0 .. "
                                 f"{n - 1}")
            ends.append(values.astype(np.int64))
        source, target = ends
        across = graph_of_node[source] != graph_of_node[target]
        if across.any():
            e = int(np.flatnonzero(across)[0])
            raise ValueError(f"edge {e} joins node {source[e]} of graph "
                             f"{graph_of_node[source[e]]} to node {target[e]} of graph "
                             f"{graph_of_node[target[e]]}; edges must stay within a graph")
        weight = (np.ones(len(source)) if self.edge_weight is None
                  else np.asarray(ds[self.edge_weight].values, np.float64))
        types = None if self.edge_type is None else np.asarray(ds[self.edge_type].values)
        if types is not None and types.size and (types.min() < 0
                                                 or types.max() >= self.num_edge_types):
            raise ValueError(f"edge variable {self.edge_type!r} holds types outside 0 .. "
                             f"{self.num_edge_types - 1} (num_edge_types={self.num_edge_types})")
        return source, target, weight, types

    def _node_features(self, ds):
        """(features (n, F) float32 normalized, valid (n, F)) over all nodes."""
        n = ds.sizes[self.node_dim]
        if not self.node_features:
            return np.ones((n, 1), np.float32), np.ones((n, 1), bool)
        source = ds[self.node_features]
        if self.normalizer is not None:
            source = self.normalizer.apply(source)
        columns = [np.asarray(source[v].values, np.float64).reshape(n, -1)
                   for v in self.node_features]
        values = np.concatenate(columns, axis=1)
        valid = ~np.isnan(values)
        if not valid.all() and not self.validity_channels:
            node = int(np.flatnonzero(~valid.all(1))[0])
            raise ValueError(f"node {node} has NaN features; seqattn does not guess values: "
                             "pass validity_channels=True (a 0/1 presence column per feature) "
                             "or fill them")
        values = np.where(valid, values, 0.0)
        if self.validity_channels:
            values = np.concatenate([values, valid], axis=1)
        return values.astype(np.float32), valid

    # ---- encoding ----------------------------------------------------------------------

    def _distance_codes(self, adjacency):
        if self.attention == "edges":
            return graphs.shortest_path_codes(adjacency, 1, hide_farther=True)
        return graphs.shortest_path_codes(adjacency, self.max_distance)

    def _pair_codes(self, adjacency, types):
        """(n, n) codes: query i, key j (see the module docstring)."""
        if not self.directed:
            return self._typed(self._distance_codes(graphs.symmetrized(adjacency)), types)
        towards_query = self._distance_codes(adjacency.T)  # [i, j]: the distance j -> i
        if self.directed is True:
            return self._typed(towards_query, types)
        per_direction = self.codes_per_direction
        not_connected = per_direction - 1  # the hidden code's place in "edges" attention
        towards_key = self._distance_codes(adjacency)
        hidden = (towards_query == graphs.HIDDEN) & (towards_key == graphs.HIDDEN)
        towards_query, towards_key = (np.where(c == graphs.HIDDEN, not_connected, c)
                                      for c in (towards_query, towards_key))
        both = towards_query.astype(np.int32) * per_direction + towards_key
        both[hidden] = graphs.HIDDEN
        return both.astype(graphs.code_dtype(self.first_type_code - 1))

    def _typed(self, codes, types):
        if types is not None:
            types = types.T if self.directed else types.maximum(types.T)
            codes = graphs.with_edge_types(codes, types, self.first_type_code)
        return codes

    def _encodings(self, adjacency):
        """name -> (n,) float64 node encodings of one graph."""
        coords = {}
        if self.max_degree is not None:
            in_degree, out_degree = graphs.in_out_degrees(adjacency)
            coords[IN_DEGREE], coords[OUT_DEGREE] = (in_degree.astype(np.float64),
                                                     out_degree.astype(np.float64))
        if self.laplacian:
            positions = graphs.laplacian_positions(graphs.symmetrized(adjacency), self.laplacian)
            coords.update({laplacian_coord(i + 1): positions[:, i]
                           for i in range(self.laplacian)})
        if self.random_walk:
            walked = adjacency if self.directed else graphs.symmetrized(adjacency)
            probabilities = graphs.return_probabilities(walked, self.random_walk)
            coords.update({random_walk_coord(s + 1): probabilities[:, s]
                           for s in range(self.random_walk)})
        return coords

    def samples(self, ds):
        """One :class:`GraphSample` per graph of ``ds`` (without targets), in graph order."""
        self.check(ds)
        graph_of_node, count = self._graph_of_node(ds)
        source, target, weight, types = self._edges(ds, graph_of_node)
        features, valid = self._node_features(ds)
        node_order = np.argsort(graph_of_node, kind="stable")
        node_starts = np.searchsorted(graph_of_node[node_order], np.arange(count + 1))
        edge_graph = graph_of_node[source]
        edge_order = np.argsort(edge_graph, kind="stable")
        edge_starts = np.searchsorted(edge_graph[edge_order], np.arange(count + 1))
        local = np.empty(len(graph_of_node), np.int64)
        out = []
        for g in range(count):
            nodes = node_order[node_starts[g]:node_starts[g + 1]]
            local[nodes] = np.arange(len(nodes))
            edges = edge_order[edge_starts[g]:edge_starts[g + 1]]
            s, t = local[source[edges]], local[target[edges]]
            shape = (len(nodes), len(nodes))
            adjacency = sp.csr_array((weight[edges], (s, t)), shape=shape)  # repeats add up
            typed = None if types is None else graphs.type_matrix(s, t, types[edges], len(nodes))
            coords = {"position": np.arange(len(nodes), dtype=np.float64),
                      "node": nodes.astype(np.float64), **self._encodings(adjacency)}
            out.append(GraphSample(features[nodes], valid[nodes], coords,
                                   self._pair_codes(adjacency, typed), nodes, g))
        return out

    def with_targets(self, ds, samples, targets, mask=None):
        """The samples that have targets, each with its ``targets`` set (module docstring)."""
        require_variables(ds, [targets] + ([mask] if mask else []), "target")
        level = ds[targets].dims[0]
        if level not in (self.node_dim, self.graph_dim):
            raise ValueError(f"targets {targets!r} has dims {ds[targets].dims}; expected a node "
                             f"variable ({self.node_dim!r}, ...) or a graph variable "
                             f"({self.graph_dim!r}, ...)")
        values = np.asarray(ds[targets].values)
        classes = np.issubdtype(values.dtype, np.integer)
        values = values.astype(np.int64) if classes else values.astype(np.float32)
        if not classes and values.ndim == 1:
            values = values[:, None]  # one value per node or graph: (rows, 1)
        if mask is not None:
            keep, mask_dims = np.asarray(ds[mask].values), ds[mask].dims
            if keep.dtype != np.bool_:
                raise TypeError(f"mask {mask!r} has dtype {keep.dtype}; expected bool")
            if mask_dims == (self.graph_dim,):
                samples = [s for s in samples if keep[s.graph]]
            elif mask_dims == (level,):
                missing = MISSING_CLASS if classes else np.nan
                values = np.where(keep.reshape((-1,) + (1,) * (values.ndim - 1)), values,
                                  missing)
            else:
                raise ValueError(f"mask {mask!r} has dims {mask_dims}; expected ({level!r},) "
                                 f"like the targets, or ({self.graph_dim!r},) to keep graphs")
        per_node = level == self.node_dim
        return [GraphSample(**{**vars(s), "targets": values[s.nodes] if per_node
                               else values[s.graph], "per_node": per_node}) for s in samples]

    def collate(self, samples, template):
        """One :class:`Batch` of ``samples`` padded to the largest graph among them."""
        B, N = len(samples), max(len(s.nodes) for s in samples)
        F = samples[0].features.shape[1]
        tokens = np.zeros((B, N, F), np.float32)
        valid = np.zeros((B, N, samples[0].valid.shape[1]), bool)
        padding = np.ones((B, N), bool)
        nodes = np.full((B, N), -1, np.int64)
        codes = np.full((B, N, N), graphs.HIDDEN,
                        np.result_type(*[s.codes.dtype for s in samples]))
        coords = {name: np.full((B, N), np.nan) for name in samples[0].coords}
        for b, s in enumerate(samples):
            n = len(s.nodes)
            tokens[b, :n], valid[b, :n], padding[b, :n], nodes[b, :n] = (s.features, s.valid,
                                                                         False, s.nodes)
            codes[b, :n, :n] = s.codes
            for name, values in s.coords.items():
                coords[name][b, :n] = values
        targets = None
        if samples[0].targets is not None:
            targets = np.stack([_padded(s.targets, s.per_node, N) for s in samples])
        placement = GraphPlacement(template, np.array([s.graph for s in samples]), nodes)
        return Batch(tokens=tokens, key_padding_mask=padding, valid=valid, coords=coords,
                     placement=placement, targets=targets,
                     structure=Structure(pair_codes=codes))

    def encode(self, ds, batch_size=None, samples=None):
        """Batches (a list) of every graph of ``ds``, ``batch_size`` graphs each (default: all
        in one), without targets: what :meth:`predict` runs the model on. ``samples``: this
        adapter's :meth:`samples` of ``ds``, to reuse encodings computed before."""
        samples = self.samples(ds) if samples is None else samples
        size = batch_size or len(samples)
        return [self.collate(samples[i:i + size], template_of(ds))
                for i in range(0, len(samples), size)]

    def batches(self, ds, targets, mask=None, batch_size=32, shuffle=True, seed=0,
                samples=None):
        """Training (or validation) batches with ``targets`` (a node or graph variable), only
        where ``mask`` is True (see the module docstring): a :class:`GraphBatches`, whose
        ``epoch(e)`` order depends on (seed, e) only, for ``fit``. ``samples`` as in
        :meth:`encode`."""
        samples = self.with_targets(ds, self.samples(ds) if samples is None else samples,
                                    targets, mask)
        if not samples:
            raise ValueError(f"mask {mask!r} keeps no graph; nothing to train or evaluate on")
        return GraphBatches(self, samples, template_of(ds), batch_size, shuffle, seed)

    def predict(self, model, ds, batch_size=32, variables=None, samples=None):
        """The predictions of ``model`` for every graph of ``ds``, as a Dataset: on the node
        dim when the model gives (B, N, F_out) (node tasks; padding dropped), on the graph dim
        when it gives (B, F_out). One variable ``prediction`` (dim, ``output``), or with
        ``variables`` one per output column, named in order; ``samples`` as in :meth:`encode`.
        seqattn models run in evaluation mode."""
        run = ModelCall(model)
        graph_of_node, count = self._graph_of_node(ds)
        out = None
        for batch in self.encode(ds, batch_size, samples):
            predictions = run(batch)
            node_level = predictions.ndim == 3
            if predictions.shape[:predictions.ndim - 1] != batch.key_padding_mask.shape[
                    :predictions.ndim - 1] or predictions.ndim not in (2, 3):
                raise ValueError(f"the model returned shape {predictions.shape} for "
                                 f"{len(batch)} graphs of up to {batch.tokens.shape[1]} nodes; "
                                 "expected (B, N, F_out) per node or (B, F_out) per graph")
            if out is None:
                rows = len(graph_of_node) if node_level else count
                out = np.full((rows, predictions.shape[-1]), np.nan,
                              np.result_type(predictions.dtype, np.float32))
            if node_level:
                present = ~batch.key_padding_mask
                out[batch.placement.nodes[present]] = predictions[present]
            else:
                out[batch.placement.graphs] = predictions
        dim = self.node_dim if node_level else self.graph_dim
        coords = {name: c for name, c in ds.coords.items() if set(c.dims) <= {dim}}
        if variables is None:
            return xr.Dataset({"prediction": ((dim, "output"), out)}, coords=coords)
        if len(variables) != out.shape[1]:
            raise ValueError(f"variables {variables} name {len(variables)} outputs, but the "
                             f"model returned {out.shape[1]} per {dim}")
        return xr.Dataset({v: (dim, out[:, i]) for i, v in enumerate(variables)}, coords=coords)


def template_of(ds):
    """The Template of ``ds``'s coordinates (no data values)."""
    return Template.of(ds.drop_vars(list(ds.data_vars)))


def _padded(targets, per_node, N):
    """A sample's targets padded to N nodes with the missing value (node-level ones)."""
    if not per_node:
        return targets
    missing = MISSING_CLASS if np.issubdtype(targets.dtype, np.integer) else np.nan
    padded = np.full((N,) + targets.shape[1:], missing, targets.dtype)
    padded[:len(targets)] = targets
    return padded


class GraphBatches:
    """Batches of graphs with targets, ``batch_size`` graphs each, shuffled per epoch from
    ``seed`` when ``shuffle``; ``epoch(e)`` is what ``fit`` reads, iterating gives epoch 0."""

    def __init__(self, adapter, samples, template, batch_size, shuffle, seed):
        if not isinstance(batch_size, (int, np.integer)) or batch_size < 1:
            raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
        self.adapter, self.samples, self.template = adapter, samples, template
        self.batch_size, self.shuffle, self.seed = batch_size, shuffle, seed

    def __len__(self):
        return -(-len(self.samples) // self.batch_size)

    def epoch(self, epoch):
        order = np.arange(len(self.samples))
        if self.shuffle:
            order = np.random.default_rng([self.seed, epoch]).permutation(order)
        size = self.batch_size
        return [self.adapter.collate([self.samples[i] for i in order[start:start + size]],
                                     self.template)
                for start in range(0, len(order), size)]

    def __iter__(self):
        return iter(self.epoch(0))
