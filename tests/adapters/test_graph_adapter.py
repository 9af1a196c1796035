"""GraphAdapter batches (padding, pair codes per attention mode and direction, node encodings,
targets under masks), GraphModel's node encodings (Laplacian sign flips in training only), the
Dataset builders, storage, and the errors bad graphs get."""
import networkx as nx
import numpy as np
import pytest
import scipy.sparse as sp
import xarray as xr

import seqattn
from graph_helpers import SIZES, karate_dataset, ring, rings_dataset
from seqattn import graphs
from seqattn.adapters import GraphAdapter
from seqattn.graphs.datasets import from_networkx, graph_dataset
from seqattn.models import GraphModel


def directed_path_dataset(n=4):
    """0 -> 1 -> ... -> n - 1."""
    return xr.Dataset({"source": ("edge", np.arange(n - 1)),
                       "target": ("edge", np.arange(1, n)), "x": ("node", np.arange(n) * 1.0)})


def test_a_batch_of_graphs_of_different_sizes_is_padded_everywhere():
    ds = rings_dataset(sizes=(4, 6, 5), held_out=0)
    adapter = GraphAdapter(["x"], max_distance=2, max_degree=3, laplacian=2).fit(ds)
    (batch,) = adapter.encode(ds)
    assert batch.tokens.shape == (3, 6, 1)
    np.testing.assert_array_equal(batch.key_padding_mask.sum(1), [2, 0, 1])
    codes = batch.structure.pair_codes
    assert codes.dtype == np.int8 and codes.shape == (3, 6, 6)
    for b, (n, closed) in enumerate([(4, False), (6, True), (5, False)]):
        np.testing.assert_array_equal(codes[b, :n, :n], graphs.shortest_path_codes(
            ring(n, closed), 2))
        assert (codes[b, n:] == graphs.HIDDEN).all() and (codes[b, :, n:] == graphs.HIDDEN).all()
        np.testing.assert_array_equal(batch.coords["position"][b, :n], np.arange(n))
        assert np.isnan(batch.coords["laplacian_1"][b, n:]).all()
    np.testing.assert_array_equal(batch.coords["in_degree"][0, :4], [1, 2, 2, 1])
    np.testing.assert_array_equal(batch.placement.nodes[2, :5], np.arange(10, 15))
    assert adapter.num_codes == graphs.num_distance_codes(2)


def test_directed_codes_count_the_path_from_key_to_query():
    ds = directed_path_dataset()
    far, none = graphs.farther_code(2), graphs.unreachable_code(2)
    (batch,) = GraphAdapter(directed=True, max_distance=2).encode(ds)
    np.testing.assert_array_equal(batch.structure.pair_codes[0], [[0, none, none, none],
                                                                  [1, 0, none, none],
                                                                  [2, 1, 0, none],
                                                                  [far, 2, 1, 0]])
    (edges,) = GraphAdapter(directed="both", attention="edges").encode(ds)
    # per direction: 0 self, 1 edge, 2 none; code = (key -> query) * 3 + (query -> key)
    # an edge key -> query: 1 * 3 + 2 = 5; an edge query -> key: 2 * 3 + 1 = 7
    np.testing.assert_array_equal(edges.structure.pair_codes[0], [[0, 7, -1, -1],
                                                                  [5, 0, 7, -1],
                                                                  [-1, 5, 0, 7],
                                                                  [-1, -1, 5, 0]])


def test_edges_attention_hides_everything_beyond_the_neighbours():
    """With one layer a node's prediction depends on itself and its neighbours only."""
    ds = karate_dataset()
    ds["x"] = ("node", np.random.default_rng(0).normal(size=ds.sizes["node"]))
    adapter = GraphAdapter(["x"], attention="edges").fit(ds)
    model = GraphModel(adapter.model_config(ds, 1, **SIZES))
    node = 0
    neighbours = set(ds["target"].values[ds["source"].values == node]) | {node}
    far = next(i for i in range(ds.sizes["node"]) if i not in neighbours)
    moved = ds.copy(deep=True)
    moved["x"][far] += 5.0
    before = adapter.predict(model, ds)["prediction"].values
    after = adapter.predict(model, moved)["prediction"].values
    assert before[node] == after[node] and before[far] != after[far]
    global_adapter = GraphAdapter(["x"]).fit(ds)
    global_model = GraphModel(global_adapter.model_config(ds, 1, **SIZES))
    assert (global_adapter.predict(global_model, ds)["prediction"].values[node]
            != global_adapter.predict(global_model, moved)["prediction"].values[node])


def test_networkx_and_scipy_give_the_same_batches():
    g = nx.karate_club_graph()
    from_graph = from_networkx(g)
    from_matrix = graph_dataset(nx.to_scipy_sparse_array(g, nodelist=list(g.nodes)))
    adapter = GraphAdapter(max_degree=5, laplacian=3, random_walk=2)
    (a,), (b,) = adapter.encode(from_graph), adapter.encode(from_matrix)
    np.testing.assert_array_equal(a.structure.pair_codes, b.structure.pair_codes)
    for name in a.coords:
        np.testing.assert_allclose(a.coords[name], b.coords[name], atol=1e-12, err_msg=name)


def test_targets_are_missing_outside_the_mask_and_at_padding():
    ds = rings_dataset(sizes=(4, 6), held_out=1)
    ds["label"] = ("node", np.arange(10) % 3)
    ds["seen"] = ("node", np.arange(10) % 2 == 0)
    adapter = GraphAdapter(["x"]).fit(ds)
    (batch,) = adapter.batches(ds, "label", mask="seen", shuffle=False)
    np.testing.assert_array_equal(batch.targets, [[0, -100, 2, -100, -100, -100],
                                                  [1, -100, 0, -100, 2, -100]])
    (graph_batch,) = adapter.batches(ds, "cycle", mask="train")
    np.testing.assert_array_equal(graph_batch.placement.graphs, [0])
    np.testing.assert_array_equal(graph_batch.targets, [0])


