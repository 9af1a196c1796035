"""GraphAdapter: graphs (a Dataset of nodes and edges, see :mod:`seqattn.readers.graphs`) as
batches of node tokens with pair codes, and predictions back onto the nodes or the graphs, by
the protocol of :mod:`seqattn.data.protocol`::

    ds = from_networkx(g, node_features=["club"])            # or graph_dataset(matrices)
    adapter = GraphAdapter(max_degree=8).fit(ds, targets="club", where=ds.train)
    model = build(adapter.model_config(d_model=16))          # sizes from the fitted adapter
    fit(model, CrossEntropyLoss(), AdamW(model, lr=1e-2), adapter.batches(ds, where=ds.train))
    out = seqattn.predict(model, ds, adapter)                # club, club_probability (node, class)

**Samples.** Each graph is a sample; its nodes are its tokens, graph after graph padded to the
largest in the batch (``key_padding_mask``). Per node the tokens hold the normalized
``node_features`` (none: a constant 1), and ``coords`` hold ``position`` (the node's index in
its graph), ``node`` (its position along the node dim) and the encodings asked for (names in
:mod:`seqattn.models.graph`): in/out degrees (``max_degree``), ``laplacian`` eigenvector
positions, ``random_walk`` return probabilities.

**Selecting with ``where``.** The sample dims are ``graph`` and ``node`` (``node`` alone when
the Dataset has no graph dim). A boolean DataArray on ``graph`` (or ``{"graph": ...}``) selects
whole graphs (inductive splits of many graphs); one on ``node`` (``where=ds.train`` for a train
mask of nodes, or ``{"node": ...}``) selects nodes (transductive: one large graph whose
train/validation/test nodes are masks); a dict may hold both. ``fit`` reads the subgraph that
the selected nodes induce (their features and targets, the edges between them); ``batches``,
``encode`` and ``predict`` keep every graph with a selected node whole, as the context
attention reads, and give targets and predictions for the selected nodes only (all nodes of
the selected graphs when ``where`` names graphs). :meth:`GraphAdapter.select` cuts the node,
edge and graph dims together (``ds.isel(graph=...)`` leaves every node and edge).

**Pair codes.** ``structure.pair_codes`` (B, N, N), int8 while the codes fit, say what attention
may use (``attention``):

* ``"global"``: every node sees every node of its graph, with a learnable bias per hop
  distance 0 .. ``max_distance``, "farther" and "unreachable" (codes of
  :mod:`seqattn.graphs.shortest_paths`);
* ``"edges"``: a node sees itself and its neighbours only (other pairs are -1, hidden).

With ``directed=False`` the graph is read as undirected (an edge either way joins two nodes,
weighted by the larger weight); with ``directed=True`` query node i sees key node j at the
distance of a path j -> i (messages flow along the edges), the random walks follow the edges,
and the Laplacian is still that of the undirected graph; ``directed="both"`` is the same but
the pair code is that of the two distances (j -> i, i -> j) together, K * K codes for K per
direction (no edge types then; with ``"edges"`` a pair is hidden when neither direction has an
edge). Padded pairs are -1.

``edge_type`` (an edge variable of integers 0 .. ``num_edge_types`` - 1) gives neighbours a
code per type instead of "1 hop". ``edge_weight`` (an edge variable, weights >= 0) weights the
random walks and the Laplacian; with ``edge_weight_bins=K`` it enters the pair codes too: ``fit``
cuts the training edges' weights at their quantiles (:mod:`seqattn.graphs.weight_bins`; ties
merge bins, the thresholds are fitted state), and a pair joined by an edge gets the code of its
weight's bin in place of "1 hop" (per direction with ``directed="both"``; per type and bin,
``num_edge_types * bins`` codes, with edge types). Degrees and hop distances count edges.

**Targets** (``fit(ds, targets=...)``) are one node variable (N -> N) or graph variable
(N -> 1): float values (normalized with statistics from the selection ``fit`` saw, predicted
back in physical units) or classes (integers, bools, strings, or declared in attrs; see
:mod:`seqattn.data.targets`), predicted as ``<target>`` and ``<target>_probability`` on
``class``. Missing targets: NaN or empty labels.

**Refused, with the reason:** a graph with no nodes, an edge between two graphs or out of range,
an edge listed twice (its weights would be summed away silently), negative or non-finite
weights, infinite node features, NaN node features unless ``validity_channel`` (which appends a
0/1 presence column per feature: NaN becomes a mask, never a silent zero).
"""
import numpy as np
import scipy.sparse as sp
import xarray as xr

