"""Dataset -> fit -> predict -> back on the Dataset, per adapter (grid, signal, forecast windows),
with a model fitted by least squares on data whose answer is known exactly."""
import dask.array as dsa
import numpy as np
import xarray as xr

from adapters_helpers import LeastSquares
from seqattn.adapters import ForecastWindows, GridAdapter, SignalAdapter, predict

TIMES = np.datetime64("2021-06-01T00") + np.arange(10) * np.timedelta64(1, "h")


def assert_on_the_dataset(out, truth, rtol=1e-9):
    """`out` is `truth` on its own dims and coordinates, NaN exactly where truth is."""
    assert out.dims == truth.dims
    for name, coordinate in truth.coords.items():
        xr.testing.assert_identical(out[name], coordinate)
    np.testing.assert_array_equal(np.isnan(out.values), np.isnan(truth.values))
    np.testing.assert_allclose(out.values, truth.values, rtol=rtol, atol=1e-9)


def assert_lazy_result_equals(model, chunked, set_up, eager, **options):
    lazy = predict(model, chunked, set_up, **options)
    assert all(isinstance(lazy[v].data, dsa.Array) for v in lazy.data_vars)
    xr.testing.assert_identical(lazy.compute(), eager)


def test_grid_predicts_a_variable_from_another():
    rng = np.random.default_rng(0)
    t = rng.normal(size=(3, 4, 6)) * 5 + 280
    t[rng.random(t.shape) < 0.1] = np.nan
    ds = xr.Dataset({"t": (("time", "lat", "lon"), t, {"units": "K"}),
                     "u": (("time", "lat", "lon"), 2 * t + 1, {"units": "m/s"})},
                    coords={"time": TIMES[:3], "lat": [60.0, 30.0, 0.0, -30.0],
                            "lon": np.arange(6) * 60.0})
    adapter = GridAdapter(["t", "u"], {"lat": 2, "lon": 2}, dtype="float64").fit(ds)
    batch = adapter.encode(ds)
    model = LeastSquares(columns=slice(0, 4)).fit(batch, batch.values[..., 4:8],
                                                  batch.valid[..., 4:8])
    out = predict(model, ds, adapter, variables=["u"], batch_size=2)
    assert_on_the_dataset(out.u, ds.u)
    assert out.u.attrs == {"units": "m/s"}
    assert_lazy_result_equals(model, ds.chunk({"time": 1}), adapter, out, variables=["u"],
                              batch_size=2)


def test_signal_predicts_a_series_from_another_in_overlapping_frames():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(3, 20))
    ds = xr.Dataset({"x": (("station", "time"), x), "y": (("station", "time"), 0.5 * x - 2)},
                    coords={"station": ["AAA", "BBB", "CCC"],
                            "time": np.datetime64("2021-06-01") + np.arange(20)
                            * np.timedelta64(10, "m")})
    adapter = SignalAdapter(["x", "y"], window="40min", hop="20min", dtype="float64").fit(ds)
    batch = adapter.encode(ds)
    model = LeastSquares(columns=slice(0, 4)).fit(batch, batch.values[..., 4:8],
                                                  batch.valid[..., 4:8])
    out = predict(model, ds, adapter, variables=["y"])
    assert_on_the_dataset(out.y, ds.y)
    assert_lazy_result_equals(model, ds.chunk({"station": 2}), adapter, out, variables=["y"])


def relaxing(shape, steps, seed, rate=0.9, level=0.5):
    """x(t + 1) = rate * x(t) + level from a random start, along the last axis."""
    x = np.empty(shape + (steps,))
    x[..., 0] = np.random.default_rng(seed).normal(size=shape) * 3
    for i in range(1, steps):
        x[..., i] = rate * x[..., i - 1] + level
    return x


def forecast_data(kind, seed):
    if kind == "grid":
        x = np.moveaxis(relaxing((4, 4), 10, seed), -1, 0)
        return xr.Dataset({"x": (("time", "lat", "lon"), x)},
                          coords={"time": TIMES, "lat": [45.0, 15.0, -15.0, -45.0],
                                  "lon": [0.0, 90.0, 180.0, 270.0]})
    return xr.Dataset({"x": (("station", "time"), relaxing((3,), 10, seed))},
                      coords={"station": ["AAA", "BBB", "CCC"], "time": TIMES})


def test_forecasts_of_a_relaxing_field_on_a_grid_and_at_stations():
    for kind, adapter, history, first in [
            ("grid", GridAdapter(["x"], {"lat": 2, "lon": 2}, dtype="float64"), 1, 1),
            ("signal", SignalAdapter(["x"], 1, dtype="float64"), 4, 0)]:
        train, test = forecast_data(kind, seed=2), forecast_data(kind, seed=3)
        windows = ForecastWindows(adapter, leads=["1h", "3h"], history=history,
                                  increments=True).fit(train)
        batch = windows.encode(train)
        # the last input step of each cell: history is the innermost channel on the grid
        columns = slice(history, 4 * (history + 1), history + 1) if kind == "grid" else [0]
        model = LeastSquares(columns).fit(batch, batch.targets, batch.target_valid)
        out = predict(model, test, windows)
        for i, lead in enumerate((1, 3)):
            valid = slice(first * history + lead, None)
            truth = test.x.isel(time=valid)
            assert_on_the_dataset(out.x.isel(lead=i, time=valid).drop_vars("lead"), truth)
            assert np.isnan(out.x.isel(lead=i, time=slice(0, first * history + lead))).all()
        chunks = {"time": 4, "station": 2} if kind == "signal" else {"time": 4}
        assert_lazy_result_equals(model, test.chunk(chunks), windows, out)
