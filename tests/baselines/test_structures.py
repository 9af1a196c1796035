"""Element counts: counted by hand, and ridge on them recovers additive per-element values."""
import numpy as np

from baseline_batches import molecule_batch
from seqattn.baselines import ElementCounts

RNG = np.random.default_rng(5)
PER_TYPE = np.array([1.5, -0.5, 2.0])


def additive(samples):
    types = RNG.integers(0, 3, size=(samples, 7))
    padding = RNG.random((samples, 7)) < 0.3
    values = np.where(padding, 0.0, PER_TYPE[types]).sum(axis=1)
    return molecule_batch(types, values[:, None], key_padding_mask=padding)


def test_counts_skip_padding_and_types_unseen_in_training():
    fitted = ElementCounts().fit([additive(40)], [additive(20)])
    probe = molecule_batch(np.array([[0, 0, 2, 5]]), np.zeros((1, 1)),
                           key_padding_mask=np.array([[False, False, False, True]]))
    assert fitted.features(probe).tolist() == [[2.0, 0.0, 1.0, 3.0]]


def test_ridge_on_counts_recovers_additive_values():
    fitted = ElementCounts().fit([additive(200)], [additive(50)])
    test = additive(30)
    np.testing.assert_allclose(fitted.predict(test), test.targets, atol=0.05)