from .. import graphs
from ..data.batch import Template
from ..data.checks import require_dims, require_variables
from ..data.model_call import ModelCall
from ..data.normalize import Normalizer
from ..data.persistence import Persistable
from ..data.protocol import Adapter, NotFittedError, check_batch_size, sample_selection
from ..data.targets import MISSING_CLASS, class_indices, class_predictions, describe_targets
from ..models.graph import (IN_DEGREE, OUT_DEGREE, GraphModelConfig, laplacian_coord,
                            random_walk_coord)
from .graph_batches import GraphBatches, GraphPlacement, GraphSample, collate
from .graph_cache import StructureCache
from .graph_structure import GraphLayout

__all__ = ["GraphAdapter", "GraphBatches", "GraphPlacement", "GraphSample", "collate"]

ATTENTION = ("global", "edges")
DIRECTED = (False, True, "both")
TASKS = ("classification", "regression")
RENAMED = {"validity_channels": "validity_channel"}
REMOVED = {"normalizer": "fitted statistics come from fit (adapter.fit(ds, where=train)) or "
                         "with the adapter from seqattn.load",
           "mask": "select the nodes or graphs with where= (where=ds[mask])",
           "samples": "the encodings are computed per call; drop samples=",
           "variables": "predictions are named after the targets given to fit"}


def _refuse_removed(call, removed):
    for name in removed:
        if name in RENAMED:
            raise TypeError(f"{call}: {name}= is now spelled {RENAMED[name]}= (seqattn 0.2, "
                            "as on GridAdapter)")
        if name in REMOVED:
            raise TypeError(f"{call}: {name}= was removed in seqattn 0.2; {REMOVED[name]}")
        raise TypeError(f"{call} got an unexpected keyword argument {name!r}")


