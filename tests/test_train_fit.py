"""The fit loop: learning N -> N (delayed copy), reproducibility, exact resumption from
checkpoints, early stopping, callbacks, adapter batches, bad input and non-finite losses."""
import numpy as np
import pytest

from seqattn.train import (SGD, Adam, AdamW, EarlyStopping, LatitudeWeightedMSELoss, MSELoss,
                           NonFiniteLossError, WarmupCosine, evaluate, fit, load_checkpoint,
                           load_model)
from train_tasks import delayed_copy, one_numba_thread, small_token_model  # noqa: F401

QUIET = dict(progress=False)


def _weights(model):
    return model.state_dict()


def _assert_same_weights(a, b):
    for name in a:
        np.testing.assert_array_equal(a[name], b[name], err_msg=name)


def test_token_model_learns_a_delayed_copy():
    """N -> N bar: validation MSE below 0.08, against 0.75 for predicting zeros."""
    model = small_token_model()
    epochs, steps = 14, 16
    history = fit(model, MSELoss(), Adam(model, lr=1e-2), delayed_copy(512, 0), epochs=epochs,
                  batch_size=32, validation=delayed_copy(128, 1),
                  schedule=WarmupCosine(1e-2, 20, epochs * steps), **QUIET)
    assert history["val_loss"][-1] < 0.08, history["val_loss"]
    assert history["loss"][-1] < history["loss"][0] / 10


def _short_run(tmp_path=None, epochs=3, resume=False, dropout=0.1, model=None):
    model = model or small_token_model(dropout=dropout)
    optimizer = AdamW(model, lr=3e-3)
    history = fit(model, MSELoss(), optimizer, delayed_copy(64, 0), epochs=epochs,
                  batch_size=16, validation=delayed_copy(32, 1), seed=5,
                  schedule=WarmupCosine(3e-3, 3, 12), early_stopping=EarlyStopping(patience=9),
                  checkpoint=tmp_path, resume=resume, **QUIET)
    return model, optimizer, history


def test_training_is_reproducible_with_a_seed():
    a, _, history_a = _short_run(epochs=2)
    b, _, history_b = _short_run(epochs=2)
    _assert_same_weights(_weights(a), _weights(b))
    assert history_a == history_b


def test_resumed_training_ends_where_uninterrupted_training_ends(tmp_path):
    """Dropout on, a schedule, early stopping: everything that carries state across epochs."""
    full, full_optimizer, full_history = _short_run(epochs=4)
    _short_run(tmp_path / "run", epochs=2)
    resumed, resumed_optimizer, resumed_history = _short_run(tmp_path / "run", epochs=4,
                                                             resume=True)
    _assert_same_weights(_weights(full), _weights(resumed))
    assert resumed_history == full_history
    assert resumed_optimizer.steps == full_optimizer.steps == 16
    state = load_checkpoint(tmp_path / "run", small_token_model())
    assert state["epoch"] == 4 and state["model"]["type"] == "TokenModel"
    assert state["model"]["config"]["d_model"] == 32
    _assert_same_weights(_weights(load_model(tmp_path / "run")), _weights(resumed))


def test_early_stopping_restores_the_best_weights_and_callbacks_can_stop():
    model = small_token_model()
    seen = []

    def stop_after_two(state):
        seen.append(state.epoch)
        state.stop_training = state.epoch == 2

    stopper = EarlyStopping(patience=1, monitor="val_loss")
    history = fit(model, MSELoss(), SGD(model, lr=1e-3), delayed_copy(32, 0), epochs=5,
                  validation=delayed_copy(32, 1), early_stopping=stopper,
                  callbacks=[stop_after_two], **QUIET)
    assert seen == [1, 2] and len(history["loss"]) == 2
    _assert_same_weights(_weights(model), stopper.best_weights)
    np.testing.assert_allclose(evaluate(model, MSELoss(), delayed_copy(32, 1))["loss"],
                               min(history["val_loss"]), rtol=1e-6)


