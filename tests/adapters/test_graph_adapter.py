"""GraphAdapter batches (padding, pair codes per attention mode and direction, weight bins,
node encodings, targets of selected nodes or graphs), selections that cut nodes and edges
together, GraphModel's node encodings (Laplacian sign flips in training only), the Dataset
readers, storage, and the errors bad graphs get."""
import networkx as nx
import numpy as np
import pytest
import scipy.sparse as sp
import xarray as xr

import seqattn
from graph_helpers import SIZES, karate_dataset, ring, rings_dataset
from seqattn import graphs
from seqattn.adapters import GraphAdapter
from seqattn.data.protocol import NotFittedError
from seqattn.models import GraphModel, build
from seqattn.readers import from_networkx, graph_dataset


def directed_path_dataset(n=4):
    """0 -> 1 -> ... -> n - 1."""
    return xr.Dataset({"source": ("edge", np.arange(n - 1)),
                       "target": ("edge", np.arange(1, n)), "x": ("node", np.arange(n) * 1.0)})


def test_a_batch_of_graphs_of_different_sizes_is_padded_everywhere():
    ds = rings_dataset(sizes=(4, 6, 5), held_out=0)
    adapter = GraphAdapter(["x"], max_distance=2, max_degree=3, laplacian=2).fit(ds)
    batch = adapter.encode(ds)
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
    batch = GraphAdapter(directed=True, max_distance=2).fit(ds).encode(ds)
    np.testing.assert_array_equal(batch.structure.pair_codes[0], [[0, none, none, none],
                                                                  [1, 0, none, none],
                                                                  [2, 1, 0, none],
                                                                  [far, 2, 1, 0]])
    edges = GraphAdapter(directed="both", attention="edges").fit(ds).encode(ds)
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
    adapter = GraphAdapter(["x"], attention="edges").fit(ds, targets="degree")
    model = build(adapter.model_config(**SIZES))
    node = 0
    neighbours = set(ds["target"].values[ds["source"].values == node]) | {node}
    far = next(i for i in range(ds.sizes["node"]) if i not in neighbours)
    moved = ds.copy(deep=True)
    moved["x"][far] += 5.0
    before = adapter.predict(model, ds)["degree"].values
    after = adapter.predict(model, moved)["degree"].values
    assert before[node] == after[node] and before[far] != after[far]
    global_adapter = GraphAdapter(["x"]).fit(ds, targets="degree")
    global_model = build(global_adapter.model_config(**SIZES))
    assert (global_adapter.predict(global_model, ds)["degree"].values[node]
            != global_adapter.predict(global_model, moved)["degree"].values[node])


def test_networkx_and_scipy_give_the_same_batches():
    g = nx.karate_club_graph()
    from_graph = from_networkx(g)
    from_matrix = graph_dataset(nx.to_scipy_sparse_array(g, nodelist=list(g.nodes)))
    adapter = GraphAdapter(max_degree=5, laplacian=3, random_walk=2).fit(from_graph)
    a, b = adapter.encode(from_graph), adapter.encode(from_matrix)
    np.testing.assert_array_equal(a.structure.pair_codes, b.structure.pair_codes)
    for name in a.coords:
        np.testing.assert_allclose(a.coords[name], b.coords[name], atol=1e-12, err_msg=name)


def test_targets_are_missing_outside_the_selection_and_at_padding():
    ds = rings_dataset(sizes=(4, 6), held_out=1)
    ds["label"] = ("node", np.arange(10) % 3)
    ds["seen"] = ("node", np.arange(10) % 2 == 0)
    adapter = GraphAdapter(["x"]).fit(ds, targets="label", where=ds.seen)
    (batch,) = adapter.batches(ds, where=ds.seen)
    np.testing.assert_array_equal(batch.targets, [[0, -100, 2, -100, -100, -100],
                                                  [1, -100, 0, -100, 2, -100]])
    graph_adapter = GraphAdapter(["x"]).fit(ds, targets="cycle")
    (graph_batch,) = graph_adapter.batches(ds, where=ds.train)
    np.testing.assert_array_equal(graph_batch.targets, [0])
    np.testing.assert_array_equal(graph_batch.tokens[0, :, 0],
                                  graph_adapter.encode(ds).tokens[0, :4, 0])


