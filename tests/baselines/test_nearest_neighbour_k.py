"""NearestNeighbour's k on a small training set: chosen by validation accuracy (ties: the log
loss of smoothed votes), not by the log loss of raw vote fractions, which punishes every miss of
k = 1 with log(1e-7) and so picks the largest k (BasicMotions: k = 9, one class predicted for 39
of 40 test series)."""
import numpy as np
import pytest

from baseline_batches import batch
from seqattn.baselines import NearestNeighbour
from seqattn.baselines.estimators import log_loss

N_CLASSES, SPOTS = 4, 32
CLASS_OF = np.random.default_rng(0).permutation(np.repeat(np.arange(N_CLASSES),
                                                          SPOTS // N_CLASSES))


def spots(repeats, seed, flipped=0.0):
    """One sample per spot 0 .. 31 on a line (repeated), each spot's class fixed (8 spots per
    class, in random order: a spot's neighbours are of other classes), the position jittered
    by 0.1; a share `flipped` of the labels replaced by another class (label noise)."""
    rng = np.random.default_rng(seed)
    spot = np.tile(np.arange(SPOTS), repeats)
    labels = CLASS_OF[spot]
    flip = rng.random(len(labels)) < flipped
    labels = np.where(flip, (labels + rng.integers(1, N_CLASSES, len(labels))) % N_CLASSES,
                      labels)
    x = spot + 0.1 * rng.normal(size=len(labels))
    return batch(x[:, None, None], labels)


def test_one_neighbour_is_chosen_where_it_is_clearly_right():
    train, valid, test = spots(1, 1), spots(2, 2, flipped=0.2), spots(2, 3)
    fitted = NearestNeighbour().fit([train], [valid])
    assert fitted.chosen["k"] == 1, fitted.chosen
    assert fitted.chosen["validation_accuracy"][1] > 0.7 > max(
        fitted.chosen["validation_accuracy"][k] for k in (3, 5, 9))
    predicted = fitted.predict(test).argmax(-1)
    assert np.mean(predicted == test.targets) == 1.0
    assert np.bincount(predicted, minlength=N_CLASSES).tolist() == [16] * N_CLASSES


def test_votes_are_smoothed_by_one_pseudo_vote():
    """k = 1: the neighbour's class (1 + 1/4) / 2, every other class (1/4) / 2; a missed sample
    costs log(8), not log(1e-7)."""
    train, valid = spots(1, 1), spots(2, 2, flipped=0.2)
    fitted = NearestNeighbour(neighbours=(1,)).fit([train], [valid])
    probabilities = np.exp(fitted.predict(valid))
    np.testing.assert_allclose(probabilities.sum(axis=1), 1.0, rtol=1e-6)
    np.testing.assert_allclose(np.sort(probabilities, axis=1)[:, ::-1],
                               np.tile([0.625, 0.125, 0.125, 0.125], (len(probabilities), 1)),
                               rtol=1e-6)
    score = fitted.chosen["validation_log_loss"][1]
    assert score == pytest.approx(log_loss(fitted.predict(valid), valid.targets), rel=1e-6)
    assert score < np.log(8)


def test_equal_accuracy_goes_to_the_lower_log_loss():
    """Two well separated classes: every k is right on validation; the smoothed votes of more
    agreeing neighbours are surer, so the log loss picks the largest k."""
    rng = np.random.default_rng(4)
    labels = np.repeat([0, 1], 20)
    train = batch((5.0 * labels + rng.normal(size=40))[:, None, None], labels)
    valid = batch((5.0 * labels + rng.normal(size=40))[:, None, None], labels)
    fitted = NearestNeighbour().fit([train], [valid])
    assert set(fitted.chosen["validation_accuracy"].values()) == {1.0}
    assert fitted.chosen["k"] == 9


def test_accuracy_decides_before_the_log_loss():
    """Validation labels mostly replaced (60%): k = 1 is still the most accurate, while the
    log loss of the smoothed votes, which hedge more at k = 9, would pick k = 9."""
    fitted = NearestNeighbour().fit([spots(1, 1)], [spots(4, 2, flipped=0.6)])
    accuracy, loss = fitted.chosen["validation_accuracy"], fitted.chosen["validation_log_loss"]
    assert max(accuracy, key=accuracy.get) == 1 and min(loss, key=loss.get) == 9
    assert fitted.chosen["k"] == 1


def test_the_classes_are_counted_over_every_training_batch():
    """The first batch lacks class 3: the votes still have four columns."""
    first, second = spots(1, 1), spots(1, 2)
    keep = first.targets != 3
    first = batch(np.asarray(first.tokens)[keep], first.targets[keep])
    fitted = NearestNeighbour().fit([first, second], [spots(1, 3)])
    assert fitted.layout.n_outputs == N_CLASSES
    assert fitted.predict(spots(1, 4)).shape == (SPOTS, N_CLASSES)


def test_padded_samples_are_compared_on_their_pooled_features():
    """Batches of one width but with padding (series of several lengths) are not compared
    position by position (padding against values); samples fitted position by position meet a
    batch of another length with an error that says so."""
    rng = np.random.default_rng(7)
    tokens, labels = rng.normal(size=(20, 4, 2)), np.arange(20) % 2
    padding = np.arange(4)[None, :] >= rng.integers(2, 5, size=20)[:, None]
    padded = batch(tokens, labels, key_padding_mask=padding)
    assert NearestNeighbour().fit([padded], [padded]).flat_width is None
    one_length = NearestNeighbour().fit([batch(tokens, labels)], [batch(tokens, labels)])
    assert one_length.flat_width == 8
    with pytest.raises(ValueError, match="fitted on samples of one length, 8 numbers"):
        one_length.predict(batch(tokens[:, :3], labels))
