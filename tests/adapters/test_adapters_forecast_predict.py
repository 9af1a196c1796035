"""Forecasts in one call: persistence from zero increments, predictions on valid times, lazily
per time chunk on dask (a distributed client's workers too), the three spellings."""
import dask.array as dsa
import numpy as np
import pytest
import xarray as xr

from adapters_helpers import make_grid, make_signal, persistence
from seqattn.adapters import ForecastWindows, GridAdapter, SignalAdapter, predict

KINDS = ["grid", "signal", "one station", "tokens"]


def set_up(kind, nan_fraction=0.1, normalized=True, increments=True, **options):
    """(ds, windows, first valid-time index each lead reaches) for one kind of forecast."""
    if kind == "signal":
        ds = make_signal(length=30, stations=3, start="2020-01-01", nan_fraction=nan_fraction,
                         dtype="float32")
        adapter = SignalAdapter(["x"], 2, calendar=True, normalize=normalized)
        leads, history = [2, "3h"], 5
    elif kind == "one station":                # x (time) and y (time, channel)
        ds = make_signal(length=20, stations=1, channels=2, start="2020-01-01",
                         nan_fraction=nan_fraction, dtype="float32").isel(station=0)
        adapter = SignalAdapter(["x", "y"], 1, channel_dims=("channel",), normalize=normalized)
        leads, history = [1, 4], 3
    else:
        ds = make_grid(time=9, lat=4, lon=4, nan_fraction=nan_fraction, dtype="float32")
        adapter = (GridAdapter(["t", "u", "lsm"], {"lat": 2, "lon": 2}, calendar=True,
                               normalize=normalized)
                   if kind == "grid" else
                   GridAdapter(["t", "u"], {"lat": 2, "lon": 2}, variables_as="tokens",
                               normalize=normalized))
        leads, history = ["6h", 2], 1
        options.setdefault("targets", ["u"] if kind == "tokens" else None)
    windows = ForecastWindows(adapter, leads=leads, history=history, increments=increments,
                              **options).fit(ds)
    # a grid's lead reaches valid times from history + lead; a signal's frames from lead
    first = windows.steps if "station" in kind or kind == "signal" else windows.steps + history
    return ds, windows, first


def reached(windows, first, like):
    """True at the (lead, valid time) a sample reaches, on the layout of `like`."""
    time = np.arange(like.sizes["time"])
    mask = xr.DataArray(time[None] >= np.asarray(first)[:, None], dims=("lead", "time"),
                        coords={"lead": windows.lead_values})
    return mask.broadcast_like(like)


def zero_increments(tokens, key_padding_mask, coords):
    """Zero change for the grid set-up's targets t and u (4 cells each)."""
    return np.zeros(tokens.shape[:2] + (8,), tokens.dtype)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("mask_missing", [True, False])
def test_zero_increments_give_persistence_exactly(kind, mask_missing):
    ds, windows, first = set_up(kind)
    width = windows.model_config().out_features
    zero = lambda tokens, key_padding_mask, coords: np.zeros(tokens.shape[:2] + (width,))
    out = windows.predict(zero, ds, batch_size=4, mask_missing=mask_missing)
    names = windows.targets or windows.timed
    expected = persistence(ds, names, "time", windows.steps, windows.lead_values)
    expected = expected.where(reached(windows, first, expected[names[0]]))
    if mask_missing:                         # no prediction where the target is missing
        expected = expected.where(ds[names].notnull())
    xr.testing.assert_identical(out, expected)
    assert np.isnan(out[names[0]].values).any() and np.isfinite(out[names[0]].values).any()


def coordinate_model(name, width, origin=0.0):
    """Predicts per-token coordinate `name`, in hours since `origin` (seconds), for every target
    feature (small whole numbers, exact in float32)."""
    def model(tokens, key_padding_mask, coords):
        return np.repeat((coords[name][..., None] - origin) / 3600, width, axis=-1)
    return model


