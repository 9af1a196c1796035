"""The fit loop: learning N -> N (delayed copy), reproducibility, exact resumption from
checkpoints (also on shuffled ForecastWindows), checkpoints that load as the model fit returned,
early stopping, callbacks, generators, adapter batches (ForecastWindows' missing targets),
coordinates, progress on and off a terminal, bad input and non-finite losses."""
import io
import sys

import numpy as np
import pytest

import seqattn
from seqattn.models import TokenModel
from seqattn.nn import Module
from seqattn.train import (SGD, Adam, AdamW, EarlyStopping, LatitudeWeightedMSELoss, MSELoss,
                           NonFiniteLossError, WarmupCosine, evaluate, fit, load_checkpoint)
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
    """Dropout on, a schedule, early stopping: everything that carries state across epochs.
    Early stopping keeps the worst epoch (mode="max": the first, as the loss falls), so that
    its best weights differ from the last epoch's, where a resumed run must continue."""
    model = model or small_token_model(dropout=dropout)
    optimizer = AdamW(model, lr=3e-3)
    stopper = EarlyStopping(patience=9, mode="max")
    history = fit(model, MSELoss(), optimizer, delayed_copy(64, 0), epochs=epochs,
                  batch_size=16, validation=delayed_copy(32, 1), seed=5,
                  schedule=WarmupCosine(3e-3, 3, 12), early_stopping=stopper,
                  checkpoint=tmp_path, resume=resume, **QUIET)
    assert stopper.best_epoch < len(history["loss"]) - 1 or epochs == 1
    return model, optimizer, history


def test_training_is_reproducible_with_a_seed():
    a, _, history_a = _short_run(epochs=2)
    b, _, history_b = _short_run(epochs=2)
    _assert_same_weights(_weights(a), _weights(b))
    assert history_a == history_b


def _last_weights(checkpoint):
    """The weights a resumed run continues from."""
    model = small_token_model()
    state = load_checkpoint(checkpoint, model)
    return _weights(model), state


def test_resumed_training_ends_where_uninterrupted_training_ends(tmp_path):
    full, full_optimizer, full_history = _short_run(tmp_path / "full", epochs=4)
    _short_run(tmp_path / "run", epochs=2)
    resumed, resumed_optimizer, resumed_history = _short_run(tmp_path / "run", epochs=4,
                                                             resume=True)
    _assert_same_weights(_weights(full), _weights(resumed))
    assert resumed_history == full_history
    assert resumed_optimizer.steps == full_optimizer.steps == 16
    (full_last, _), (resumed_last, state) = (_last_weights(tmp_path / "full"),
                                             _last_weights(tmp_path / "run"))
    _assert_same_weights(full_last, resumed_last)
    assert state["epoch"] == 4


def test_the_checkpoint_loads_as_the_model_fit_returned(tmp_path):
    """With early stopping the checkpoint holds the best weights fit restored (not the last
    epoch's, which only resuming reads); without it, the last epoch's."""
    x, _ = delayed_copy(8, 2)
    model, _, _ = _short_run(tmp_path / "best", epochs=3)
    loaded = seqattn.load(tmp_path / "best")
    assert type(loaded) is TokenModel and loaded.config == model.config
    np.testing.assert_array_equal(loaded.eval()(x), model.eval()(x))
    last = small_token_model().load_state_dict(_last_weights(tmp_path / "best")[0])
    assert not np.allclose(last.eval()(x), model.eval()(x))
    plain = small_token_model()
    fit(plain, MSELoss(), SGD(plain, lr=1e-2), delayed_copy(32, 0), epochs=2,
        checkpoint=tmp_path / "plain", **QUIET)
    np.testing.assert_array_equal(seqattn.load(tmp_path / "plain").eval()(x), plain.eval()(x))


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
    """A list of tuples and dicts works like arrays; NaN targets are skipped by skip_nan; off
    a terminal a summary line per epoch goes to stdout."""
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
    files = [tmp_path / "weights.safetensors", tmp_path / "training" / "state.json"]
    before = [f.read_bytes() for f in files]
    with pytest.raises(NonFiniteLossError, match="became (inf|nan).* no checkpoint was written"):
        fit(model, MSELoss(), SGD(model, lr=1e12), (x, y * 1e20), epochs=3, checkpoint=tmp_path,
            resume=True, **QUIET)
    assert [f.read_bytes() for f in files] == before and saved["epoch"] == 1
    assert all(np.isfinite(w).all() for w in model.state_dict().values())


