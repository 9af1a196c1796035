"""fit refuses an optimizer that could not train the model: one that is not an optimizer of
seqattn.train, and one built over another model's parameters, which would leave the model
silently untrained."""
import numpy as np
import pytest

import seqattn.nn as nn
from seqattn.train import AdamW, MSELoss, fit


def _data():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((8, 3)).astype(np.float32)
    return x, x[:, :1].copy()


def test_an_optimizer_over_another_model_is_an_error_that_says_so():
    model, other = nn.Linear(3, 1, seed=0), nn.Linear(3, 1, seed=0)
    weights = model.weight.data.copy()
    with pytest.raises(ValueError, match="optimizer updates none of the model's parameters"):
        fit(model, MSELoss(), AdamW(other, lr=1e-2), _data(), progress=False)
    np.testing.assert_array_equal(model.weight.data, weights)


@pytest.mark.parametrize("optimizer", ["adam", None, 1e-3])
def test_an_optimizer_that_is_not_one_of_seqattn_train_is_an_error_naming_it(optimizer):
    model = nn.Linear(3, 1, seed=0)
    with pytest.raises(TypeError, match="optimizer must be an optimizer of seqattn.train"):
        fit(model, MSELoss(), optimizer, _data(), progress=False)


def test_an_optimizer_over_some_of_the_model_trains_them():
    model = nn.Sequential(nn.Linear(3, 4, seed=0), nn.Linear(4, 1, seed=1))
    first, last = (layer.weight.data.copy() for layer in (model[0], model[1]))
    fit(model, MSELoss(), AdamW(model[1].parameters(), lr=1e-2), _data(), epochs=2,
        progress=False)
    np.testing.assert_array_equal(model[0].weight.data, first)
    assert not np.array_equal(model[1].weight.data, last)
