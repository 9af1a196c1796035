"""Node baselines on graphs given by pair codes: degree and spectral features, and label
propagation seeded by training labels only."""
import numpy as np

from baseline_batches import graph_batch
from seqattn.baselines import LabelPropagation, NodeFeatures
from seqattn.baselines.nodes import adjacency
from seqattn.data.targets import MISSING_CLASS


def two_communities(n=8):
    """One graph: two cliques of n nodes joined by one edge; pair codes 0 self, 1 one hop, 2
    farther; community label per node."""
    size = 2 * n
    codes = np.full((size, size), 2)
    codes[:n, :n] = codes[n:, n:] = 1
    codes[n - 1, n] = codes[n, n - 1] = 1
    np.fill_diagonal(codes, 0)
    labels = np.repeat([0, 1], n)
    return codes[None], labels


def only(labels, keep):
    return np.where(keep, labels, MISSING_CLASS)[None]


def test_adjacency_reads_one_hop_codes_and_cuts_padding():
    codes = np.array([[[0, 1, 2], [1, 0, 1], [2, 1, 0]]])
    padding = np.array([[False, False, True]])
    batch = graph_batch(np.zeros((1, 3, 1)), codes, np.zeros((1, 3), int), [[0, 1, 2]],
                        key_padding_mask=padding)
    assert adjacency(batch, (1,))[0].tolist() == [[0, 1, 0], [1, 0, 0], [0, 0, 0]]


def test_label_propagation_spreads_training_labels_only():
    codes, labels = two_communities()
    nodes = np.arange(16)[None]
    features = np.zeros((1, 16, 1))
    seeds = np.isin(np.arange(16), [0, 15])
    valid = np.isin(np.arange(16), [3, 12])
    train = graph_batch(features, codes, only(labels, seeds), nodes)
    validation = graph_batch(features, codes, only(labels, valid), nodes)
    fitted = LabelPropagation().fit([train], [validation])
    assert sorted(fitted.labels) == [0, 15], "validation labels must not seed"
    test = graph_batch(features, codes, only(labels, ~(seeds | valid)), nodes)
    assert (fitted.predict(test)[0].argmax(-1) == labels).all()


def test_node_features_tell_hubs_from_leaves():
    """Star graphs: the centre (class 1) is told apart by its degree alone."""
    size = 6
    codes = np.full((size, size), 2)
    codes[0, :] = codes[:, 0] = 1
    np.fill_diagonal(codes, 0)
    labels = (np.arange(size) == 0).astype(int)
    batch = graph_batch(np.ones((3, size, 1)), np.repeat(codes[None], 3, 0),
                        np.repeat(labels[None], 3, 0), np.arange(3 * size).reshape(3, size))
    fitted = NodeFeatures(spectral=2).fit([batch], [batch])
    assert (fitted.predict(batch).argmax(-1) == labels).all()