class GraphAdapter(Persistable, Adapter):
    """Graphs <-> batches of node tokens with pair codes (see the module docstring).

    Parameters
    ----------
    node_features : str or list of str, default ()
        Node variables (dims ``(node,)`` or ``(node, ...)``) that make the tokens; none: each
        token is a constant 1 (the structure alone).
    attention : {"global", "edges"}, default "global"
        Every node sees its whole graph with a bias per hop distance, or its neighbours only.
    max_distance : int, default 4
        Hop distances 1 .. max_distance get a code each ("global" attention); farther pairs
        share one.
    directed : {False, True, "both"}, default False
        How edges are read (module docstring).
    edge_weight : str, optional
        Edge variable of weights >= 0 for the random walks, the Laplacian and the weight bins.
    edge_weight_bins : int, optional
        K >= 1: a pair joined by an edge gets the code of its weight's quantile bin (fitted on
        the training edges) instead of "1 hop"; None: weights stay out of the codes.
    edge_type, num_edge_types : str and int, optional
        Edge variable of integer types 0 .. num_edge_types - 1, given together.
    max_degree : int, optional
        In- and out-degree encodings, degrees clipped at it.
    laplacian, random_walk : int, default 0
        How many Laplacian eigenvector positions and random-walk return probabilities per node
        (0: none).
    validity_channel : bool, default False
        Accept NaN node features: 0 in the tokens, and a 0/1 presence column per feature.
    node_dim, edge_dim, graph_dim, graph_index, source, target : str
        The Dataset's names (defaults: :mod:`seqattn.readers.graphs`'s, "node", "edge",
        "graph", "graph_index", "source", "target").
    **removed
        Arguments earlier releases took (``normalizer``, ``mask``, ``samples``,
        ``variables``, ``validity_channels``): refused with a TypeError that says what replaces
        each.
    """

    weight_thresholds = ()  # fitted: the edge-weight bin thresholds
    target_layout = None  # fitted: {"dims": the target's dims, "shape": its trailing sizes}

    def __init__(self, node_features=(), *, attention="global", max_distance=4, directed=False,
                 edge_weight=None, edge_weight_bins=None, edge_type=None, num_edge_types=None,
                 max_degree=None, laplacian=0, random_walk=0, validity_channel=False,
                 node_dim="node", edge_dim="edge", graph_dim="graph", graph_index="graph_index",
                 source="source", target="target", **removed):
        _refuse_removed("GraphAdapter", removed)
        if isinstance(node_features, str):
            node_features = [node_features]
        if directed not in DIRECTED:
            raise ValueError(f"directed = {directed!r}; expected one of {DIRECTED}")
        if directed == "both" and edge_type is not None:
            raise ValueError('directed="both" pairs the distances of both directions in one '
                             "code, which leaves no room for edge types; use directed=True")
        if attention not in ATTENTION:
            raise ValueError(f"attention = {attention!r}; expected one of {ATTENTION}")
        if (edge_type is None) != (num_edge_types is None):
            raise ValueError("give edge_type (an edge variable) with num_edge_types (how many "
                             "types), or neither")
        if edge_weight_bins is not None:
            _require_int("edge_weight_bins", edge_weight_bins, 1)
            if edge_weight is None:
                raise ValueError(f"edge_weight_bins = {edge_weight_bins} bins the edge weights, "
                                 "but edge_weight (the edge variable that holds them) is None")
        _require_int("max_distance", max_distance, 1)
        for name, value in (("laplacian", laplacian), ("random_walk", random_walk)):
            _require_int(name, value, 0)
        if max_degree is not None:
            _require_int("max_degree", max_degree, 1)
        self.node_features = list(node_features)
        self.attention, self.max_distance, self.directed = attention, max_distance, directed
        self.edge_weight, self.edge_weight_bins = edge_weight, edge_weight_bins
        self.edge_type, self.num_edge_types = edge_type, num_edge_types
        self.max_degree, self.laplacian, self.random_walk = max_degree, laplacian, random_walk
        self.validity_channel = bool(validity_channel)
        self.node_dim, self.edge_dim, self.graph_dim = node_dim, edge_dim, graph_dim
        self.graph_index, self.source, self.target = graph_index, source, target
        self.layout = GraphLayout(node_dim, edge_dim, graph_dim, graph_index, source, target)
        self._structures = StructureCache()

    # ---- fitted state ------------------------------------------------------------------

    def get_state(self):
        return {**super().get_state(), "fitted": self.fitted,
                "weight_thresholds": [float(t) for t in self.weight_thresholds],
                "target_layout": self.target_layout}

    def set_state(self, state):
        super().set_state(state)
        self.weight_thresholds = np.asarray(state.get("weight_thresholds", ()), np.float64)
        layout = state.get("target_layout")
        self.target_layout = None if layout is None else {"dims": list(layout["dims"]),
                                                          "shape": list(layout["shape"])}
        self.fitted = bool(state.get("fitted", True))

    # ---- what the model needs to know --------------------------------------------------

    @property
    def weight_bin_count(self):
        """How many weight bins the fitted thresholds make (1: weights not in the codes)."""
        return len(self.weight_thresholds) + 1

    def _splits_one_hop(self):
        """Whether weight bins replace the "1 hop" code (without edge types; with them the
        bins split each type's code)."""
        return self.edge_weight_bins is not None and self.edge_type is None

    @property
    def codes_per_direction(self):
        """Distance codes of one direction (in "edges" attention, "not connected" as one more
        when both directions are paired), the 1-hop code split into the weight bins."""
        split = self.weight_bin_count - 1 if self._splits_one_hop() else 0
        if self.attention == "edges":
            return graphs.num_distance_codes(1, hide_farther=True) + (self.directed == "both") \
                + split
        return graphs.num_distance_codes(self.max_distance) + split

    @property
    def first_type_code(self):
        """The code of edge type 0 (the distance codes come first)."""
        per_direction = self.codes_per_direction
        return per_direction ** 2 if self.directed == "both" else per_direction

    @property
    def num_codes(self):
        """The number of pair codes (the pair-bias table's size)."""
        types = (self.num_edge_types or 0) * (self.weight_bin_count
                                              if self.edge_weight_bins is not None else 1)
        return self.first_type_code + types

    @property
    def neighbour_codes(self):
        """The pair codes that mark a direct edge, one hop either way, whatever its weight bin or
        edge type (what the node baselines read as adjacency; every batch's
        ``placement.neighbour_codes``). With ``directed="both"``, every code whose distance in
        either direction is one hop."""
        one_hop = range(1, self.weight_bin_count + 1 if self._splits_one_hop() else 2)
        if self.directed == "both":
            per_direction = self.codes_per_direction
            return tuple(towards_query * per_direction + towards_key
                         for towards_query in range(per_direction)
                         for towards_key in range(per_direction)
                         if towards_query in one_hop or towards_key in one_hop)
        return tuple(one_hop) + tuple(range(self.first_type_code, self.num_codes))

    def model_config(self, *args, task=None, **options):
        """The :class:`GraphModelConfig` of the model that reads this adapter's batches.

        Parameters
        ----------
        task : {"classification", "regression"}, optional
            Checked against the targets given to ``fit`` (default: what they are). A node
            target makes a model with ``task="node"`` (N -> N), a graph target one with
            ``task="graph"`` (N -> 1).
        **options
            The other GraphModelConfig fields (d_model, nhead, num_layers, ...).

        Returns
        -------
        GraphModelConfig
            ``in_features``, ``out_features`` (classes or value width), the encodings and
            ``pair_bias={"num_codes": ...}`` from the fitted adapter.
        """
        if args:
            raise TypeError("GraphAdapter.model_config takes no ds or out_features since seqattn "
                            "0.2: the sizes come from the fitted adapter and its targets; call "
                            "adapter.fit(ds, targets=...) then adapter.model_config(task=..., "
                            "d_model=...)")
        self.require_fitted("model_config")
        if not self.target_specs:
            raise NotFittedError("model_config takes the outputs from the targets: fit with "
                                 "them, adapter.fit(ds, targets=<node or graph variable>)")
        spec = self.target_specs[0]
        kind = "classification" if spec.kind == "classes" else "regression"
        if task is not None and task not in TASKS:
            raise ValueError(f"task = {task!r}; expected one of {TASKS} (whether a node or a "
                             "graph task follows from the targets' dims)")
        if task is not None and task != kind:
            raise ValueError(f"task = {task!r}, but target {spec.name!r} holds "
                             f"{spec.kind}; expected task={kind!r}")
        out_features = spec.n_classes if spec.kind == "classes" else int(np.prod(
            self.target_layout["shape"], dtype=np.int64))
        return GraphModelConfig(in_features=self._feature_width(), out_features=out_features,
                                task=self._target_level(), max_degree=self.max_degree,
                                laplacian=self.laplacian, random_walk=self.random_walk,
                                pair_bias={"num_codes": self.num_codes}, **options)

    def _feature_width(self):
        if not self.node_features:
            return 1
        stats = self.normalizer.stats
        width = sum(stats[v].size // stats[v].sizes["stat"] for v in self.node_features)
        return 2 * width if self.validity_channel else width

    def _target_level(self):
        return "node" if self.target_layout["dims"][0] == self.node_dim else "graph"

    # ---- reading the Dataset -----------------------------------------------------------

    def sample_dims(self, ds):
        """("graph", "node"), or ("node",) for a Dataset without a graph dim."""
        return (self.graph_dim, self.node_dim) if self.graph_dim in ds.dims else (self.node_dim,)

    def check(self, ds):
        """Refuse a Dataset this adapter cannot read, saying why (ds is not changed)."""
        require_dims(ds, [self.node_dim, self.edge_dim], "graph")
        edge_vars = [v for v in (self.edge_weight, self.edge_type) if v]
        require_variables(ds, self.node_features, "node feature")
        require_variables(ds, edge_vars, "edge variable")
        for name in self.node_features:
            if ds[name].dims[:1] != (self.node_dim,):
                raise ValueError(f"node feature {name!r} has dims {ds[name].dims}; expected "
                                 f"({self.node_dim!r}, ...)")
        for name in edge_vars:
            if ds[name].dims != (self.edge_dim,):
                raise ValueError(f"edge variable {name!r} has dims {ds[name].dims}; expected "
                                 f"({self.edge_dim!r},)")
        graph_of_node, _ = self.layout.graph_of_node(ds)
        self.layout.edges(ds, graph_of_node)  # an edge listed twice before its weights
        if self.edge_weight is not None:
            weight = np.asarray(ds[self.edge_weight].values)
            if weight.dtype.kind not in "biuf":
                raise TypeError(f"edge variable {self.edge_weight!r} has dtype {weight.dtype}; "
                                "expected numbers (edge weights)")
            bad = ~np.isfinite(weight) | (weight < 0)
            if bad.any():
                e = int(np.flatnonzero(bad)[0])
                raise ValueError(f"edge variable {self.edge_weight!r} holds {weight[e]} at edge "
                                 f"{e}; expected finite weights >= 0, no negative or NaN ones "
                                 "(connection strengths; a missing edge is no edge)")

    def _chosen_nodes(self, ds, where, name):
        """(the nodes `where` selects (n,) bool, each node's graph (n,))."""
        graph_of_node, count = self.layout.graph_of_node(ds)
        chosen = np.ones(len(graph_of_node), bool)
        for dim, index in sample_selection(ds, where, self.sample_dims(ds), name).items():
            if (index < 0).any():
                raise KeyError(f"{name}[{dim!r}] names labels that {dim!r} does not have")
            keep = np.zeros(count if dim == self.graph_dim else len(graph_of_node), bool)
            keep[index] = True
            chosen &= keep[graph_of_node] if dim == self.graph_dim else keep
        if not chosen.any():
            raise ValueError(f"{name} selects no node (and so no graph)")
        return chosen, graph_of_node

    def select(self, ds, where, name="where"):
        """``ds`` cut to what ``where`` selects: the selected graphs, or the subgraph the
        selected nodes induce (nodes, the edges between them, their graphs), node and graph
        positions renumbered; ``ds`` itself when ``where`` is None."""
        if where is None:
            return ds
        self.check(ds)
        chosen, graph_of_node = self._chosen_nodes(ds, where, name)
        return self.layout.subgraph(ds, chosen, np.unique(graph_of_node[chosen]))

    def _context(self, ds, where, name="where"):
        """(``ds`` cut to the whole graphs that hold a selected node, the selected nodes among
        its nodes (bool))."""
        self.check(ds)
        if where is None:
            return ds, np.ones(ds.sizes[self.node_dim], bool)
        chosen, graph_of_node = self._chosen_nodes(ds, where, name)
        graphs_kept = np.unique(graph_of_node[chosen])
        whole = np.isin(graph_of_node, graphs_kept)
        return self.layout.subgraph(ds, whole, graphs_kept), chosen[whole]

    def _target_names(self, targets):
        if targets is None:
            return []
        names = [targets] if isinstance(targets, str) else list(targets)
        if len(names) != 1 or not isinstance(names[0], str):
            raise ValueError(f"targets = {targets!r}; expected the name of one node or graph "
                             "variable")
        return names

    def _fit(self, ds, targets):
        """Node-feature and target statistics, the targets' kind and the weight bins, all
        from ``ds`` (the selection)."""
        self.check(ds)
        self._raw_features(ds)  # refuses NaN (without validity_channel) and inf
        names = self._target_names(targets)
        specs, layout = [], None
        for name in names:
            require_variables(ds, [name], "target")
            da = ds[name]
            if da.dims[0] not in (self.node_dim, self.graph_dim):
                raise ValueError(f"target {name!r} has dims {da.dims}; expected a node variable "
                                 f"({self.node_dim!r}, ...) or a graph variable "
                                 f"({self.graph_dim!r}, ...)")
            spec = describe_targets(da, name)
            if spec.kind == "classes" and da.ndim != 1:
                raise ValueError(f"target {name!r} holds classes on dims {da.dims}; expected one "
                                 f"class per node or graph, ({da.dims[0]!r},)")
            if spec.kind == "values" and np.isinf(da.values).any():
                raise ValueError(f"target {name!r} holds infinite values; expected finite ones "
                                 "(NaN where missing)")
            specs.append(spec)
            layout = {"dims": list(da.dims), "shape": list(da.shape[1:])}
        scaled = self.node_features + [s.name for s in specs if s.kind == "values"]
        per_dims = tuple(sorted({d for v in scaled for d in ds[v].dims[1:]}))
        normalizer = Normalizer.fit(ds, scaled, per_dims=per_dims) if scaled else None
        thresholds = np.zeros(0)
        if self.edge_weight_bins is not None:
            thresholds = graphs.fit_weight_thresholds(ds[self.edge_weight].values,
                                                      self.edge_weight_bins)
        self.normalizer, self.target_specs, self.target_layout = normalizer, tuple(specs), layout
        self.weight_thresholds, self.fitted = thresholds, True

    def _raw_features(self, ds):
        """(n, F) float64 node features as given, checked: inf refused, NaN only with
        validity_channel."""
        n = ds.sizes[self.node_dim]
        if not self.node_features:
            return np.ones((n, 1))
        values = np.concatenate([np.asarray(ds[v].values, np.float64).reshape(n, -1)
                                 for v in self.node_features], axis=1)
        if np.isinf(values).any():
            node = int(np.flatnonzero(np.isinf(values).any(1))[0])
            raise ValueError(f"node {node} has infinite features; expected finite values (NaN "
                             "where missing, with validity_channel=True)")
        if np.isnan(values).any() and not self.validity_channel:
            node = int(np.flatnonzero(np.isnan(values).any(1))[0])
            raise ValueError(f"node {node} has NaN features; seqattn does not guess values: "
                             "pass validity_channel=True (a 0/1 presence column per feature) "
                             "or fill them")
        return values

    def _node_features(self, ds):
        """(features (n, F) float32 normalized, valid (n, Fv)) over all nodes."""
        raw = self._raw_features(ds)
        valid = ~np.isnan(raw)
        if not self.node_features:
            return raw.astype(np.float32), valid
        source = self.normalizer.apply(ds[self.node_features])
        n = ds.sizes[self.node_dim]
        values = np.concatenate([np.asarray(source[v].values, np.float64).reshape(n, -1)
                                 for v in self.node_features], axis=1)
        values = np.where(valid, values, 0.0)
        if self.validity_channel:
            values = np.concatenate([values, valid], axis=1)
        return values.astype(np.float32), valid

    # ---- encoding ----------------------------------------------------------------------

    def _edge_data(self, ds, graph_of_node):
        source, target = self.layout.edges(ds, graph_of_node)
        weight = (np.ones(len(source)) if self.edge_weight is None
                  else np.asarray(ds[self.edge_weight].values, np.float64))
        types = None
        if self.edge_type is not None:
            types = np.asarray(ds[self.edge_type].values)
            if not np.issubdtype(types.dtype, np.integer):
                raise TypeError(f"edge variable {self.edge_type!r} has dtype {types.dtype}; "
                                "expected integer types")
            if types.size and (types.min() < 0 or types.max() >= self.num_edge_types):
                raise ValueError(f"edge variable {self.edge_type!r} holds types outside 0 .. "
                                 f"{self.num_edge_types - 1} (num_edge_types="
                                 f"{self.num_edge_types})")
            if self.edge_weight_bins is not None:  # a code per (type, weight bin)
                types = types * self.weight_bin_count + graphs.weight_bins(
                    weight, self.weight_thresholds)
        return source, target, weight, types

    def _distance_codes(self, adjacency):
        """Codes of one direction, [i, j] read along ``adjacency``'s edge i -> j."""
        if self.attention == "edges":
            codes = graphs.shortest_path_codes(adjacency, 1, hide_farther=True)
        else:
            codes = graphs.shortest_path_codes(adjacency, self.max_distance)
        if self._splits_one_hop():
            codes = graphs.split_one_hop(codes, adjacency, self.weight_thresholds)
        return codes

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

    def _samples(self, ds, selected, target_rows, per_node):
        """One :class:`GraphSample` per graph of ``ds`` (checked), in graph order."""
        graph_of_node, count = self.layout.graph_of_node(ds)
        source, target, weight, types = self._edge_data(ds, graph_of_node)
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
            adjacency = graphs.as_adjacency(sp.csr_array(
                (weight[edges], (s, t)), shape=(len(nodes), len(nodes))),
                f"the weights {self.edge_weight!r} of graph {g}")
            typed = None if types is None else graphs.type_matrix(s, t, types[edges], len(nodes))
            key = StructureCache.key(len(nodes), s, t, weight[edges],
                                     None if types is None else types[edges],
                                     self.weight_thresholds)
            codes, encodings = self._structures.get(
                key, lambda: (self._pair_codes(adjacency, typed), self._encodings(adjacency)))
            coords = {"position": np.arange(len(nodes), dtype=np.float64),
                      "node": nodes.astype(np.float64), **encodings}
            targets = None
            if target_rows is not None:
                targets = target_rows[nodes] if per_node else target_rows[g]
            out.append(GraphSample(features[nodes], valid[nodes], coords, codes, nodes, g,
                                   selected[nodes], targets, per_node))
        return out

    def _target_rows(self, ds, selected):
        """(targets per node or graph of ``ds`` (class indices, or normalized values (rows, F)
        with NaN where missing), whether per node); (None, False) without targets."""
        spec = self.target_specs[0]
        require_variables(ds, [spec.name], "target")
        da = ds[spec.name]
        per_node = da.dims[0] == self.node_dim
        if spec.kind == "classes":
            rows = class_indices(spec, da.values)
            missing = MISSING_CLASS
        else:
            if self.target_layout["dims"] != list(da.dims):
                raise ValueError(f"target {spec.name!r} has dims {da.dims}; fit saw "
                                 f"{tuple(self.target_layout['dims'])}")
            scaled = self.normalizer.apply(ds[[spec.name]])[spec.name]
            rows = np.asarray(scaled.values, np.float32).reshape(len(da), -1)
            missing = np.nan
        if per_node:
            rows = rows.copy()
            rows[~selected] = missing  # targets of the selected nodes only
        return rows, per_node

    def batches(self, ds, *, targets=None, where=None, batch_size=32, shuffle=False, seed=0,
                drop_last=False, **removed):
        """Batches of the graphs `where` selects (a :class:`GraphBatches`).

        Parameters
        ----------
        ds : xarray.Dataset
            Graphs in the layout of :mod:`seqattn.readers.graphs`.
        targets : str, optional
            The target variable; default: the one given to ``fit`` when ``ds`` holds it
            (batches without targets otherwise). It must be the one ``fit`` saw.
        where : optional
            Graphs or nodes (module docstring); targets of unselected nodes are missing.
        batch_size, shuffle, seed, drop_last
            As in :class:`seqattn.data.protocol.Batches` (``epoch(e)`` replays epoch e).

        Returns
        -------
        GraphBatches
            Batches with ``tokens`` (B, N, F), ``structure.pair_codes`` (B, N, N), ``coords``
            and ``targets`` (B, N) / (B, N, F) per node or (B,) / (B, F) per graph.
        """
        _refuse_removed("GraphAdapter.batches", removed)
        return self._batches(ds, targets, where, batch_size, shuffle, seed, drop_last)

    def _batches(self, ds, targets, where, batch_size, shuffle=False, seed=0, drop_last=False,
                 use_targets=True):
        self.require_fitted("batches")
        check_batch_size(batch_size)
        fitted_names = [s.name for s in self.target_specs]
        names = self._target_names(targets)
        if names and names != fitted_names:
            raise ValueError(f"targets = {targets!r}, but fit saw {fitted_names or 'none'}; fit "
                             "the adapter with the targets it is to batch")
        if not names and use_targets:
            names = [name for name in fitted_names if name in ds]
        ds, selected = self._context(ds, where)
        rows, per_node = self._target_rows(ds, selected) if names else (None, False)
        samples = self._samples(ds, selected, rows, per_node)
        return GraphBatches(samples, Template.of(ds.drop_vars(list(ds.data_vars))),
                            batch_size, shuffle, seed, drop_last, self.neighbour_codes)

    # ---- decoding ----------------------------------------------------------------------

    def _rows(self, batch, values):
        """(level, positions along the level's dim, rows (k, F)) of model outputs ``values``
        in ``batch``'s layout."""
        values = np.asarray(values)
        B, N = batch.key_padding_mask.shape
        if values.ndim == 3 and values.shape[:2] == (B, N):
            placed = batch.placement.selected & ~batch.key_padding_mask
            return "node", batch.placement.nodes[placed], values[placed]
        if values.ndim == 2 and values.shape[0] == B:
            return "graph", batch.placement.graphs, values
        raise ValueError(f"values have shape {values.shape} for {B} graphs of up to {N} nodes; "
                         "expected (B, N, F_out) per node or (B, F_out) per graph")

    def decode(self, batch, values):
        """``values`` (model outputs in ``batch``'s layout: (B, N, F) per node or (B, F) per
        graph) as a Dataset on the node dim (the selected nodes) or the graph dim, named after
        the target (values in physical units; classes as labels and probabilities), or as
        ``prediction`` (dim, ``output``) when ``fit`` saw no targets."""
        self.require_fitted("decode")
        level, positions, rows = self._rows(batch, values)
        return self._dataset(level, positions, rows, batch.placement.template)

    def _dataset(self, level, positions, rows, template):
        dim = self.node_dim if level == "node" else self.graph_dim
        order = np.argsort(positions, kind="stable")
        positions, rows = positions[order], rows[order]
        coords = {}
        if dim in template.dim_sizes:
            coords = {name: c.isel({dim: positions}) for name, c in template.coords.coords.items()
                      if c.dims == (dim,)}
        if not self.target_specs:
            return xr.Dataset({"prediction": ((dim, "output"), rows)}, coords=coords)
        spec = self.target_specs[0]
        if level != self._target_level():
            raise ValueError(f"the model returned values per {level}, but target {spec.name!r} "
                             f"is per {self._target_level()}")
        if spec.kind == "classes":
            return xr.Dataset(class_predictions(spec, rows, (dim,), coords))
        shape, dims = self.target_layout["shape"], self.target_layout["dims"]
        if rows.shape[1] != int(np.prod(shape, dtype=np.int64)):
            raise ValueError(f"the model returned {rows.shape[1]} values per {level} for target "
                             f"{spec.name!r} of shape {tuple(shape)} per {level}")
        scaled = xr.Dataset({spec.name: ((dim, *dims[1:]), rows.reshape(len(rows), *shape))},
                            coords=coords)
        out = self.normalizer.invert(scaled)
        out[spec.name].attrs = dict(spec.attrs or {})
        return out

    def predict(self, model, ds, *, where=None, batch_size=64, **removed):
        """The predictions of ``model`` for the graphs (or nodes) `where` selects, as
        :meth:`decode` gives them, on ``ds``'s coordinates. seqattn models run in evaluation
        mode."""
        _refuse_removed("GraphAdapter.predict", removed)
        self.require_fitted("predict")
        run = ModelCall(model)
        batches = self._batches(ds, None, where, batch_size, use_targets=False)
        level, positions, rows = None, [], []
        for batch in batches:
            level, placed, values = self._rows(batch, run(batch))
            positions.append(placed)
            rows.append(values)
        return self._dataset(level, np.concatenate(positions), np.concatenate(rows),
                             batches.template)


def _require_int(name, value, smallest):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < smallest:
        raise ValueError(f"{name} = {value!r}; expected an integer >= {smallest}")
