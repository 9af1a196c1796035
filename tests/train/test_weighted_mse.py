"""WeightedMSELoss against the weighted mean by hand, per sample and per token, with its
gradient; the weights come from the adapters' batches."""
import numpy as np
import pytest

from seqattn.train.weighted_mse import WeightedMSELoss


def test_per_sample_weights_give_the_weighted_mean_and_its_gradient():
    pred = np.array([[1.0], [2.0], [0.0]])
    target = np.array([[0.0], [4.0], [3.0]])
    weight = np.repeat(np.array([[1.0], [0.25], [0.0]]), 5, axis=1)  # (B, N) as in a batch
    loss = WeightedMSELoss()
    value = loss(pred, target, {"weight": weight})
    w = np.array([1.0, 0.25, 0.0])
    np.testing.assert_allclose(value, (w * (pred[:, 0] - target[:, 0]) ** 2).sum() / w.sum())
    np.testing.assert_allclose(np.asarray(loss.backward())[:, 0],
                               2 * w * (pred[:, 0] - target[:, 0]) / w.sum())


def test_per_token_weights_and_missing_ones_are_named():
    pred = np.zeros((1, 3, 1))
    target = np.array([[[1.0], [2.0], [np.nan]]])
    weight = np.array([[3.0, 1.0, 5.0]])
    value = WeightedMSELoss(skip_nan=True)(pred, target, {"weight": weight})
    np.testing.assert_allclose(value, (3 * 1 + 1 * 4) / 4)
    with pytest.raises(ValueError, match="adapter.batches\\(ds, weights=<variable>\\)"):
        WeightedMSELoss()(pred, target, {})
