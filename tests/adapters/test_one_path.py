"""The library's own path, end to end, per adapter: Dataset -> adapter -> task model -> fit ->
predict back onto the Dataset -> seqattn.save -> seqattn.load -> predict again, identical; fit's
checkpoint loads as the model fit returned; and a training step of the forecast path on the
CUDA simulator agrees with the CPU."""
import numpy as np
import pytest
import xarray as xr

import seqattn
from adapters_helpers import make_grid, make_signal
from seqattn.adapters import ForecastWindows, GridAdapter, SignalAdapter, predict
from seqattn.models import TokenModel, build
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
    pairs = [(batch, batch.values) for batch in adapter.batches(ds, batch_size=2)]
    model = build(adapter.model_config(coordinates=["latlon", "time_of_day"], **SIZES))
    history = fit(model, MSELoss(), AdamW(model, lr=3e-3), pairs, epochs=3, progress=False)
    assert history["loss"][-1] < history["loss"][0]
    out = predict(model, ds, adapter)
    assert set(out.data_vars) == {"t", "u"} and out["t"].attrs == ds["t"].attrs
    xr.testing.assert_equal(out["t"].isnull(), ds["t"].isnull())
    model_again, adapter_again = _reloaded(tmp_path, model, adapter)
    xr.testing.assert_identical(predict(model_again, ds, adapter_again), out)


def test_signal_path(tmp_path):
    """N -> 1 on station series: one value per station (its mean), fitted on two stations,
    back on the station dim in the target's units."""
    ds = make_signal(length=48, stations=3, start="2021-06-01")
    ds["level"] = ("station", ds.x.mean("time").values, {"units": "m"})
    adapter = SignalAdapter(["x"], window="6h", hop="6h", calendar=True)
    adapter.fit(ds, targets="level", where={"station": [0, 1]})
    model = build(adapter.model_config(pooling="attention", positions="rope",
                                       coordinates=["time_of_day"], **SIZES))
    fit(model, MSELoss(skip_nan=True), AdamW(model, lr=3e-3),
        adapter.batches(ds, where={"station": [0, 1]}), epochs=3, progress=False)
    out = predict(model, ds, adapter)
    assert out["level"].dims == ("station",) and out["level"].attrs["units"] == "m"
    model_again, adapter_again = _reloaded(tmp_path, model, adapter)
    xr.testing.assert_identical(predict(model_again, ds, adapter_again), out)


def _forecast_set_up(dtype="float32", batch_size=8, sizes=SIZES):
    ds = make_grid(time=12, lat=4, lon=4, nan_fraction=0.05, dtype=dtype, static=False)
    windows = ForecastWindows(GridAdapter(["t"], {"lat": 2, "lon": 2}, calendar=True),
                              leads=["6h", "12h"], history=1, increments=True).fit(ds)
    batches = windows.batches(ds, batch_size=batch_size, shuffle=True, seed=0)
    model = build(windows.model_config(dtype=dtype, coordinates=["latlon", "lead"], causal=True,
                                       **sizes))
    return ds, windows, batches, model


def test_forecast_path_with_checkpoint(tmp_path):
    """Forecast windows in, a Dataset with a lead dim on valid times out; the checkpoint folder
    loads as exactly the model fit returned (the best epoch's weights)."""
    ds, windows, batches, model = _forecast_set_up()
    fit(model, MSELoss(skip_nan=True), AdamW(model, lr=3e-3), batches, epochs=4,
        validation=batches, early_stopping=EarlyStopping(patience=2),
        checkpoint=tmp_path / "run", progress=False)
    out = predict(model, ds, windows, batch_size=batches.batch_size)
    assert out["t"].dims[0] == "lead" and out.sizes["lead"] == 2
    assert out["t"].attrs == ds["t"].attrs
    checkpointed = seqattn.load(tmp_path / "run")
    # the same batches: another batch size may round float32 sums in another order
    xr.testing.assert_identical(predict(checkpointed, ds, windows,
                                        batch_size=batches.batch_size), out)
    model_again, windows_again = _reloaded(tmp_path, model, windows)
    xr.testing.assert_identical(ds.seqattn.predict(model_again, windows_again,
                                                   batch_size=batches.batch_size), out)
    with pytest.raises(ValueError, match="the model reads 13 features per token but this "
                                         "GridAdapter makes 9; it encodes lead times"):
        ds.seqattn.predict(model, windows.adapter)


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")
def test_a_forecast_training_step_on_the_gpu_matches_the_cpu():
    # the simulator runs kernels as Python: a batch of 2 samples of 4 tokens, a narrow model
    _, _, batches, model = _forecast_set_up("float64", batch_size=2,
                                            sizes=dict(SIZES, d_model=8, dim_feedforward=8))
    one_batch = [next(iter(batches))]
    gpu_model = TokenModel(model.config).to("cuda")  # the same config: the same initial weights
    cpu_history = fit(model, MSELoss(skip_nan=True), AdamW(model, lr=1e-3), one_batch,
                      epochs=1, progress=False)
    gpu_history = fit(gpu_model, MSELoss(skip_nan=True), AdamW(gpu_model, lr=1e-3), one_batch,
                      epochs=1, progress=False)
    np.testing.assert_allclose(gpu_history["loss"], cpu_history["loss"], rtol=1e-9)
    for (name, cpu), (_, gpu) in zip(model.state_dict().items(),
                                     gpu_model.state_dict().items()):
        np.testing.assert_allclose(gpu, cpu, rtol=1e-7, atol=1e-9, err_msg=name)