def test_the_laplacian_signs_flip_per_graph_in_training_only():
    ds = rings_dataset(sizes=(5, 6), held_out=0)
    adapter = GraphAdapter(["x"], laplacian=2).fit(ds, targets="cycle")
    batch = adapter.encode(ds)
    model = GraphModel(adapter.model_config(**SIZES))
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
    model = build(GraphAdapter(["x"], random_walk=2).fit(ds, targets="cycle")
                  .model_config(**SIZES))
    with pytest.raises(ValueError, match="random_walk_1"):
        GraphAdapter(["x"]).fit(ds, targets="cycle").predict(model, ds)


def test_the_adapter_is_stored_with_its_normalizer(tmp_path):
    ds = rings_dataset()
    ds["weight"] = ("edge", np.arange(ds.sizes["edge"]) % 5 + 1.0)
    adapter = GraphAdapter(["x"], attention="edges", directed="both", laplacian=2,
                           edge_weight="weight", edge_weight_bins=3).fit(ds, targets="cycle")
    seqattn.save(adapter, tmp_path / "adapter")
    again = seqattn.load(tmp_path / "adapter")
    assert again.to_dict() == adapter.to_dict() and len(again.weight_thresholds) == 2
    a, b = adapter.encode(ds), again.encode(ds)
    np.testing.assert_array_equal(a.tokens, b.tokens)
    np.testing.assert_array_equal(a.structure.pair_codes, b.structure.pair_codes)


def _with(ds, **variables):
    out = ds.copy()
    for name, value in variables.items():
        out[name] = value
    return out


def _two_paths():
    """Two undirected paths (0 - 1 - 2, 3 - 4 - 5 - 6) with a node feature and edge weights."""
    path = [sp.csr_array(np.diag(np.ones(k), 1) + np.diag(np.ones(k), -1)) for k in (2, 3)]
    return graph_dataset(path, nodes={"x": np.arange(7.0)}, graphs={"y": [0, 1]})


@pytest.mark.parametrize("change, message", [
    (dict(graph_index=("node", np.zeros(7, int))), "graph 1 has no nodes"),
    (dict(target=("edge", np.r_[1, 0, 2, 1, 4, 3, 5, 4, 6, 0])), "edges must stay"),
    (dict(source=("edge", np.r_[0, 1, 1, 2, 3, 4, 4, 5, 5, 7])), "outside 0 .. 6"),
    (dict(x=("node", np.r_[np.nan, np.ones(6)])), "validity_channel=True"),
    (dict(x=("node", np.r_[np.inf, np.ones(6)])), "node 0 has infinite features"),
    (dict(weight=("edge", -np.ones(10))), "negative"),
    (dict(weight=("edge", np.r_[np.nan, np.ones(9)])), "NaN"),
])
def test_bad_graphs_are_refused_with_the_reason(change, message):
    ds = _two_paths()
    adapter = GraphAdapter(["x"], edge_weight="weight")
    fitted = GraphAdapter(["x"], edge_weight="weight").fit(ds)
    with pytest.raises(ValueError, match=message):
        adapter.fit(_with(ds, **change))
    with pytest.raises(ValueError, match=message):
        fitted.encode(_with(ds, **change))


def test_an_edge_listed_twice_is_refused_not_summed_away():
    """Weights +2 and -2 on one (source, target) pair would add to 0 and drop the edge."""
    ds = _two_paths().isel(edge=np.r_[np.arange(10), 2])
    ds["weight"] = ("edge", np.r_[np.ones(10), -1.0] * 2)
    for adapter in (GraphAdapter(["x"]), GraphAdapter(["x"], edge_weight="weight")):
        with pytest.raises(ValueError, match="edges 2 and 10 both join node 1 -> node 2"):
            adapter.fit(ds)


def test_a_dataset_without_nodes_is_refused_for_what_it_is():
    empty = graph_dataset(np.zeros((0, 0)), nodes={"x": np.zeros(0)})
    for adapter in (GraphAdapter(), GraphAdapter(["x"])):
        with pytest.raises(ValueError, match="the Dataset has no nodes"):
            adapter.fit(empty)
    with pytest.raises(NotFittedError, match="fit"):
        GraphAdapter().encode(_two_paths())


