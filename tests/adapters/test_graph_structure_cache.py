"""GraphAdapter keeps each graph's pair codes and node encodings for its next ``batches`` call
(seqattn.adapters.graph_cache): the batches of a call that meets the cache are those of a fresh
adapter, bit for bit, and a graph that differs in one edge, one weight, one edge type or the
fitted weight bins is encoded anew."""
import numpy as np

from seqattn.adapters import GraphAdapter
from seqattn.readers import graph_dataset

OPTIONS = dict(attention="global", max_distance=3, directed=True, edge_weight="weight",
               edge_weight_bins=3, edge_type="kind", num_edge_types=2, max_degree=4,
               laplacian=3, random_walk=3)
# weight bins without edge types split the one-hop codes by the thresholds themselves
BINS_ONLY = {k: v for k, v in OPTIONS.items() if k not in ("edge_type", "num_edge_types")}
# weights without bins reach the encodings only (Laplacian, random walks)
WEIGHTS_ONLY = {k: v for k, v in BINS_ONLY.items() if k != "edge_weight_bins"}


def _random_graphs(seed, count=5):
    rng = np.random.default_rng(seed)
    matrices = []
    for n in rng.integers(3, 12, size=count):
        weights = (rng.random((n, n)) < 0.3) * rng.integers(1, 9, size=(n, n))
        np.fill_diagonal(weights, 0)
        matrices.append(weights.astype(np.float64))
    total = sum(len(m) for m in matrices)
    ds = graph_dataset(matrices, nodes={"x": rng.normal(size=(total, 2)),
                                        "y": rng.integers(0, 3, size=total)})
    ds["kind"] = ("edge", rng.integers(0, 2, size=ds.sizes["edge"]))
    return ds


def _fields(batch):
    out = {"tokens": batch.tokens, "mask": batch.key_padding_mask, "targets": batch.targets,
           "codes": batch.structure.pair_codes, "nodes": batch.placement.nodes}
    out.update({f"coords {k}": v for k, v in batch.coords.items()})
    return out


def _assert_same_batches(first, second):
    assert len(first) == len(second)
    for a, b in zip(first, second):
        fa, fb = _fields(a), _fields(b)
        assert fa.keys() == fb.keys()
        for name in fa:
            np.testing.assert_array_equal(fa[name], fb[name], err_msg=name)


def test_batches_that_meet_the_cache_are_those_of_a_fresh_adapter():
    ds = _random_graphs(0)
    where = np.array([0, 2, 3])
    adapter = GraphAdapter(["x"], **OPTIONS).fit(ds, targets="y", where={"graph": where})
    first = list(adapter.batches(ds, batch_size=2, shuffle=True, seed=1).epoch(0))
    again = list(adapter.batches(ds, batch_size=2, shuffle=True, seed=1).epoch(0))
    fresh = GraphAdapter(["x"], **OPTIONS).fit(ds, targets="y", where={"graph": where})
    _assert_same_batches(again, list(fresh.batches(ds, batch_size=2, shuffle=True,
                                                   seed=1).epoch(0)))
    _assert_same_batches(first, again)
    # each batch its own arrays: the cached ones are copied in, never handed out
    assert not np.shares_memory(again[0].structure.pair_codes, first[0].structure.pair_codes)


def _graph_zero(adapter, ds):
    """Graph 0's pair codes and node encodings, as arrays."""
    batch = adapter.encode(ds, where={"graph": [0]})
    n = int((~batch.key_padding_mask[0]).sum())
    return [batch.structure.pair_codes[0, :n, :n]] + [
        v[0, :n] for k, v in sorted(batch.coords.items())]


def test_a_graph_that_differs_is_encoded_anew():
    ds = _random_graphs(1)
    e = int(np.flatnonzero(ds["graph_index"].values[ds["source"].values] == 0)[0])
    edges = np.arange(ds.sizes["edge"])
    changes = {
        "a weight": (WEIGHTS_ONLY, ds.assign(weight=ds["weight"].copy(
            data=np.where(edges == e, 1e3, ds["weight"].values)))),
        "an edge type": (OPTIONS, ds.assign(kind=ds["kind"].copy(
            data=np.where(edges == e, 1 - ds["kind"].values, ds["kind"].values)))),
        "an edge": (OPTIONS, ds.isel(edge=np.delete(edges, e))),
    }
    for name, (options, changed) in changes.items():
        adapter = GraphAdapter(["x"], **options).fit(ds, targets="y")
        before = _graph_zero(adapter, ds)  # in the cache now
        fresh = GraphAdapter(["x"], **options).fit(ds, targets="y")
        want = _graph_zero(fresh, changed)
        assert any(not np.array_equal(w, b, equal_nan=w.dtype.kind == "f")
                   for w, b in zip(want, before)), f"{name} must change graph 0's encoding"
        for got, expected in zip(_graph_zero(adapter, changed), want):
            np.testing.assert_array_equal(got, expected, err_msg=name)


def test_refitted_weight_bins_give_new_codes():
    ds = _random_graphs(2)
    adapter = GraphAdapter(["x"], **BINS_ONLY).fit(ds, targets="y", where={"graph": [0, 1]})
    thresholds = adapter.weight_thresholds
    before = adapter.encode(ds)
    adapter.fit(ds, targets="y", where={"graph": [3, 4]})
    assert not np.array_equal(adapter.weight_thresholds, thresholds)
    fresh = GraphAdapter(["x"], **BINS_ONLY).fit(ds, targets="y", where={"graph": [3, 4]})
    assert not np.array_equal(fresh.encode(ds).structure.pair_codes,
                              before.structure.pair_codes), "the new bins change some codes"
    _assert_same_batches([adapter.encode(ds)], [fresh.encode(ds)])
