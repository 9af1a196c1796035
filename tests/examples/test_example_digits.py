"""The digits example's quick mode: patch tokens through the GridAdapter beat logistic
regression and 1-nearest neighbour on scikit-learn's 8 x 8 digits."""
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))

import digits  # noqa: E402


def test_splits_are_stratified_and_cover_every_image_once():
    train, validation, test = digits.splits(digits.ExampleConfig())
    assert [ds.sizes["sample"] for ds in (train, validation, test)] == [1077, 270, 450]
    for ds in (train, validation, test):
        counts = np.bincount(ds["label"].values, minlength=10)
        assert counts.min() >= 0.09 * ds.sizes["sample"]


def test_quick_run_beats_logistic_regression_and_nearest_neighbour():
    results = digits.main(["--quick"])
    assert results["seqattn"] > results["logistic regression"]
    assert results["seqattn"] > results["1-NN"]
