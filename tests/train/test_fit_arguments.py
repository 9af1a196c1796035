"""fit and predict hand a model the same keyword arguments: one rule (seqattn.nn.call_arguments)
decides whether a forward takes ``coords``, so a model trained with coordinates gets them at
prediction time too, and the other way round."""
import numpy as np

import seqattn.nn as nn
from seqattn.data.batch import Batch
from seqattn.data.model_call import ModelCall
from seqattn.train import SGD, MSELoss, TrainingBatch, fit


class SeesKeywords(nn.Module):
    """A linear model that records which keyword arguments each call got."""

    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(3, 1, seed=0)
        self.seen = []

    def forward(self, inputs, key_padding_mask=None, **options):
        self.seen.append(sorted(options))
        return self.linear(inputs)


def _batch():
    rng = np.random.default_rng(0)
    tokens = rng.standard_normal((2, 4, 3)).astype(np.float32)
    coords = {"time": np.arange(8, dtype=np.float64).reshape(2, 4)}
    return tokens, coords


def test_a_forward_with_keyword_options_gets_coords_in_fit_and_in_predict():
    tokens, coords = _batch()
    model = SeesKeywords()
    fit(model, MSELoss(), SGD(model.parameters(), lr=0.01),
        [TrainingBatch(tokens, np.zeros((2, 4, 1), np.float32), None, coords)], progress=False)
    in_training = model.seen[-1]
    ModelCall(model)(Batch(tokens=tokens, key_padding_mask=np.zeros((2, 4), bool),
                           valid=np.ones((2, 4, 3), bool), coords=coords, placement=None))
    assert in_training == ["coords"]
    assert model.seen[-1] == in_training