def test_the_laplacian_signs_flip_per_graph_in_training_only():
    ds = rings_dataset(sizes=(5, 6), held_out=0)
    adapter = GraphAdapter(["x"], laplacian=2).fit(ds)
    (batch,) = adapter.encode(ds)
    model = GraphModel(adapter.model_config(ds, 1, **SIZES))
    positions = np.stack([batch.coords["laplacian_1"], batch.coords["laplacian_2"]], -1)
    model.eval()
    np.testing.assert_array_equal(model.encoding_columns(2, batch.coords),
                                  np.nan_to_num(positions).astype(np.float32))
    model.train()
    seen = set()
    for _ in range(8):
        columns = model.encoding_columns(2, batch.coords)
        ratio = columns / np.where(positions == 0, np.nan, positions).astype(np.float32)
        for b in range(2):
            signs = np.unique(ratio[b][~np.isnan(ratio[b])].round(5), axis=None)
            assert len(signs) <= 2 and set(np.abs(signs)) == {1.0}
            for k in range(2):
                column = np.unique(ratio[b, :, k][~np.isnan(ratio[b, :, k])].round(5))
                assert len(column) == 1  # one sign per graph and eigenvector
                seen.add(float(column[0]))
    assert seen == {-1.0, 1.0}


def test_a_model_without_the_encodings_it_reads_says_so():
    ds = rings_dataset(sizes=(4, 5), held_out=0)
    model = GraphModel(GraphAdapter(["x"], random_walk=2).model_config(ds, 1, **SIZES))
    with pytest.raises(ValueError, match="random_walk_1"):
        GraphAdapter(["x"]).predict(model, ds)


def test_the_adapter_is_stored_with_its_normalizer(tmp_path):
    ds = rings_dataset()
    adapter = GraphAdapter(["x"], attention="edges", directed="both", laplacian=2).fit(ds)
    seqattn.save(adapter, tmp_path / "adapter")
    again = seqattn.load(tmp_path / "adapter")
    assert again.config() == adapter.config()
    (a,), (b,) = adapter.encode(ds), again.encode(ds)
    np.testing.assert_array_equal(a.tokens, b.tokens)
    np.testing.assert_array_equal(a.structure.pair_codes, b.structure.pair_codes)


def _with(ds, **variables):
    out = ds.copy()
    for name, value in variables.items():
        out[name] = value
    return out


@pytest.mark.parametrize("change, message", [
    (dict(graph_index=("node", np.zeros(9, int))), "graph 1 has no nodes"),
    (dict(target=("edge", np.r_[np.arange(1, 4), 4, np.arange(5, 9), 0])), "edges must stay"),
    (dict(source=("edge", np.r_[np.arange(8), 9])), "outside 0 .. 8"),
    (dict(x=("node", np.r_[np.nan, np.ones(8)])), "validity_channels=True"),
    (dict(weight=("edge", -np.ones(9))), "negative"),
])
def test_bad_graphs_are_refused_with_the_reason(change, message):
    ds = graph_dataset([sp.csr_array(np.diag(np.ones(3), 1)), sp.csr_array(np.diag(np.ones(4),
                                                                                   1))],
                       nodes={"x": np.arange(9.0)}, graphs={"y": [0, 1]})
    ds = ds.isel(edge=np.r_[np.arange(7), 0, 1])  # nine edges, two repeated
    adapter = GraphAdapter(["x"], edge_weight="weight")
    with pytest.raises(ValueError, match=message):
        adapter.samples(_with(ds, **change))


def test_a_dataset_without_nodes_is_refused():
    empty = graph_dataset(np.zeros((0, 0)))
    with pytest.raises(ValueError, match="no nodes"):
        GraphAdapter().encode(empty)


def test_missing_node_features_become_validity_channels():
    ds = rings_dataset(sizes=(4,), held_out=0)
    ds["x"][1] = np.nan
    (batch,) = GraphAdapter(["x"], validity_channels=True).fit(ds).encode(ds)
    np.testing.assert_array_equal(batch.tokens[0, :, 1], [1, 0, 1, 1])
    assert batch.tokens[0, 1, 0] == 0 and not batch.valid[0, 1, 0]


def test_self_loops_and_isolated_nodes_from_networkx():
    """A self loop is one edge (in both degrees), an isolated node sees only itself with
    "edges" attention and gets zero Laplacian positions and return probabilities."""
    g = nx.Graph([(0, 1), (1, 2), (2, 2)])
    g.add_node(3)
    ds = from_networkx(g)
    assert ds.sizes["edge"] == 5  # 0-1 and 1-2 both ways, the loop once
    (batch,) = GraphAdapter(attention="edges", max_degree=4, laplacian=2,
                            random_walk=2).encode(ds)
    np.testing.assert_array_equal(batch.coords["in_degree"][0], [1, 2, 2, 0])
    np.testing.assert_array_equal(batch.structure.pair_codes[0], [[0, 1, -1, -1],
                                                                  [1, 0, 1, -1],
                                                                  [-1, 1, 0, -1],
                                                                  [-1, -1, -1, 0]])
    for name in ("laplacian_1", "laplacian_2", "random_walk_1", "random_walk_2"):
        assert batch.coords[name][0, 3] == 0.0, name
    assert batch.coords["random_walk_1"][0, 2] == 0.5  # the walk at 2 stays with odds 1/2
