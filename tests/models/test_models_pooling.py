"""N -> 1: pooling heads (gradients, padding; their kernels on CUDA are checked in the op
table) and a sequence model that learns a property of the whole sequence with each head."""
import numpy as np
import pytest

from gradcheck import check_module_gradients
from seqattn import ops
from seqattn.models import SequenceModel, SequenceModelConfig
from seqattn.models.pooling import AttentionPooling, ClassTokenPooling, MaskedMeanPooling
from seqattn.train import Adam, BCEWithLogitsLoss, WarmupCosine, fit
from train_tasks import (SUM_LENGTH, binary_accuracy, one_numba_thread,  # noqa: F401
                         sign_of_sum)

RNG = np.random.default_rng(0)
X = RNG.normal(size=(3, 5, 4))
PADDING = np.zeros((3, 5), bool)
PADDING[0, 3:] = True
PADDING[2, :] = True  # a sequence that is all padding pools to zeros, not NaN


@pytest.mark.parametrize("head", [MaskedMeanPooling(), ClassTokenPooling(),
                                  AttentionPooling(4, 2, dtype=np.float64, seed=0)],
                         ids=["mean", "cls", "attention"])
def test_pooling_gradients(head):
    check_module_gradients(head, lambda x: head(x, PADDING), lambda d: {"x": head.backward(d)},
                           {"x": X.copy()})


def test_masked_mean_ignores_padding():
    pooled = ops.masked_mean(X, PADDING)
    np.testing.assert_allclose(pooled[0], X[0, :3].mean(0))
    assert not pooled[2].any()


@pytest.mark.parametrize("pooling", ["cls", "attention"])
def test_sequence_model_gradients(pooling):
    config = SequenceModelConfig(in_features=4, d_model=8, nhead=2, num_layers=1,
                                 dim_feedforward=8, pooling=pooling, dtype="float64")
    model = SequenceModel(config)
    padding = PADDING.copy()
    padding[2, 0] = False
    check_module_gradients(model, lambda x: model(x, padding),
                           lambda d: {"x": model.backward(d)}, {"x": X.copy()})


@pytest.mark.parametrize("pooling", ["mean", "cls", "attention"])
def test_sequence_model_learns_the_sign_of_a_sum(pooling):
    """N -> 1 bar: validation accuracy above 0.95 (guessing: 0.5), padded sequences of 8-16."""
    config = SequenceModelConfig(in_features=1, d_model=16, nhead=2, num_layers=1,
                                 dim_feedforward=32, max_len=SUM_LENGTH, pooling=pooling)
    model = SequenceModel(config)
    epochs = 8
    history = fit(model, BCEWithLogitsLoss(), Adam(model, lr=1e-2), sign_of_sum(512, 0),
                  epochs=epochs, batch_size=32, validation=sign_of_sum(256, 1),
                  metrics={"accuracy": binary_accuracy},
                  schedule=WarmupCosine(1e-2, 10, epochs * 16), progress=False)
    assert history["val_accuracy"][-1] > 0.95, history["val_accuracy"]
