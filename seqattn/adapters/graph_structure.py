"""Reading a graph Dataset's structure (which graph each node belongs to, the edges) with the
checks that say what is wrong, and cutting a Dataset to some of its graphs or nodes with the
node and edge dims kept consistent (``ds.isel(graph=...)`` alone leaves every node and edge).

The Dataset layout is :mod:`seqattn.readers.graphs`'s: nodes along ``node_dim`` (``graph_index``
says which graph), edges along ``edge_dim`` (``source`` -> ``target`` node positions), graph
variables along ``graph_dim``. Names are those of the adapter (:class:`GraphLayout`).
"""
from dataclasses import dataclass

import numpy as np

from ..data.checks import require_dims, require_variables


@dataclass(frozen=True)
class GraphLayout:
    """The names of a graph Dataset's dims and structure variables."""

    node_dim: str = "node"
    edge_dim: str = "edge"
    graph_dim: str = "graph"
    graph_index: str = "graph_index"
    source: str = "source"
    target: str = "target"

    def graph_of_node(self, ds):
        """(graph position of every node (n,) int64, the number of graphs)."""
        require_dims(ds, [self.node_dim, self.edge_dim], "graph")
        n = ds.sizes[self.node_dim]
        if n == 0:
            raise ValueError(f"the Dataset has no nodes (its {self.node_dim!r} dim is empty); a "
                             "graph needs at least one node to be a sample")
        if self.graph_index not in ds:
            count = ds.sizes.get(self.graph_dim, 1)
            if count != 1:
                raise ValueError(f"the Dataset has {count} graphs along {self.graph_dim!r} but "
                                 f"no {self.graph_index!r} saying which graph each node is in")
            return np.zeros(n, np.int64), 1
        graph_of_node = np.asarray(ds[self.graph_index].values)
        if ds[self.graph_index].dims != (self.node_dim,):
            raise ValueError(f"{self.graph_index!r} has dims {ds[self.graph_index].dims}; "
                             f"expected ({self.node_dim!r},), one graph position per node")
        if not np.issubdtype(graph_of_node.dtype, np.integer):
            raise TypeError(f"{self.graph_index!r} has dtype {graph_of_node.dtype}; expected "
                            "integers (each node's graph)")
        count = ds.sizes.get(self.graph_dim, int(graph_of_node.max()) + 1)
        if graph_of_node.min() < 0 or graph_of_node.max() >= count:
            raise ValueError(f"{self.graph_index!r} holds values outside 0 .. {count - 1} (the "
                             f"graphs along {self.graph_dim!r})")
        sizes = np.bincount(graph_of_node, minlength=count)
        if (sizes == 0).any():
            raise ValueError(f"graph {int(np.flatnonzero(sizes == 0)[0])} has no nodes; a graph "
                             "needs at least one node to be a sample (drop it from the graph dim)")
        return graph_of_node.astype(np.int64), count

    def edges(self, ds, graph_of_node):
        """(source, target) (E,) int64 node positions, checked: in range, within one graph, and
        each (source, target) pair listed once."""
        require_variables(ds, [self.source, self.target], "edge variable")
        n = len(graph_of_node)
        ends = []
        for name in (self.source, self.target):
            if ds[name].dims != (self.edge_dim,):
                raise ValueError(f"edge variable {name!r} has dims {ds[name].dims}; expected "
                                 f"({self.edge_dim!r},)")
            values = np.asarray(ds[name].values)
            if not np.issubdtype(values.dtype, np.integer):
                raise TypeError(f"edge variable {name!r} has dtype {values.dtype}; expected "
                                "node positions (integers)")
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
        _refuse_repeats(source, target)
        return source, target

    def subgraph(self, ds, keep_nodes, keep_graphs):
        """``ds`` cut to the nodes where ``keep_nodes`` (n,) is True, the edges between two
        kept nodes and the graphs ``keep_graphs`` (sorted positions): node positions in
        ``source``/``target`` and graph positions in ``graph_index`` renumbered. A new
        Dataset; ``ds`` is not modified."""
        graph_of_node, count = self.graph_of_node(ds)
        source, target = self.edges(ds, graph_of_node)
        nodes = np.flatnonzero(keep_nodes)
        edges = np.flatnonzero(keep_nodes[source] & keep_nodes[target])
        cut = {self.node_dim: nodes, self.edge_dim: edges}
        if self.graph_dim in ds.dims:
            cut[self.graph_dim] = keep_graphs
        out = ds.isel(cut)
        new_node = np.full(len(keep_nodes), -1, np.int64)
        new_node[nodes] = np.arange(len(nodes))
        for name, ends in ((self.source, source), (self.target, target)):
            out[name] = ds[name].isel({self.edge_dim: edges}).copy(data=new_node[ends[edges]])
        if self.graph_index in ds:
            new_graph = np.full(count, -1, np.int64)
            new_graph[keep_graphs] = np.arange(len(keep_graphs))
            out[self.graph_index] = ds[self.graph_index].isel({self.node_dim: nodes}).copy(
                data=new_graph[graph_of_node[nodes]])
        return out


def _refuse_repeats(source, target):
    """An edge listed twice is an error naming both rows: summing their weights (+2 and -2
    make 0) would change the graph without a word."""
    if len(source) < 2:
        return
    order = np.lexsort((target, source))
    s, t = source[order], target[order]
    repeated = np.flatnonzero((s[1:] == s[:-1]) & (t[1:] == t[:-1]))
    if repeated.size:
        first, second = sorted((int(order[repeated[0]]), int(order[repeated[0] + 1])))
        raise ValueError(f"edges {first} and {second} both join node {source[first]} -> node "
                         f"{target[first]}; list each (source, target) pair once (combine "
                         "repeated edges' weights yourself, as their meaning requires)")
