"""Additive and pairwise models of fixed-length variants: features pinned by hand, an
epistatic target only the pairwise model fits, and the checks that name bad input."""
import numpy as np
import pytest

from baseline_batches import batch
from seqattn.baselines import PooledFeatures, PositionFeatures, for_batch

RNG = np.random.default_rng(11)


def test_features_are_one_hot_per_position_and_per_pair():
    ids = np.array([[0, 2, 1], [1, 1, 0]])
    data = batch(ids, np.array([0.5, -0.5]))
    fitted = PositionFeatures(pairwise=True).fit([data], [data])
    assert fitted.vocab_size == 3 and fitted.name == "pairwise ridge"
    features = fitted.features(data)
    assert features.shape == (2, 3 * 3 + 3 * 9)
    additive = features[:, :9].reshape(2, 3, 3)
    np.testing.assert_array_equal(additive.argmax(axis=2), ids)
    pairs = features[:, 9:].reshape(2, 3, 9)  # pairs (0, 1), (0, 2), (1, 2)
    expected = [[0 * 3 + 2, 0 * 3 + 1, 2 * 3 + 1], [1 * 3 + 1, 1 * 3 + 0, 1 * 3 + 0]]
    np.testing.assert_array_equal(pairs.argmax(axis=2), expected)
    assert features.sum() == 2 * (3 + 3)


EFFECTS = RNG.normal(size=(6, 4))


def epistatic(samples):
    """log-fitness: additive effects plus a bonus when positions 1 and 4 hold the same id."""
    ids = RNG.integers(0, 4, (samples, len(EFFECTS)))
    y = EFFECTS[np.arange(len(EFFECTS)), ids].sum(axis=1) * 0.2 + 2.0 * (ids[:, 1] == ids[:, 4])
    return batch(ids, y + 0.05 * RNG.normal(size=samples))


def r2(predicted, y):
    return 1 - np.sum((predicted.ravel() - y) ** 2) / np.sum((y - y.mean()) ** 2)


def test_only_the_pairwise_model_fits_an_epistatic_pair():
    train, valid, test = epistatic(600), epistatic(200), epistatic(300)
    additive = PositionFeatures().fit([train], [valid])
    pairwise = PositionFeatures(pairwise=True).fit([train], [valid])
    frequencies = PooledFeatures().fit([train], [valid])
    assert r2(pairwise.predict(test), test.targets) > 0.95
    assert r2(additive.predict(test), test.targets) < 0.5
    assert r2(frequencies.predict(test), test.targets) < r2(pairwise.predict(test),
                                                            test.targets)


def test_classes_get_logistic_regression():
    ids = RNG.integers(0, 4, (300, 5))
    labels = (ids[:, 2] == 3).astype(int)
    data = batch(ids, labels)
    fitted = PositionFeatures().fit([data], [data])
    assert fitted.name == "additive logistic"
    assert np.mean(fitted.predict(data).argmax(axis=1) == labels) == 1.0


def test_one_hot_float_rows_give_the_same_features_as_ids():
    ids = RNG.integers(0, 4, (6, 5))
    y = RNG.normal(size=6)
    as_ids = PositionFeatures(pairwise=True).fit([batch(ids, y)], [batch(ids, y)])
    rows = np.eye(4, dtype=np.float32)[ids]
    as_rows = PositionFeatures(pairwise=True).fit([batch(rows, y)], [batch(rows, y)])
    np.testing.assert_array_equal(as_ids.features(batch(ids, y)),
                                  as_rows.features(batch(rows, y)))


def test_for_batch_offers_them_where_the_columns_fit():
    short = batch(RNG.integers(0, 4, (8, 9)), RNG.normal(size=8))
    kinds = [(type(b).__name__, getattr(b, "pairwise", None)) for b in for_batch(short)]
    assert ("PositionFeatures", False) in kinds and ("PositionFeatures", True) in kinds
    long = batch(RNG.integers(0, 4, (8, 100)), RNG.normal(size=8))
    kinds = [(type(b).__name__, getattr(b, "pairwise", None)) for b in for_batch(long)]
    assert ("PositionFeatures", False) in kinds and ("PositionFeatures", True) not in kinds
    padded = batch(RNG.integers(0, 4, (8, 9)), RNG.normal(size=8),
                   key_padding_mask=np.arange(9)[None, :] >= np.arange(1, 9)[:, None] + 1)
    assert not any(isinstance(b, PositionFeatures) for b in for_batch(padded))


def test_bad_input_is_named():
    padded = batch(RNG.integers(0, 4, (8, 9)), RNG.normal(size=8),
                   key_padding_mask=np.arange(9)[None, :] > np.arange(8)[:, None])
    with pytest.raises(ValueError, match="padding"):
        PositionFeatures().fit([padded], [padded])
    wide = batch(RNG.integers(0, 20, (8, 40)), RNG.normal(size=8))
    with pytest.raises(ValueError, match="max_features"):
        PositionFeatures(pairwise=True).fit([wide], [wide])
    ids = batch(RNG.integers(0, 4, (8, 9)), RNG.normal(size=8))
    fitted = PositionFeatures().fit([ids], [ids])
    with pytest.raises(ValueError, match="positions"):
        fitted.predict(batch(RNG.integers(0, 4, (8, 7)), RNG.normal(size=8)))