def test_resume_refuses_a_damaged_checkpoint_by_name_and_leaves_the_model_as_it_was(tmp_path):
    model = small_token_model()
    data = delayed_copy(32, 0)
    fit(model, MSELoss(), SGD(model, lr=1e-2), data, epochs=1, checkpoint=tmp_path, **QUIET)
    last = tmp_path / "weights.safetensors"  # where resuming continues without early stopping
    last.write_bytes(last.read_bytes()[:-4] + b"\x00\x00\x80\x7f")  # the last weight: +inf
    fresh = small_token_model(seed=1)
    before = _weights(fresh)
    with pytest.raises(ValueError, match="weights.safetensors is damaged: its sha256"):
        fit(fresh, MSELoss(), SGD(fresh, lr=1e-2), data, epochs=2, checkpoint=tmp_path,
            resume=True, **QUIET)
    _assert_same_weights(_weights(fresh), before)


def test_adapter_batches_plug_in_with_latitude_weights():
    """(adapter Batch, targets) pairs from a BatchIterator train directly; the targets keep the
    grid's gaps as NaN, which the NaN-aware latitude-weighted loss skips, and the latitudes come
    from the batches' per-token coordinates."""
    from adapters_helpers import make_grid
    from seqattn.adapters import BatchIterator, GridAdapter

    ds = make_grid(time=8, lat=8, lon=8, nan_fraction=0.1, static=False, dtype="float32")
    iterator = BatchIterator(ds, GridAdapter(["t", "u"], {"lat": 2, "lon": 2}).fit(ds),
                             input_dims={"lat": 8, "lon": 8}, batch_dims={"time": 1},
                             batch_size=4)
    pairs = [(b, np.where(b.valid, b.values, np.nan)) for b in iterator]
    features = pairs[0][0].tokens.shape[-1]
    model = small_token_model(in_features=features, out_features=pairs[0][1].shape[-1],
                              max_len=16)
    history = fit(model, LatitudeWeightedMSELoss(skip_nan=True), Adam(model, lr=3e-3), pairs,
                  epochs=4, **QUIET)
    assert np.isfinite(history["loss"]).all() and history["loss"][-1] < history["loss"][0]
    with pytest.raises(ValueError, match="an adapter batch without targets .* yield "
                                         r"\(batch, targets\) pairs"):
        fit(model, LatitudeWeightedMSELoss(skip_nan=True), Adam(model), iterator, **QUIET)


def _batches_of(x, y, size=8):
    """A generator function: each call yields (inputs, targets) batches anew."""
    def batches():
        for start in range(0, len(x), size):
            yield x[start:start + size], y[start:start + size]
    return batches


def test_generators_serve_one_epoch_and_callables_every_epoch():
    x, y = delayed_copy(32, 0)
    batches = _batches_of(x, y)
    from_callable, from_list = small_token_model(), small_token_model()
    fit(from_callable, MSELoss(), SGD(from_callable, lr=1e-2), batches, epochs=2, **QUIET)
    fit(from_list, MSELoss(), SGD(from_list, lr=1e-2), list(batches()), epochs=2, **QUIET)
    _assert_same_weights(_weights(from_callable), _weights(from_list))
    model = small_token_model()
    fit(model, MSELoss(), SGD(model, lr=1e-2), batches(), validation=batches(), **QUIET)
    with pytest.raises(ValueError, match=r"data is an iterator .* one epoch used up; for several "
                                         r"epochs pass a callable"):
        fit(model, MSELoss(), SGD(model, lr=1e-2), batches(), epochs=2, **QUIET)
    with pytest.raises(ValueError, match="validation is an iterator"):
        fit(model, MSELoss(), SGD(model, lr=1e-2), batches, validation=batches(), epochs=2,
            **QUIET)
    with pytest.raises(TypeError, match="data is a callable, so it should return an iterable"):
        fit(model, MSELoss(), SGD(model, lr=1e-2), lambda: 3, **QUIET)


def test_progress_off_a_terminal_is_one_line_per_epoch(capsys):
    x, y = delayed_copy(32, 0)
    model = small_token_model()
    fit(model, MSELoss(), SGD(model, lr=1e-2), _batches_of(x, y), epochs=3,
        validation=(x[:8], y[:8]))
    out, err = capsys.readouterr()
    lines = out.splitlines()
    assert len(lines) == 3 and err == "" and "\r" not in out
    for epoch, line in enumerate(lines, 1):
        assert line.startswith(f"epoch {epoch}/3: loss ") and ", val_loss " in line


class Terminal(io.StringIO):
    def isatty(self):
        return True


