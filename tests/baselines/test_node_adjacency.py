"""The node baselines see the Dataset's graph, whatever codes the GraphAdapter gives its edges:
with directed="both" (a code per pair of directions, where code 1 marks no pair), with
edge_weight_bins (one-hop codes split by weight), with edge types, and padded batches of
graphs of several sizes. Their adjacency is the edge list symmetrized (an edge either way joins
two nodes), without self loops."""
import numpy as np
import pytest
import scipy.sparse as sp

from baseline_batches import graph_batch
from seqattn.adapters import GraphAdapter
from seqattn.baselines import LabelPropagation, NodeFeatures, for_batch
from seqattn.baselines.base import as_list
from seqattn.baselines.nodes import adjacency
from seqattn.readers import graph_dataset

SIZES = (9, 7, 8)


def directed_graphs(seed=0):
    """Graphs of one-way and two-way edges (two-way with different weights), a self loop and
    an isolated node, weights 1 .. 9; a class per node (its degree, capped)."""
    rng = np.random.default_rng(seed)
    matrices = []
    for n in SIZES:
        dense = (rng.random((n, n)) < 0.25) * rng.integers(1, 10, (n, n)).astype(float)
        dense[n - 1, :] = dense[:, n - 1] = 0.0  # an isolated node
        dense[0, 0] = 3.0  # a self loop: no neighbour
        matrices.append(sp.csr_array(dense))
    joined = sp.block_diag(matrices).toarray() != 0
    joined |= joined.T
    np.fill_diagonal(joined, False)
    labels = np.minimum(joined.sum(axis=1), 3)
    ds = graph_dataset(matrices, nodes={"x": rng.normal(size=sum(SIZES))})
    ds["label"] = ("node", labels)
    return ds, joined


def batch_adjacency(batches, baseline, n_nodes):
    """The (n, n) adjacency `baseline` reads off `batches`, on the Dataset's node positions."""
    seen = np.zeros((n_nodes, n_nodes), bool)
    for batch in batches:
        A = adjacency(batch, baseline.neighbour_codes) > 0
        for b, nodes in enumerate(batch.placement.nodes):
            present = nodes >= 0
            seen[np.ix_(nodes[present], nodes[present])] = A[b][np.ix_(present, present)]
    return seen


SETTINGS = [dict(directed="both", attention="edges"),
            dict(directed="both", attention="global"),
            dict(directed="both", attention="edges", edge_weight="weight", edge_weight_bins=4),
            dict(directed="both", edge_weight="weight", edge_weight_bins=4),
            dict(directed=False, edge_weight="weight", edge_weight_bins=4),
            dict(directed=True, edge_weight="weight", edge_weight_bins=4),
            dict(directed=True),
            dict(directed=False)]


@pytest.mark.parametrize("setting", SETTINGS, ids=lambda s: ",".join(f"{k}={v}" for k, v in
                                                                     s.items()))
def test_node_baselines_see_the_datasets_edges(setting):
    ds, joined = directed_graphs()
    adapter = GraphAdapter(["x"], **setting).fit(ds, targets="label")
    batches = as_list(adapter.batches(ds, batch_size=2), "train")  # two graphs padded together
    baselines = for_batch(batches[0])
    assert [type(b) for b in baselines] == [NodeFeatures, LabelPropagation]
    for baseline in baselines:
        np.testing.assert_array_equal(batch_adjacency(batches, baseline, len(joined)), joined)
    if setting.get("directed") == "both":
        codes = np.concatenate([np.asarray(b.structure.pair_codes).ravel() for b in batches])
        assert not (codes == 1).any(), "code 1 marks no pair here: the old default saw no edge"
    if setting.get("edge_weight_bins"):
        assert adapter.weight_bin_count > 2, "the one-hop code is split into several bins"


def test_edge_types_are_neighbours_too():
    ds, joined = directed_graphs(1)
    ds["kind"] = ("edge", (np.arange(ds.sizes["edge"]) % 3).astype(np.int64))
    for bins in (None, 3):
        adapter = GraphAdapter(["x"], directed=True, edge_type="kind", num_edge_types=3,
                               edge_weight="weight", edge_weight_bins=bins).fit(
            ds, targets="label")
        batches = as_list(adapter.batches(ds, batch_size=3), "train")
        np.testing.assert_array_equal(batch_adjacency(batches, NodeFeatures(), len(joined)),
                                      joined)


def test_fitted_node_baselines_read_the_codes_of_the_batch_they_predict():
    """Label propagation over directed="both" codes spreads labels along the edges: on two
    separate cliques seeded once each it labels every node (with no edge it would give every
    node the training prior)."""
    n = 6
    clique = np.ones((n, n)) - np.eye(n)
    upper = sp.csr_array(sp.block_diag([np.triu(clique), np.triu(clique)]))  # one way only
    labels = np.repeat([0, 1], n)
    ds = graph_dataset(upper, nodes={"x": np.zeros(2 * n)})
    ds["label"] = ("node", labels)
    node = np.arange(2 * n)
    train, valid, test = ({"node": np.isin(node, k)} for k in ([0, n], [1, n + 1],
                                                                node[~np.isin(node, [0, n, 1,
                                                                                     n + 1])]))
    adapter = GraphAdapter(["x"], directed="both", attention="edges").fit(
        ds, targets="label", where=train)
    fitted = LabelPropagation().fit(adapter.batches(ds, where=train),
                                    adapter.batches(ds, where=valid))
    batch = adapter.encode(ds, where=test)
    predicted = fitted.predict(batch)[0].argmax(-1)
    np.testing.assert_array_equal(predicted[batch.placement.selected[0]],
                                  labels[test["node"]])


def test_given_codes_win_and_batches_that_say_nothing_read_one_hop():
    codes = np.array([[[0, 1, 2], [2, 0, 3], [2, 3, 0]]])
    batch = graph_batch(np.zeros((1, 3, 1)), codes, np.zeros((1, 3), int), [[0, 1, 2]])
    assert adjacency(batch)[0].tolist() == [[0, 1, 0], [1, 0, 0], [0, 0, 0]]
    assert adjacency(batch, (3,))[0].tolist() == [[0, 0, 0], [0, 0, 1], [0, 1, 0]]
    assert NodeFeatures(neighbour_codes=[3]).neighbour_codes == (3,)