def test_missing_node_features_become_validity_channels():
    ds = rings_dataset(sizes=(4,), held_out=0)
    ds["x"][1] = np.nan
    batch = GraphAdapter(["x"], validity_channel=True).fit(ds).encode(ds)
    np.testing.assert_array_equal(batch.tokens[0, :, 1], [1, 0, 1, 1])
    assert batch.tokens[0, 1, 0] == 0 and not batch.valid[0, 1, 0]


def test_self_loops_and_isolated_nodes_from_networkx():
    """A self loop is one edge (in both degrees), an isolated node sees only itself with
    "edges" attention and gets zero Laplacian positions and return probabilities."""
    g = nx.Graph([(0, 1), (1, 2), (2, 2)])
    g.add_node(3)
    ds = from_networkx(g)
    assert ds.sizes["edge"] == 5  # 0-1 and 1-2 both ways, the loop once
    batch = GraphAdapter(attention="edges", max_degree=4, laplacian=2,
                         random_walk=2).fit(ds).encode(ds)
    np.testing.assert_array_equal(batch.coords["in_degree"][0], [1, 2, 2, 0])
    np.testing.assert_array_equal(batch.structure.pair_codes[0], [[0, 1, -1, -1],
                                                                  [1, 0, 1, -1],
                                                                  [-1, 1, 0, -1],
                                                                  [-1, -1, -1, 0]])
    for name in ("laplacian_1", "laplacian_2", "random_walk_1", "random_walk_2"):
        assert batch.coords[name][0, 3] == 0.0, name
    assert batch.coords["random_walk_1"][0, 2] == 0.5  # the walk at 2 stays with odds 1/2


def test_selecting_graphs_or_nodes_cuts_nodes_and_edges_together():
    ds = rings_dataset(sizes=(4, 5, 6), held_out=0)
    before = ds.copy(deep=True)
    adapter = GraphAdapter(["x"], max_distance=2).fit(ds)
    cut = adapter.select(ds, {"graph": [0, 2]})
    assert dict(cut.sizes) == {"node": 10, "edge": 6 + 10, "graph": 2}
    np.testing.assert_array_equal(cut.x, ds.x.values[np.r_[0:4, 9:15]])
    np.testing.assert_array_equal(cut.graph_index, np.repeat([0, 1], [4, 6]))
    whole, part = adapter.encode(ds), adapter.encode(cut)
    np.testing.assert_array_equal(part.structure.pair_codes, whole.structure.pair_codes[[0, 2]])
    np.testing.assert_array_equal(part.tokens, whole.tokens[[0, 2]])
    induced = adapter.select(ds, {"node": [0, 1, 2, 9]})  # the path 0 - 1 - 2 and node 9
    np.testing.assert_array_equal(induced.source, [0, 1, 1, 2])
    np.testing.assert_array_equal(induced.target, [1, 0, 2, 1])
    np.testing.assert_array_equal(induced.graph_index, [0, 0, 0, 1])
    np.testing.assert_array_equal(induced.graph, [0, 2])
    xr.testing.assert_identical(ds, before)


def test_fit_reads_the_training_nodes_only_and_predicts_on_the_chosen_ones():
    ds = karate_dataset()
    ds["x"] = ("node", np.random.default_rng(1).normal(size=34) + 10.0 * ds.train.values)
    adapter = GraphAdapter(["x"]).fit(ds, targets="degree", where=ds.train)
    stats = adapter.normalizer.stats
    train_x, train_degree = ds.x.values[ds.train], ds.degree.values[ds.train]
    np.testing.assert_allclose(stats.x.sel(stat="mean"), train_x.mean())
    np.testing.assert_allclose(stats.x.sel(stat="std"), train_x.std())
    np.testing.assert_allclose(stats.degree.sel(stat="mean"), train_degree.mean())
    batch = adapter.encode(ds, where=~ds.train)
    np.testing.assert_array_equal(batch.target_valid[0, :, 0], ~ds.train.values)
    decoded = adapter.decode(batch, batch.targets)
    np.testing.assert_array_equal(decoded.node, ds.node.values[~ds.train.values])
    np.testing.assert_allclose(decoded.degree, ds.degree.values[~ds.train.values], rtol=1e-6)


