"""Per-sample baselines: pooled features pinned by hand, logistic regression on them, and the
nearest training sample."""
import numpy as np
import pytest

from baseline_batches import batch
from seqattn.baselines import NearestNeighbour, PooledFeatures, TokenFeatures
from seqattn.baselines.sequences import pooled

RNG = np.random.default_rng(2)


def test_pooled_features_skip_padding():
    inputs = np.array([[[1.0], [3.0], [100.0]], [[2.0], [2.0], [2.0]]])
    padding = np.array([[False, False, True], [False, False, False]])
    features = pooled(inputs, padding, ("mean", "std", "min", "max"))
    np.testing.assert_allclose(features, [[2.0, 1.0, 1.0, 3.0, 2.0], [2.0, 0.0, 2.0, 2.0, 3.0]])
    np.testing.assert_allclose(pooled(inputs, padding, ("mean",)), [[2.0], [2.0]])


def classes_by_spread(samples):
    """Class 1 sequences have a larger spread, the same mean: a mean alone cannot tell them."""
    labels = RNG.integers(0, 2, samples)
    tokens = RNG.normal(size=(samples, 20, 1)) * np.where(labels, 3.0, 1.0)[:, None, None]
    padding = np.zeros((samples, 20), bool)
    padding[::3, 15:] = True
    return batch(tokens, labels, key_padding_mask=padding)


def accuracy(logits, labels):
    return float((logits.argmax(-1) == labels).mean())


def test_pooled_logistic_reads_the_spread_and_the_mean_alone_cannot():
    train, valid, test = classes_by_spread(200), classes_by_spread(100), classes_by_spread(200)
    full = PooledFeatures().fit([train], [valid])
    assert full.name == "pooled logistic"
    assert accuracy(full.predict(test), test.targets) > 0.9
    mean_only = PooledFeatures(statistics=("mean",)).fit([train], [valid])
    assert accuracy(mean_only.predict(test), test.targets) < 0.7


def test_nearest_neighbour_gives_the_closest_training_samples_label():
    train = batch(np.array([[[0.0], [0.0]], [[5.0], [5.0]], [[0.2], [-0.1]]]), [0, 1, 0])
    fitted = NearestNeighbour(neighbours=(1,)).fit([train], [train])
    test = batch(np.array([[[4.0], [4.5]], [[0.1], [0.1]]]), [1, 0])
    assert fitted.predict(test).argmax(-1).tolist() == [1, 0]
    assert fitted.name == "1-nearest neighbour"


def test_nearest_neighbour_regression_averages_the_k_nearest():
    x = np.linspace(0, 1, 50)
    train = batch(x[:, None, None], np.sin(6 * x)[:, None] + 0.3 * RNG.normal(size=(50, 1)))
    validation = batch(x[:, None, None] + 0.01, np.sin(6 * x)[:, None])
    fitted = NearestNeighbour().fit([train], [validation])
    assert fitted.chosen["k"] > 1, "noisy targets: more than one neighbour scores better"


def test_token_ridge_per_token_with_padding():
    tokens = RNG.normal(size=(30, 6, 2))
    targets = (tokens @ [[1.0], [-2.0]]) + 0.5
    padding = np.zeros((30, 6), bool)
    padding[:, 4:] = True
    targets[padding] = 1e6  # padded tokens hold garbage that must not be read
    fitted = TokenFeatures().fit([batch(tokens, targets, key_padding_mask=padding)],
                                 [batch(tokens, targets, key_padding_mask=padding)])
    out = fitted.predict(batch(tokens, targets))
    np.testing.assert_allclose(out[:, :4], targets[:, :4], atol=0.01)


def test_a_per_token_task_is_refused_by_nearest_neighbour():
    tokens = RNG.normal(size=(4, 3, 1))
    with pytest.raises(ValueError, match="per token"):
        NearestNeighbour().fit([batch(tokens, tokens)], [batch(tokens, tokens)])


def test_ids_are_pooled_as_their_frequencies_and_count():
    ids = np.array([[0, 2, 2, 1], [1, 1, 1, 1]])
    padding = np.array([[False, False, False, True], [False, False, False, False]])
    data = batch(ids, [0, 1], key_padding_mask=padding)
    fitted = PooledFeatures().fit([data], [data])
    np.testing.assert_allclose(fitted.features(data), [[1 / 3, 0, 2 / 3, 3], [0, 1, 0, 4]])


def test_nearest_neighbour_pools_inputs_too_wide_to_flatten():
    tokens = RNG.normal(size=(30, 10, 3))
    data = batch(tokens, np.arange(30) % 2)
    assert NearestNeighbour().fit([data], [data]).features(data).shape == (30, 30)
    narrow = NearestNeighbour(max_features=20).fit([data], [data])
    assert narrow.features(data).shape == (30, 13), "mean, std, min, max of 3 inputs, count"
