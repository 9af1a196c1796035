"""GraphAdapter over random graphs (hypothesis): sizes 0 and 1, isolated nodes, self loops,
random weights and selections. Either encode -> decode gives the selected graphs' targets back
exactly and the pair codes are those of a networkx reference, or the error names the reason."""
import networkx as nx
import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from seqattn.adapters import GraphAdapter
from seqattn.readers import graph_dataset

MAX_DISTANCE = 2


def random_graphs(sizes, density, seed):
    """Directed graphs of the given sizes, each edge present with odds `density`, integer
    weights 1 .. 5 (self loops included)."""
    rng = np.random.default_rng(seed)
    return [sp.csr_array(np.where(rng.random((n, n)) < density,
                                  rng.integers(1, 6, (n, n)), 0).astype(np.float64))
            for n in sizes]


def reference_codes(matrix, thresholds):
    """Undirected pair codes from networkx hop distances: 0 self, 1 + weight bin for an edge
    (the larger weight of its two directions), then 2 .. D hops, farther, unreachable, each
    moved up by the number of thresholds."""
    dense = matrix.toarray()
    weights = np.maximum(dense, dense.T)
    n, extra = len(dense), len(thresholds)
    g = nx.Graph()
    g.add_nodes_from(range(n))
    g.add_edges_from(zip(*np.nonzero(weights)))
    lengths = dict(nx.all_pairs_shortest_path_length(g))
    codes = np.full((n, n), MAX_DISTANCE + 2 + extra)
    for i in range(n):
        for j, d in lengths[i].items():
            if d == 0:
                codes[i, j] = 0
            elif d == 1:
                codes[i, j] = 1 + np.searchsorted(thresholds, weights[i, j], side="left")
            else:
                codes[i, j] = d + extra if d <= MAX_DISTANCE else MAX_DISTANCE + 1 + extra
    return codes


@settings(max_examples=30, deadline=None)
@given(sizes=st.lists(st.integers(0, 6), min_size=1, max_size=5),
       density=st.floats(0.0, 1.0), seed=st.integers(0, 1000),
       bins=st.sampled_from([None, 1, 3]), data=st.data())
def test_random_graphs_round_trip_with_reference_codes(sizes, density, seed, bins, data):
    matrices = random_graphs(sizes, density, seed)
    rng = np.random.default_rng(seed + 1)
    n_nodes = sum(sizes)
    ds = graph_dataset(matrices, nodes={"x": rng.normal(size=n_nodes),
                                        "y": rng.normal(size=n_nodes)})
    before = ds.copy(deep=True)
    chosen = sorted(data.draw(st.sets(st.integers(0, len(sizes) - 1), min_size=1)))
    adapter = GraphAdapter(["x"], max_distance=MAX_DISTANCE, edge_weight="weight",
                           edge_weight_bins=bins)
    if 0 in [sizes[g] for g in chosen] or n_nodes == 0:
        with pytest.raises(ValueError, match="no nodes"):
            adapter.fit(ds, targets="y", where={"graph": chosen})
        return
    if 0 in sizes:  # a graph the selection leaves out is still an empty graph of ds
        with pytest.raises(ValueError, match=r"graph \d+ has no nodes"):
            adapter.fit(ds, targets="y", where={"graph": chosen})
        return
    adapter.fit(ds, targets="y", where={"graph": chosen})
    batch = adapter.encode(ds, where={"graph": chosen})
    decoded = adapter.decode(batch, batch.targets)
    nodes = np.concatenate([np.arange(sum(sizes[:g]), sum(sizes[:g + 1])) for g in chosen])
    np.testing.assert_allclose(decoded["y"], ds["y"].values[nodes], rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(decoded["node"], nodes)
    for b, g in enumerate(chosen):
        n = sizes[g]
        np.testing.assert_array_equal(batch.structure.pair_codes[b, :n, :n],
                                      reference_codes(matrices[g], adapter.weight_thresholds))
    assert adapter.num_codes > batch.structure.pair_codes.max()
    assert ds.identical(before)
