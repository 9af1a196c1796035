"""EarlyStopping(include_start=True): fit scores the model as given before the first epoch, so a
model started at the best linear map is kept when training only makes it worse, while a model
that training improves keeps its trained weights; misuse is named."""
import numpy as np
import pytest

from seqattn.models import TokenModel, TokenModelConfig
from seqattn.train import SGD, EarlyStopping, MSELoss, fit
from train_tasks import one_numba_thread  # noqa: F401  (tiny shapes run faster on one thread)

RNG = np.random.default_rng(11)
WEIGHT, BIAS = RNG.normal(size=(1, 3)), RNG.normal(size=1)
TINY = dict(d_model=8, nhead=2, num_layers=1, dim_feedforward=8, dtype="float64")


def linear_data(samples, noise=0.0):
    """Targets that are the linear map of the inputs, plus `noise`: without it the started model
    is the best there is; the noisy training targets pull training away from it."""
    x = RNG.normal(size=(samples, 4, 3))
    return x, x @ WEIGHT.T + BIAS + noise * RNG.normal(size=(samples, 4, 1))


def weights(model):
    return {name: p.data.copy() for name, p in model.named_parameters()}


def started_model():
    model = TokenModel(TokenModelConfig(in_features=3, out_features=1, linear=True, **TINY))
    model.start_from_linear(WEIGHT, BIAS)
    return model


def run(model, stopper, lr):
    return fit(model, MSELoss(), SGD(model, lr=lr), linear_data(16, noise=1.0),
               validation=linear_data(8),
               epochs=3, early_stopping=stopper, progress=False, batch_size=8)


def test_a_started_model_that_training_only_worsens_is_kept():
    model = started_model()
    start = weights(model)
    stopper = EarlyStopping(patience=5, include_start=True)
    history = run(model, stopper, lr=0.5)  # steps far too long: every epoch is worse
    assert min(history["val_loss"]) > 1e-6, history
    assert stopper.best_epoch == -1 and stopper.best < 1e-20, (stopper.best_epoch, stopper.best)
    for name, value in weights(model).items():
        np.testing.assert_array_equal(value, start[name], err_msg=name)
    assert len(history["loss"]) == 3  # the start is not an epoch of the history

    without = started_model()
    run(without, EarlyStopping(patience=5), lr=0.5)
    assert any(not np.array_equal(value, start[name]) for name, value in weights(without).items())


def test_a_model_that_training_improves_keeps_its_trained_weights():
    model = TokenModel(TokenModelConfig(in_features=3, out_features=1, linear=True, **TINY))
    stopper = EarlyStopping(patience=5, include_start=True)
    history = run(model, stopper, lr=0.05)
    assert stopper.best_epoch == int(np.argmin(history["val_loss"])) >= 0, history
    assert stopper.best == min(history["val_loss"])


def test_include_start_needs_validation_to_score_the_start():
    with pytest.raises(ValueError, match="include_start.*monitor='loss'"):
        EarlyStopping(monitor="loss", include_start=True)
    model = started_model()
    with pytest.raises(ValueError, match="include_start.*pass validation="):
        fit(model, MSELoss(), SGD(model, lr=0.1), linear_data(8), epochs=1, progress=False,
            early_stopping=EarlyStopping(include_start=True))
