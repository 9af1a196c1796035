"""The digits example's quick mode: patch tokens through the GridAdapter, a SequenceModel whose
linear path reads every two patches' pixels (the library's pairwise logistic regression, its
strongest baseline here) and starts from that baseline as fitted on the training images, the
attention trained on the training images and their one-pixel shifts. It beats every baseline
seqattn.evaluate fits on the same tokens in log loss, the pairwise logistic included (quick
test, seed 0: 0.018 against 0.055), and is not behind the strongest in accuracy. Accuracy on
450 test images at 99 % is a matter of one image, which floating-point rounding decides: 0.993
against 0.991 with OpenBLAS 0.3.30's Haswell kernel, 0.991 against 0.991 (446 images each)
with 0.3.31's SkylakeX kernel; over seeds 1 and 2 the model's log loss stayed lower while its
accuracy won once and lost once (BENCHMARKS.md). The shifts are of training images only, and
the path is the fitted baseline itself."""
import sys
from pathlib import Path

import numpy as np

from seqattn.evaluation import strongest_baseline

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))

import digits  # noqa: E402


def test_splits_are_stratified_and_cover_every_image_once():
    train, validation, test = digits.splits(digits.ExampleConfig())
    assert [ds.sizes["sample"] for ds in (train, validation, test)] == [1077, 270, 450]
    for ds in (train, validation, test):
        counts = np.bincount(ds["label"].values, minlength=10)
        assert counts.min() >= 0.09 * ds.sizes["sample"]
    every = np.concatenate([ds["sample"].values for ds in (train, validation, test)])
    np.testing.assert_array_equal(np.sort(every), np.arange(1797))


def test_shifted_copies_move_the_training_images_by_one_pixel_and_keep_labels():
    train = digits.splits(digits.ExampleConfig())[0].isel(sample=slice(0, 5))
    every = digits.shifted(train)
    assert every.sizes["sample"] == 25 and len(set(every["sample"].values)) == 25
    image = train["image"].values
    copies = every["image"].values.reshape(5, 5, 8, 8)  # (copy, image, y, x)
    np.testing.assert_array_equal(copies[0], image)
    np.testing.assert_array_equal(copies[1][:, 1:], image[:, :-1])  # down
    np.testing.assert_array_equal(copies[1][:, 0], 0)
    np.testing.assert_array_equal(copies[2][:, :-1], image[:, 1:])  # up
    np.testing.assert_array_equal(copies[3][:, :, 1:], image[:, :, :-1])  # right
    np.testing.assert_array_equal(copies[4][:, :, :-1], image[:, :, 1:])  # left
    np.testing.assert_array_equal(copies[4][:, :, -1], 0)
    np.testing.assert_array_equal(every["label"].values, np.tile(train["label"].values, 5))


def test_quick_run_beats_the_strongest_library_baseline():
    results = digits.main(["--quick"])
    scores = results["scores"]
    assert int(scores.n) == 450
    accuracy = scores.accuracy.to_series()
    assert {"additive logistic", "pairwise logistic", "pooled logistic"} <= set(accuracy.index)
    neighbours = [name for name in accuracy.index if name.endswith("nearest neighbour")]
    assert len(neighbours) == 1, accuracy
    assert accuracy["model"] >= accuracy[strongest_baseline(scores, "accuracy")], accuracy
    log_loss = scores.log_loss.to_series()
    assert log_loss["model"] < log_loss[strongest_baseline(scores, "log_loss")], log_loss
    # both ways to train were scored on the validation images and the better one chosen
    table = results["validation"]
    assert table["ran"].all() and table.attrs["chosen"] == results["choice"]
    assert table.log_loss.sel(candidate=results["choice"]) == table.log_loss.min()
