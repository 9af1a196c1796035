"""Graphs as xarray Datasets, the form :class:`seqattn.adapters.GraphAdapter` reads: the graph
readers (scipy.sparse or dense adjacency matrices, networkx graphs).

One Dataset holds one graph or many (a batch of molecules, of small networks):

* dim ``node``: every node of every graph, graph after graph; node variables (features,
  targets, train/validation/test masks) on ``(node,)`` or ``(node, feature)``; ``graph_index``
  (node,) int says which graph (position along ``graph``) a node belongs to;
* dim ``edge``: ``source`` and ``target`` (edge,) int, positions along ``node`` of the edge
  ``source -> target``; edge variables (``weight``, ``edge_type``, ...) on ``(edge,)``. An
  undirected graph lists each edge in both directions; a (source, target) pair is listed once
  (the adapter refuses repeats rather than summing their weights);
* dim ``graph``: graph-level variables (targets).

:func:`graph_dataset` builds one from scipy.sparse (or dense) adjacency matrices,
:func:`from_networkx` from networkx graphs (an optional dependency, imported only there).
"""
import numpy as np
import xarray as xr

from ..graphs.adjacency import as_adjacency


def _as_list(graphs):
    return list(graphs) if isinstance(graphs, (list, tuple)) else [graphs]


def _dataset(sizes, source, target, edge_data, nodes, graphs, node_names=None):
    nodes, graphs, edge_data = dict(nodes or {}), dict(graphs or {}), dict(edge_data or {})
    graph_index = np.repeat(np.arange(len(sizes)), sizes)
    variables = {"graph_index": ("node", graph_index), "source": ("edge", source),
                 "target": ("edge", target)}
    for name, values in edge_data.items():
        variables[name] = ("edge", np.asarray(values))
    for name, values in nodes.items():
        values = np.asarray(values)
        if len(values) != len(graph_index):
            raise ValueError(f"node variable {name!r} has {len(values)} rows but the graphs have "
                             f"{len(graph_index)} nodes in all")
        variables[name] = (("node",) + (f"{name}_feature",) * (values.ndim - 1), values)
    for name, values in graphs.items():
        values = np.asarray(values)
        if len(values) != len(sizes):
            raise ValueError(f"graph variable {name!r} has {len(values)} rows for "
                             f"{len(sizes)} graphs")
        variables[name] = (("graph",) + (f"{name}_feature",) * (values.ndim - 1), values)
    coords = {"node": np.arange(len(graph_index)), "graph": np.arange(len(sizes))}
    if node_names is not None:
        coords["node_name"] = ("node", np.asarray(node_names, dtype=object))
    return xr.Dataset(variables, coords=coords)


def graph_dataset(adjacency, nodes=None, graphs=None):
    """The Dataset of one graph or a list of graphs given as adjacency matrices (N_g, N_g)
    (scipy.sparse or dense; entry (i, j) the weight of edge i -> j, stored in ``weight``).

    Parameters
    ----------
    adjacency : scipy.sparse matrix or array_like, shape (N_g, N_g), or a list or tuple of them
        One graph, or G graphs; entry (i, j) nonzero for an edge i -> j of that weight.
    nodes : dict of str to array_like, default None
        Node variables, name -> array of shape (N,) or (N, F) over all N nodes, graph after
        graph (features, targets, masks).
    graphs : dict of str to array_like, default None
        Graph-level variables, name -> array of shape (G,) or (G, F).

    Returns
    -------
    xarray.Dataset
        Dims ``node``, ``edge`` and ``graph`` (see the module docstring).
    """
    matrices = [as_adjacency(a, f"adjacency[{g}]") for g, a in enumerate(_as_list(adjacency))]
    sizes = [m.shape[0] for m in matrices]
    offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
    source, target, weight = [], [], []
    for offset, matrix in zip(offsets, matrices):
        coo = matrix.tocoo()
        source.append(coo.row.astype(np.int64) + offset)
        target.append(coo.col.astype(np.int64) + offset)
        weight.append(coo.data)
    return _dataset(sizes, np.concatenate(source), np.concatenate(target),
                    {"weight": np.concatenate(weight)}, nodes, graphs)


def from_networkx(graphs, node_features=(), edge_features=(), graph_data=None):
    """The Dataset of one networkx graph or a list of them. Nodes are numbered in each graph's
    node order (their labels kept in the ``node_name`` coordinate); ``node_features`` and
    ``edge_features`` name node and edge attributes to copy (every node or edge must have
    them; an edge attribute named ``weight`` is missing-as-1, as networkx reads it); an
    undirected graph's edges appear in both directions.

    Parameters
    ----------
    graphs : networkx.Graph, or a list or tuple of them
        One graph or G graphs, directed or not.
    node_features : sequence of str, default ()
        Node attributes to copy into node variables of those names.
    edge_features : sequence of str, default ()
        Edge attributes to copy into edge variables of those names.
    graph_data : dict of str to array_like, default None
        Graph-level variables, name -> array of shape (G,) or (G, F).

    Returns
    -------
    xarray.Dataset
        Dims ``node``, ``edge`` and ``graph`` (see the module docstring), with the nodes'
        labels in the ``node_name`` coordinate.
    """
    graphs = _as_list(graphs)
    sizes, names, source, target = [], [], [], []
    node_values = {name: [] for name in node_features}
    edge_values = {name: [] for name in edge_features}
    offset = 0
    for g, graph in enumerate(graphs):
        order = {node: i for i, node in enumerate(graph.nodes)}
        for name in node_features:
            missing = [n for n, data in graph.nodes(data=True) if name not in data]
            if missing:
                raise ValueError(f"graph {g}: node {missing[0]!r} has no attribute {name!r}")
            node_values[name].extend(graph.nodes[n][name] for n in graph.nodes)
        directions = [(0, 1)] if graph.is_directed() else [(0, 1), (1, 0)]
        for u, v, data in graph.edges(data=True):
            for a, b in directions:
                if graph.is_directed() or u != v or (a, b) == (0, 1):  # a self loop once
                    ends = (u, v)
                    source.append(order[ends[a]] + offset)
                    target.append(order[ends[b]] + offset)
                    for name in edge_features:
                        if name not in data and name != "weight":
                            raise ValueError(f"graph {g}: edge {(u, v)!r} has no attribute "
                                             f"{name!r}")
                        edge_values[name].append(data.get(name, 1.0))
        sizes.append(graph.number_of_nodes())
        names.extend(graph.nodes)
        offset += graph.number_of_nodes()
    return _dataset(sizes, np.asarray(source, np.int64), np.asarray(target, np.int64),
                    edge_values, node_values, graph_data, node_names=names)