def test_edge_weights_enter_the_codes_in_quantile_bins_fitted_on_training_graphs():
    """A path 0 - 1 - 2 - 3 weighted 1, 4, 10: thresholds at the 1/3 and 2/3 quantiles of the
    six directed weights are 3 and 6, so the edges fall in bins 0, 1, 2 (codes 1, 2, 3) and
    two hops become code 2 + 2."""
    path = np.diag([1.0, 4.0, 10.0], 1)
    ds = graph_dataset([path + path.T, 100 * (path + path.T)], nodes={"x": np.arange(8.0)})
    adapter = GraphAdapter(["x"], max_distance=2, edge_weight="weight",
                           edge_weight_bins=3).fit(ds, where={"graph": [0]})
    np.testing.assert_allclose(adapter.weight_thresholds, [3.0, 6.0])
    far, none = 5, 6
    np.testing.assert_array_equal(adapter.encode(ds).structure.pair_codes[0],
                                  [[0, 1, 4, far], [1, 0, 2, 4], [4, 2, 0, 3], [far, 4, 3, 0]])
    assert adapter.num_codes == graphs.num_distance_codes(2) + 2 == none + 1
    unbinned = GraphAdapter(["x"], max_distance=2, edge_weight="weight").fit(ds)
    np.testing.assert_array_equal(unbinned.encode(ds).structure.pair_codes[0],
                                  [[0, 1, 2, 3], [1, 0, 1, 2], [2, 1, 0, 1], [3, 2, 1, 0]])
    both = GraphAdapter(attention="edges", directed="both", edge_weight="weight",
                        edge_weight_bins=3).fit(ds, where={"graph": [0]})
    # per direction: 0 self, 1 .. 3 an edge in bin 0 .. 2, 4 none: code = (j -> i) * 5 + (i -> j)
    np.testing.assert_array_equal(both.encode(ds).structure.pair_codes[0, 0], [0, 6, -1, -1])
    assert both.num_codes == 25


def test_renamed_and_removed_arguments_name_their_replacements():
    ds = rings_dataset(sizes=(4, 5), held_out=0)
    with pytest.raises(TypeError, match="validity_channel="):
        GraphAdapter(["x"], validity_channels=True)
    adapter = GraphAdapter(["x"]).fit(ds, targets="cycle")
    with pytest.raises(TypeError, match=r"where=ds\[mask\]"):
        adapter.batches(ds, mask="train")
    with pytest.raises(TypeError, match="no ds or out_features"):
        adapter.model_config(ds, 2)
    with pytest.raises(ValueError, match="expected task='classification'"):
        adapter.model_config(task="regression")


def test_iterating_the_batches_again_runs_the_next_epoch():
    """Each new loop over shuffled batches is the next epoch (it used to replay epoch 0)."""
    ds = rings_dataset()
    adapter = GraphAdapter(["x"]).fit(ds, targets="cycle")
    batches = adapter.batches(ds, batch_size=3, shuffle=True, seed=4)
    for epoch in range(3):
        looped = [b.placement.graphs for b in batches]
        replayed = [b.placement.graphs for b in batches.epoch(epoch)]
        assert all(np.array_equal(a, b) for a, b in zip(looped, replayed)), epoch
    orders = {tuple(np.concatenate([b.placement.graphs for b in batches.epoch(e)]))
              for e in range(3)}
    assert len(orders) == 3


def test_graph_values_with_a_feature_dim_come_back_in_physical_units():
    ds = rings_dataset(sizes=(4, 5, 6), held_out=0)
    ds["moments"] = (("graph", "moment"), np.array([[1.0, 100.0], [2.0, 300.0], [4.0, 200.0]]),
                     {"units": "m"})
    adapter = GraphAdapter(["x"]).fit(ds, targets="moments")
    assert adapter.model_config(**SIZES).out_features == 2
    batch = adapter.encode(ds, where={"graph": [2, 0]})
    np.testing.assert_allclose(batch.targets.mean(0), [0.1336, -0.6124], atol=1e-4)  # z-scores
    decoded = adapter.decode(batch, batch.targets)
    assert decoded["moments"].dims == ("graph", "moment")
    assert decoded["moments"].attrs["units"] == "m"
    np.testing.assert_array_equal(decoded.graph, [0, 2])
    np.testing.assert_allclose(decoded["moments"], ds["moments"].values[[0, 2]], rtol=1e-6)