@pytest.mark.parametrize("sized", [True, False])
def test_progress_on_a_terminal_is_a_bar_per_epoch(sized, monkeypatch, capsys):
    """A list has a length, so the bar shows 4/4; a generator function's batches are counted
    without a total."""
    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    x, y = delayed_copy(32, 0)
    batches = _batches_of(x, y)
    model = small_token_model()
    fit(model, MSELoss(), SGD(model, lr=1e-2), list(batches()) if sized else batches, epochs=2)
    bars = terminal.getvalue()
    assert "\r" in bars and "epoch 1/2" in bars and "epoch 2/2" in bars
    counted = {"with a total": "| 4/4 [", "without": ": 4it ["}  # tqdm's two formats
    assert (counted["with a total"] in bars) == sized and (counted["without"] in bars) != sized
    assert "lr " in bars.rsplit("epoch 2/2", 1)[1]  # the epoch's line ends with its logs
    assert capsys.readouterr().out == ""


def _forecast_windows(**options):
    from adapters_helpers import make_grid
    from seqattn.adapters import ForecastWindows, GridAdapter

    ds = make_grid(time=10, lat=4, lon=4, nan_fraction=0.2, static=False, dtype="float32")
    windows = ForecastWindows(GridAdapter(["t", "u"], {"lat": 2, "lon": 2}), leads=[1, 2],
                              history=1).fit(ds)
    return windows.batches(ds, batch_size=4, **options)


def _forecast_model(batch, **options):
    return small_token_model(in_features=batch.tokens.shape[-1],
                             out_features=batch.targets.shape[-1], max_len=batch.tokens.shape[1],
                             **options)


def test_resuming_on_shuffled_forecast_windows_sees_the_batches_of_an_uninterrupted_run(
        tmp_path):
    """ForecastWindows counts its passes for its shuffled order; fit asks for epoch(e) instead,
    so a resumed run (fresh windows, interrupted after 2 epochs) trains on the same batches."""
    def run(epochs, folder, resume=False):
        windows = _forecast_windows(shuffle=True, seed=4)
        model = _forecast_model(next(iter(windows.epoch(0))), dropout=0.1)
        history = fit(model, MSELoss(skip_nan=True), AdamW(model, lr=3e-3), windows,
                      epochs=epochs, validation=_forecast_windows(shuffle=True, seed=5),
                      checkpoint=tmp_path / folder, resume=resume, **QUIET)
        return model, history

    full, full_history = run(4, "full")
    run(2, "run")
    resumed, resumed_history = run(4, "run", resume=True)
    _assert_same_weights(_weights(full), _weights(resumed))
    assert resumed_history == full_history


def test_forecast_windows_train_with_missing_targets_counting_for_nothing():
    """The model encodes the windows' lat/lon and lead coordinates, which fit passes."""
    windows = _forecast_windows(shuffle=True, seed=0)
    batches = list(windows)
    assert not all(b.target_valid.all() for b in batches)
    model = _forecast_model(batches[0], coordinates=("latlon", "lead"))
    history = fit(model, MSELoss(skip_nan=True), Adam(model, lr=3e-3), windows, epochs=3,
                  validation=windows, **QUIET)
    assert np.isfinite(history["val_loss"]).all() and history["loss"][-1] < history["loss"][0]
    model.eval()
    squares = [((model(b.tokens, key_padding_mask=b.key_padding_mask, coords=b.coords)
                 - b.targets) ** 2)[b.target_valid] for b in batches]
    np.testing.assert_allclose(evaluate(model, MSELoss(skip_nan=True), batches)["loss"],
                               np.concatenate(squares).mean(), rtol=1e-5)
    with pytest.raises(ValueError, match=r"targets contain NaN .*target_valid.*\(skip_nan=True\)"):
        fit(model, MSELoss(), Adam(model), windows, **QUIET)


class CoordsModel(Module):
    """A user's model whose forward takes coords: it records what it was given."""

    def __init__(self):
        super().__init__()
        self.inner = small_token_model(max_len=16)
        self.seen = []

    def forward(self, tokens, key_padding_mask=None, coords=None):
        self.seen.append(coords)
        return self.inner(tokens, key_padding_mask)


def test_coords_reach_models_whose_forward_takes_them():
    x, y = delayed_copy(8, 0)
    time = np.arange(8 * 12, dtype=np.float64).reshape(8, 12)
    model = CoordsModel()
    batches = [{"inputs": x, "targets": y, "coords": {"time": time}}]
    fit(model, MSELoss(), SGD(model, lr=1e-2), batches, **QUIET)
    evaluate(model, MSELoss(), batches)
    assert len(model.seen) == 2 and all(seen["time"] is time for seen in model.seen)
    fit(model, MSELoss(), SGD(model, lr=1e-2), (x, y), **QUIET)
    assert model.seen[-1] is None  # array data has no coordinates