@pytest.mark.parametrize("kind", KINDS)
def test_predictions_go_to_valid_times_with_their_leads(kind):
    ds, windows, first = set_up(kind, nan_fraction=0.0, normalized=False, increments=False)
    width = windows.model_config().out_features
    out = windows.predict(coordinate_model("lead", width), ds)
    for i, lead in enumerate(windows.lead_values):
        at = out.isel(lead=i)
        assert at.lead.values == lead and np.isnan(at.isel(time=slice(0, first[i]))
                                                   .to_array()).all()
        np.testing.assert_array_equal(at.isel(time=slice(first[i], None)).to_array(),
                                      lead / np.timedelta64(1, "h"))
    if kind in ("grid", "tokens"):           # a grid sample's time is its initial time
        origin = (ds.time.values[0] - np.datetime64(0, "s")) / np.timedelta64(1, "s")
        initial = windows.predict(coordinate_model("time", width, origin), ds)
        times = ds.time.values
        hours = (times[None] - windows.lead_values[:, None] - times[0]) / np.timedelta64(1, "h")
        for i in range(len(first)):
            got = initial.isel(lead=i, time=slice(first[i], None)).to_array().values
            want = hours[i, first[i]:][None, :, None, None]     # (variable, time, lat, lon)
            np.testing.assert_array_equal(got, np.broadcast_to(want, got.shape))


class CountingModel:
    """Inputs, lead and time in every prediction, so a sample read from the wrong steps in a
    chunk would show; counts its calls."""

    def __init__(self, width):
        self.width, self.calls = width, 0

    def __call__(self, tokens, key_padding_mask, coords):
        self.calls += 1
        mixed = tokens.mean(-1, keepdims=True) + coords["lead"][..., None] / 3600 \
            + (coords["time"][..., None] % 86400) / 86400
        return np.repeat(mixed, self.width, axis=-1)


@pytest.mark.parametrize("kind", KINDS)
def test_dask_input_is_forecast_lazily_per_chunk_and_equals_the_eager_result(kind):
    ds, windows, _ = set_up(kind)
    model = CountingModel(windows.model_config().out_features)
    eager = windows.predict(model, ds, batch_size=4)
    model.calls = 0
    chunks = {"time": 4, "station": 2} if kind == "signal" else {"time": 4}
    lazy = predict(model, ds.chunk(chunks), windows, batch_size=3)
    name = (windows.targets or windows.timed)[0]
    assert model.calls == 0 and isinstance(lazy[name].data, dsa.Array)
    assert lazy[name].chunksizes["time"] == ds.chunk(chunks).chunksizes["time"]
    xr.testing.assert_identical(lazy.compute(), eager)


RAN_ON = []


class WorkerRecordingModel:
    """Zero increments that note the dask worker each call ran on."""

    def __call__(self, tokens, key_padding_mask, coords):
        import distributed

        RAN_ON.append(distributed.get_worker().address)
        return np.zeros(tokens.shape[:2] + (8,))


def test_forecast_chunks_run_on_the_workers_of_a_distributed_client():
    distributed = pytest.importorskip("distributed")
    ds, windows, _ = set_up("grid")
    RAN_ON.clear()
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        out = predict(WorkerRecordingModel(), ds.chunk({"time": 3}), windows).compute()
        workers = set(client.scheduler_info()["workers"])
    assert RAN_ON and set(RAN_ON) <= workers
    xr.testing.assert_identical(out, windows.predict(zero_increments, ds))


def test_the_three_spellings_agree_and_a_set_up_forecasts_other_data():
    ds, windows, _ = set_up("grid")
    one = windows.predict(zero_increments, ds)
    xr.testing.assert_identical(predict(zero_increments, ds, windows), one)
    xr.testing.assert_identical(ds.seqattn.predict(zero_increments, windows), one)
    later = make_grid(seed=5, time=6, lat=4, lon=4, dtype="float32")
    other = predict(zero_increments, later, windows)
    expected = persistence(later, ["t", "u"], "time", windows.steps, windows.lead_values)
    xr.testing.assert_identical(other.isel(time=slice(3, None)),
                                expected.isel(time=slice(3, None)))


def test_forecast_errors_say_what_to_change():
    ds, windows, _ = set_up("grid")
    with pytest.raises(ValueError, match=r"\['input_dims'\] do not apply to forecasts"):
        predict(zero_increments, ds, windows, input_dims={"lat": 2})
    with pytest.raises(ValueError, match=r"a forecast needs \(B, N, Ft\)"):
        windows.predict(lambda tokens, key_padding_mask, coords: tokens[..., 0], ds)
    with pytest.raises(ValueError, match=r"values have shape \(4, 4, 3\); expected \(4, 4, 8\)"):
        windows.predict(lambda tokens, key_padding_mask, coords: tokens[..., :3], ds,
                        batch_size=4)
