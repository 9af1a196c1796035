"""The connectome example's quick mode: seqattn's graph path classifies held-out neurons of the
larval mushroom body better than every baseline (majority, label propagation, logistic
regression on degree features), on the same stratified splits; on the karate club it beats the
majority class."""
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("networkx")
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))

import connectome_cell_types as example  # noqa: E402


def test_the_data_files_hold_209_neurons_of_four_types():
    adjacency, labels = example.connectome()
    assert adjacency.shape == (209, 209) and adjacency.nnz == 7425
    np.testing.assert_array_equal(np.bincount(labels), [21, 101, 29, 58])  # I, K, O, P


def test_splits_are_stratified_and_disjoint():
    _, labels = example.connectome()
    split = example.stratified_split(labels, 0, example.ExampleConfig())
    nodes = np.concatenate(list(split.values()))
    np.testing.assert_array_equal(np.sort(nodes), np.arange(209))
    for part in split.values():
        fractions = np.bincount(labels[part], minlength=4) / len(part)
        np.testing.assert_allclose(fractions, np.bincount(labels) / 209, atol=0.03)


def test_label_propagation_spreads_labels_along_edges():
    # a path 0 - 1 - 2 - 3 with its ends labelled 0 and 1: the middle nodes take the nearer end
    adjacency = np.diag(np.ones(3), 1) + np.diag(np.ones(3), -1)
    labels = np.array([0, 0, 1, 1])
    scores = example.label_propagation(adjacency, labels, np.array([0, 3]), 2)
    np.testing.assert_array_equal(scores.argmax(1), [0, 0, 1, 1])
    np.testing.assert_allclose(scores[1], [2 / 3, 1 / 3])


def test_quick_run_beats_every_baseline():
    results = example.main(["--quick"])
    seqattn, _ = results["seqattn"]
    for name in ("majority", "label propagation", "logistic regression (degrees)"):
        assert seqattn > results[name][0], name
    assert results["majority"][0] == pytest.approx(0.476, abs=0.01)
    karate = results["karate club"]
    assert karate["seqattn"] > karate["majority"]
