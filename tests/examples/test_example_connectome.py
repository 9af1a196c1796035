"""The connectome example's quick mode: seqattn's graph path classifies held-out neurons of the
larval mushroom body far better than label propagation and exactly as well as the strongest
node baseline seqattn.evaluate fits on the same splits and inputs, logistic regression on the
node features (degrees, Laplacian and random-walk positions): 1.000, 1.000 and 0.976 on seeds
0-2 for both. That tie at the ceiling (one test neuron on one seed) is asserted
as a tie, not a win. The karate club is reported against the same baselines (there label
propagation and the node logistic score 1.000, seqattn 0.889)."""
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


def test_quick_run_beats_the_strongest_library_baseline():
    results = example.main(["--quick"])
    seqattn, _ = results["seqattn"]
    baselines = {"node logistic", "label propagation"}
    assert baselines <= set(results), sorted(results)
    strongest = max(baselines, key=lambda name: results[name][0])
    assert seqattn >= results[strongest][0], (strongest, results)
    assert seqattn > results["label propagation"][0] + 0.3, results
    karate = results["karate club"]
    assert baselines <= set(karate), karate
    assert all(0 <= v <= 1 for v in karate.values()), karate
    assert karate["seqattn"] > 0.5, karate  # a coin flip; 15 of 34 members are the minority