def test_iterables_of_batches_nan_targets_and_progress(capsys):
    """A list of tuples and dicts works like arrays; NaN targets are skipped by skip_nan; the
    progress bar goes to stderr and a summary line per epoch to stdout."""
    x, y = delayed_copy(32, 0)
    y[:, :2] = np.nan
    batches = [(x[:16], y[:16]), {"inputs": x[16:], "targets": y[16:]}]
    model = small_token_model()
    history = fit(model, MSELoss(skip_nan=True), Adam(model, lr=1e-3), batches, epochs=2)
    assert np.isfinite(history["loss"]).all()
    assert capsys.readouterr().out.splitlines()[-1].startswith("epoch 2/2: loss ")
    with pytest.raises(ValueError, match="targets contain NaN .* use its NaN-aware form"):
        fit(model, MSELoss(), Adam(model, lr=1e-3), batches, **QUIET)


def test_bad_input_is_reported():
    model = small_token_model()
    x, y = delayed_copy(8, 0)
    optimizer = Adam(model)
    bad = x.copy()
    bad[0, 0, 0] = np.nan
    with pytest.raises(ValueError, match=r"inputs contain NaN \(epoch 1, batch 0\)"):
        fit(model, MSELoss(), optimizer, (bad, y), **QUIET)
    with pytest.raises(ValueError, match="the training data is empty"):
        fit(model, MSELoss(), optimizer, (x[:0], y[:0]), **QUIET)
    with pytest.raises(ValueError, match="the training data is empty"):
        fit(model, MSELoss(), optimizer, [], **QUIET)
    with pytest.raises(ValueError, match=r"target has shape \(8, 12\); expected pred.shape"):
        fit(model, MSELoss(), optimizer, (x, y[..., 0]), **QUIET)
    with pytest.raises(TypeError, match="target has dtype int64"):
        fit(model, MSELoss(), optimizer, (x, y.astype(np.int64)), **QUIET)


def test_non_finite_loss_stops_without_touching_the_checkpoint(tmp_path):
    model = small_token_model()
    x, y = delayed_copy(64, 0)
    fit(model, MSELoss(), SGD(model, lr=1e-3), (x, y), epochs=1, checkpoint=tmp_path, **QUIET)
    saved = load_checkpoint(tmp_path, small_token_model())
    before = (tmp_path / "model.safetensors").read_bytes()
    with pytest.raises(NonFiniteLossError, match="became (inf|nan).* no checkpoint was written"):
        fit(model, MSELoss(), SGD(model, lr=1e12), (x, y * 1e20), epochs=3, checkpoint=tmp_path,
            resume=True, **QUIET)
    assert (tmp_path / "model.safetensors").read_bytes() == before and saved["epoch"] == 1
    assert all(np.isfinite(w).all() for w in model.state_dict().values())


def test_adapter_batches_plug_in_with_latitude_weights():
    """(adapter Batch, targets) pairs from a BatchIterator train directly; the targets keep the
    grid's gaps as NaN, which the NaN-aware latitude-weighted loss skips, and the latitudes come
    from the batches' per-token coordinates."""
    from adapters_helpers import make_grid
    from seqattn.adapters import BatchIterator, GridAdapter

    ds = make_grid(time=8, lat=8, lon=8, nan_fraction=0.1, static=False, dtype="float32")
    iterator = BatchIterator(ds, GridAdapter(["t", "u"], {"lat": 2, "lon": 2}),
                             input_dims={"lat": 8, "lon": 8}, batch_dims={"time": 1},
                             batch_size=4)
    pairs = [(b, np.where(b.valid, b.values, np.nan)) for b in iterator]
    features = pairs[0][0].tokens.shape[-1]
    model = small_token_model(in_features=features, out_features=pairs[0][1].shape[-1],
                              max_len=16)
    history = fit(model, LatitudeWeightedMSELoss(skip_nan=True), Adam(model, lr=3e-3), pairs,
                  epochs=4, **QUIET)
    assert np.isfinite(history["loss"]).all() and history["loss"][-1] < history["loss"][0]
