"""The library's own path, end to end, per adapter: Dataset -> adapter -> task model -> fit ->
predict back onto the Dataset -> seqattn.save -> seqattn.load -> predict again, identical; fit's
checkpoint loads as the model fit returned; and a training step of the forecast path on the
CUDA simulator agrees with the CPU."""
import numpy as np
import pytest
import xarray as xr

import seqattn
from adapters_helpers import make_grid, make_signal
from seqattn.adapters import BatchIterator, ForecastWindows, GridAdapter, SignalAdapter, predict
from seqattn.models import SequenceModel, SequenceModelConfig, TokenModel, TokenModelConfig
from seqattn.train import AdamW, EarlyStopping, MSELoss, fit

SIZES = dict(d_model=16, nhead=2, num_layers=1, dim_feedforward=32, seed=0)


def _reloaded(tmp_path, *objects):
    loaded = []
    for i, obj in enumerate(objects):
        seqattn.save(obj, tmp_path / f"object{i}")
        loaded.append(seqattn.load(tmp_path / f"object{i}"))
    return loaded


def test_grid_path(tmp_path):
    """N -> N on a grid: the model learns to give each cell's values back (its inputs are
    normalized tokens, its outputs decode to physical units with NaN where data were missing)."""
    ds = make_grid(time=4, lat=4, lon=4, nan_fraction=0.1, dtype="float32")
    adapter = GridAdapter(["t", "u"], {"lat": 2, "lon": 2}, calendar=True).fit(ds)
    iterator = BatchIterator(ds, adapter, batch_size=2)
    pairs = [(batch, batch.values) for batch in iterator]
    model = TokenModel(TokenModelConfig(in_features=pairs[0][0].tokens.shape[-1],
                                        out_features=8, coordinates=["latlon", "time_of_day"],
                                        **SIZES))
    history = fit(model, MSELoss(), AdamW(model, lr=3e-3), pairs, epochs=3, progress=False)
    assert history["loss"][-1] < history["loss"][0]
    out = predict(model, ds, adapter)
    assert set(out.data_vars) == {"t", "u"} and out["t"].attrs == ds["t"].attrs
    xr.testing.assert_equal(out["t"].isnull(), ds["t"].isnull())
    model_again, adapter_again = _reloaded(tmp_path, model, adapter)
    xr.testing.assert_identical(predict(model_again, ds, adapter_again), out)


def test_signal_path(tmp_path):
    """N -> 1 on station series: one value per window, back on (station, window start)."""
    ds = make_signal(length=48, stations=3, start="2021-06-01")
    adapter = SignalAdapter(["x"], window="6h", hop="6h", calendar=True).fit(ds)
    batch = adapter.encode(ds)
    window_means = np.nanmean(np.where(batch.valid, batch.values, np.nan), axis=(1, 2))[:, None]
    model = SequenceModel(SequenceModelConfig(in_features=batch.tokens.shape[-1], out_features=1,
                                              pooling="attention", positions="rope",
                                              coordinates=["time_of_day"], **SIZES))
    fit(model, MSELoss(), AdamW(model, lr=3e-3), [(batch, window_means.astype(np.float32))],
        epochs=3, progress=False)
    out = predict(model, ds, adapter, per_sample=True)
    assert out["prediction"].shape[-1] == 1
    model_again, adapter_again = _reloaded(tmp_path, model, adapter)
    xr.testing.assert_identical(predict(model_again, ds, adapter_again, per_sample=True), out)


def _forecast_set_up(dtype="float32", batch_size=8, sizes=SIZES):
    ds = make_grid(time=12, lat=4, lon=4, nan_fraction=0.05, dtype=dtype, static=False)
    adapter = GridAdapter(["t"], {"lat": 2, "lon": 2}, calendar=True).fit(ds)
    windows = ForecastWindows(ds, adapter, leads=["6h", "12h"], history=1, increments=True,
                              batch_size=batch_size, shuffle=True, seed=0)
    batch = next(iter(windows))
    model = TokenModel(TokenModelConfig(in_features=batch.tokens.shape[-1],
                                        out_features=batch.targets.shape[-1], dtype=dtype,
                                        coordinates=["latlon", "lead"], causal=True, **sizes))
    return ds, adapter, windows, model


def test_forecast_path_with_checkpoint(tmp_path):
    """Forecast windows in, a Dataset with a lead dim on valid times out; the checkpoint folder
    loads as exactly the model fit returned (the best epoch's weights)."""
    ds, adapter, windows, model = _forecast_set_up()
    fit(model, MSELoss(skip_nan=True), AdamW(model, lr=3e-3), windows, epochs=4,
        validation=windows, early_stopping=EarlyStopping(patience=2),
        checkpoint=tmp_path / "run", progress=False)
    out = windows.predict(model)
    assert out["t"].dims[0] == "lead" and out.sizes["lead"] == 2
    assert out["t"].attrs == ds["t"].attrs
    checkpointed = seqattn.load(tmp_path / "run")
    xr.testing.assert_identical(windows.predict(checkpointed), out)
    model_again, windows_again = (seqattn.load(p, ds=ds) if i else seqattn.load(p)
                                  for i, p in enumerate(_saved(tmp_path, model, windows)))
    xr.testing.assert_identical(windows_again.predict(model_again), out)
    # the same batches: another batch size may round float32 sums in another order
    xr.testing.assert_identical(predict(model_again, ds, windows_again,
                                        batch_size=windows.batch_size), out)


def _saved(tmp_path, *objects):
    paths = []
    for i, obj in enumerate(objects):
        seqattn.save(obj, tmp_path / f"saved{i}")
        paths.append(tmp_path / f"saved{i}")
    return paths


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")
def test_a_forecast_training_step_on_the_gpu_matches_the_cpu():
    # the simulator runs kernels as Python: a batch of 2 samples of 4 tokens, a narrow model
    _, _, windows, model = _forecast_set_up("float64", batch_size=2,
                                            sizes=dict(SIZES, d_model=8, dim_feedforward=8))
    one_batch = [next(iter(windows))]
    gpu_model = TokenModel(model.config).to("cuda")  # the same config: the same initial weights
    cpu_history = fit(model, MSELoss(skip_nan=True), AdamW(model, lr=1e-3), one_batch,
                      epochs=1, progress=False)
    gpu_history = fit(gpu_model, MSELoss(skip_nan=True), AdamW(gpu_model, lr=1e-3), one_batch,
                      epochs=1, progress=False)
    np.testing.assert_allclose(gpu_history["loss"], cpu_history["loss"], rtol=1e-9)
    for (name, cpu), (_, gpu) in zip(model.state_dict().items(),
                                     gpu_model.state_dict().items()):
        np.testing.assert_allclose(gpu, cpu, rtol=1e-7, atol=1e-9, err_msg=name)
