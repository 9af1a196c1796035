"""The graph path end to end: a Dataset (from scipy.sparse matrices or networkx) -> GraphAdapter
fitted on the training part -> build(adapter.model_config()) -> fit -> seqattn.predict onto the
node or graph dim, named after the target -> seqattn.save / load -> identical predictions."""
import numpy as np
import xarray as xr

import seqattn
from graph_helpers import SIZES, karate_dataset, rings_dataset
from seqattn.adapters import GraphAdapter, predict
from seqattn.models import GraphModelConfig, build
from seqattn.train import AdamW, CrossEntropyLoss, MSELoss, fit


def _reloaded_predictions(tmp_path, model, adapter, ds):
    seqattn.save(model, tmp_path / "model")
    seqattn.save(adapter, tmp_path / "adapter")
    return predict(seqattn.load(tmp_path / "model"), ds, seqattn.load(tmp_path / "adapter"))


def test_graph_classification_of_many_small_graphs(tmp_path):
    """N -> 1: paths against cycles (graphs of 4-7 nodes, padded per batch), told apart by
    their degrees and hop distances, also on graphs held out of training; predictions land on
    the graph dim."""
    ds = rings_dataset()
    adapter = GraphAdapter(["x"], max_distance=3, max_degree=3, random_walk=3).fit(
        ds, targets="cycle", where=ds.train)
    config = adapter.model_config(**SIZES)
    assert isinstance(config, GraphModelConfig) and (config.task, config.out_features) == (
        "graph", 2)
    model = build(config)
    batches = adapter.batches(ds, where=ds.train, batch_size=3, shuffle=True)
    assert sum(len(b) for b in batches) == int(ds["train"].sum())
    history = fit(model, CrossEntropyLoss(), AdamW(model, lr=1e-2), batches, epochs=15,
                  progress=False)
    assert history["loss"][-1] < 0.5 * history["loss"][0]
    out = adapter.predict(model, ds, batch_size=4)
    assert out["cycle"].dims == ("graph",) and out["cycle_probability"].dims == ("graph", "class")
    np.testing.assert_array_equal(out["cycle"], ds["cycle"])
    xr.testing.assert_identical(predict(model, ds, adapter, batch_size=4), out)
    held_out = adapter.predict(model, ds, where=~ds.train)
    xr.testing.assert_identical(held_out, out.sel(graph=~ds.train.values))
    xr.testing.assert_identical(_reloaded_predictions(tmp_path, model, adapter, ds), out)


def test_node_regression_on_one_graph_learns_from_the_training_nodes_only(tmp_path):
    """N -> N, transductive: one graph, targets (each node's degree) on the training nodes
    only, NaN elsewhere; predictions for every node land on the node dim."""
    ds = karate_dataset()
    ds["degree"].attrs["units"] = "edges"
    adapter = GraphAdapter(attention="edges", laplacian=3, max_degree=20).fit(
        ds, targets="degree", where=ds.train)
    batches = adapter.batches(ds, where=ds.train)
    (batch,) = batches
    np.testing.assert_array_equal(batch.target_valid[0, :, 0], ds["train"].values)
    model = build(adapter.model_config(**SIZES))
    history = fit(model, MSELoss(skip_nan=True), AdamW(model, lr=1e-2), batches, epochs=15,
                  progress=False)
    assert history["loss"][-1] < 0.5 * history["loss"][0]
    out = predict(model, ds, adapter)
    assert out["degree"].dims == ("node",) and not out["degree"].isnull().any()
    assert out["degree"].attrs["units"] == "edges"
    # physical units: the mean prediction is near the training nodes' mean degree, not near 0
    assert abs(float(out["degree"].mean()) - float(ds.degree[ds.train].mean())) < 2.0
    xr.testing.assert_identical(out.coords.to_dataset(), ds[["node_name"]].coords.to_dataset())
    xr.testing.assert_identical(_reloaded_predictions(tmp_path, model, adapter, ds), out)


def test_node_classification_with_typed_edges_from_an_xarray_dataset(tmp_path):
    """A Dataset written by hand: two directed rings, a node feature x, edges with a type. A
    node's class is the sign of x at the node its edge comes from when that edge has type 1,
    its own sign otherwise: only the typed, directed pair codes say which to read, so a model
    trained on the first ring classifies the second's nodes too."""
    sizes = np.array([30, 12])
    start = np.repeat([0, sizes[0]], sizes)
    source = np.arange(sizes.sum())
    target = start + (source - start + 1) % np.repeat(sizes, sizes)
    edge_type = np.random.default_rng(0).integers(0, 2, len(source))
    x = np.random.default_rng(1).normal(size=sizes.sum())
    label = (x > 0).astype(np.int64)
    label[target] = np.where(edge_type == 1, x[source] > 0, x[target] > 0)
    ds = xr.Dataset({"x": (("node", "feature"), x[:, None]),
                     "graph_index": ("node", np.repeat([0, 1], sizes)),
                     "source": ("edge", source), "target": ("edge", target),
                     "kind": ("edge", edge_type), "label": ("node", label),
                     "train": ("graph", [True, False])})
    adapter = GraphAdapter(["x"], attention="edges", directed=True, edge_type="kind",
                           num_edge_types=2).fit(ds, targets="label")  # x's scale: both rings
    model = build(adapter.model_config(**SIZES))
    fit(model, CrossEntropyLoss(), AdamW(model, lr=2e-2),
        adapter.batches(ds, where=ds.train), epochs=60, progress=False)
    out = predict(model, ds, adapter)
    held_out = ds["graph_index"] == 1
    correct = out["label"] == ds["label"]
    assert bool(correct[held_out].all())  # 0.83 with the codes of the reversed direction
    xr.testing.assert_identical(_reloaded_predictions(tmp_path, model, adapter, ds), out)
