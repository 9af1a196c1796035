"""Coordinates that need care: string labels as token dims, tz-aware times, calendar features
on grids, patch={}; and the per-token coordinates a batch carries."""
import numpy as np
import pandas as pd
import pytest
import xarray as xr

from adapters_helpers import forecast_batches, make_grid, make_signal, persistence
from seqattn.adapters import ForecastWindows, GridAdapter, SignalAdapter, predict


def stations(dtype="float64"):
    rng = np.random.default_rng(0)
    return xr.Dataset({"x": (("time", "station"), rng.normal(size=(6, 3)).astype(dtype))},
                      coords={"time": np.datetime64("2020-01-01") + np.arange(6)
                              * np.timedelta64(1, "h"),
                              "station": ["zurich", "bern", "basel"]})


def test_string_labelled_stations_and_stacked_variables_are_token_dims():
    ds = stations()
    adapter = GridAdapter(["x"], {"station": 1}, dtype="float64", normalize=False).fit(ds)
    batch = adapter.encode(ds)
    assert batch.tokens.shape == (6, 3, 2)
    np.testing.assert_array_equal(batch.coords["station"], [[0.0, 1.0, 2.0]] * 6)
    xr.testing.assert_identical(adapter.decode(batch), ds)
    windows = ForecastWindows(adapter, leads=[1], history=1, increments=True).fit(ds)
    out = windows.predict(lambda tokens, key_padding_mask, coords: np.zeros((len(tokens), 3, 1)),
                          ds)
    xr.testing.assert_identical(out.isel(time=slice(2, None)), persistence(
        ds, ["x"], "time", [1], windows.lead_values).isel(time=slice(2, None)))

    grid = make_grid(time=2, lat=4, lon=4, static=False)
    stacked = grid[["t", "u"]].to_array("variable").to_dataset(name="value")
    by_variable = GridAdapter(["value"], {"variable": 1, "lat": 2, "lon": 2}, dtype="float64",
                              normalize=False).fit(stacked)
    batch = by_variable.encode(stacked)
    np.testing.assert_array_equal(np.unique(batch.coords["variable"]), [0.0, 1.0])
    xr.testing.assert_identical(by_variable.decode(batch), stacked)


def tz_aware_series():
    index = pd.date_range("2021-03-01", periods=12, freq="h", tz="Europe/Zurich", name="time")
    frame = pd.DataFrame({"x": np.arange(12.0)}, index=index)
    return xr.Dataset.from_dataframe(frame)


def test_tz_aware_times_are_encoded_in_utc_and_put_back_on_their_own_coordinates():
    ds = tz_aware_series()
    adapter = SignalAdapter(["x"], "2h", calendar=True, dtype="float64", normalize=False).fit(ds)
    batch = adapter.encode(ds)
    # midnight in Zurich is 23:00 UTC the day before; a frame's time is its centre
    first_utc = (np.datetime64("2021-02-28T23:00") - np.datetime64(0, "s")) / np.timedelta64(1, "s")
    assert batch.coords["time"][0, 0] == first_utc + 1800
    np.testing.assert_allclose(batch.tokens[0, 0, -4::2], [np.sin(2 * np.pi * 23 / 24),
                                                           np.cos(2 * np.pi * 23 / 24)])
    back = adapter.decode(batch)
    xr.testing.assert_identical(back, ds)
    out = predict(lambda tokens, key_padding_mask, coords: tokens[..., :2], ds, adapter)
    xr.testing.assert_allclose(out, ds)
    assert out.indexes["time"].equals(ds.indexes["time"])
    forecast = ForecastWindows(adapter, leads=["2h"], history=3).fit(ds).predict(
        lambda tokens, key_padding_mask, coords: np.zeros(tokens.shape[:2] + (2,)), ds)
    assert forecast.indexes["time"].equals(ds.indexes["time"])


def test_times_that_are_not_times_get_an_error_naming_the_coordinate_and_the_fix():
    ds = make_signal(length=6, start="2020-01-01")
    as_text = ds.assign_coords(time=[str(t) for t in ds.time.values])
    with pytest.raises(ValueError, match=r"coordinate 'time' holds str values .*"
                                         r"pd.to_datetime"):
        SignalAdapter(["x"], "2h").fit(as_text)
    for leads in (["1h"], [1]):
        with pytest.raises(ValueError, match=r"coordinate 'time' holds str values"):
            forecast_batches(as_text, GridAdapter(["x"], {"station": 1}), leads=leads)


def test_calendar_features_on_a_grid_follow_the_sample_time():
    ds = make_grid(time=4, lat=4, lon=4, static=False, dtype="float64")  # 00, 06, 12, 18 h
    adapter = GridAdapter(["t", "u"], {"lat": 2, "lon": 2}, calendar=True, dtype="float64",
                          normalize=False).fit(ds)
    batch = adapter.encode(ds)
    assert batch.tokens.shape == (4, 4, 8 + 2 + 4)             # values, validity, calendar
    day_sin, year_sin, day_cos, year_cos = np.moveaxis(batch.tokens[:, 0, -4:], -1, 0)
    np.testing.assert_allclose(day_sin, [0, 1, 0, -1], atol=1e-12)
    np.testing.assert_allclose(day_cos, [1, 0, -1, 0], atol=1e-12)
    # the day of year counts in 2020's own 366 days (datetime64 years are Gregorian)
    days = (ds.time.values - np.datetime64("2020-01-01")) / np.timedelta64(1, "D")
    year = 2 * np.pi * days / 366
    np.testing.assert_allclose(year_sin, np.sin(year), atol=1e-12)
    np.testing.assert_allclose(year_cos, np.cos(year), atol=1e-12)
    assert (batch.tokens[:, 1:, -4:] == batch.tokens[:, :1, -4:]).all()  # one time per sample
    xr.testing.assert_identical(adapter.decode(batch), ds[["t", "u"]])
    # time as a patch dim: a token's time is its patch's centre, 03:00 and 15:00
    over_time = GridAdapter(["t"], {"time": 2, "lat": 4, "lon": 4}, calendar=True).fit(ds) \
        .encode(ds)
    np.testing.assert_allclose(over_time.tokens[0, :, -4::2],
                               [[np.sin(np.pi / 4), np.cos(np.pi / 4)],
                                [np.sin(5 * np.pi / 4), np.cos(5 * np.pi / 4)]], atol=1e-6)
    with pytest.raises(ValueError, match=r"calendar=True needs a datetime coordinate "
                                         r"time_dim='when'"):
        GridAdapter(["t"], {"lat": 2}, calendar=True, time_dim="when").fit(ds)


def test_empty_patch_says_what_it_would_mean():
    with pytest.raises(ValueError, match=r"patch=\{\} names no dim to cut into tokens, so every "
                                         r"sample would be a single token"):
        GridAdapter(["t"], {})


def test_every_token_carries_its_position_and_forecast_batches_their_lead():
    ds = make_grid(time=3, lat=4, lon=4)
    batch = next(iter(forecast_batches(ds, GridAdapter(["t"], {"lat": 2, "lon": 2}),
                                       leads=["6h"], batch_size=None)))
    assert set(batch.coords) == {"lat", "lon", "time", "lead", "position", "year_fraction"}
    assert all(c.shape == batch.key_padding_mask.shape and c.dtype == np.float64
               for c in batch.coords.values())
    np.testing.assert_array_equal(batch.coords["position"][1], [0, 1, 2, 3])
    assert (batch.coords["lead"] == 6 * 3600.0).all()


def test_dims_named_otherwise_also_reach_models_under_the_names_they_read():
    ds = make_grid(time=2, lat=4, lon=4).rename(time="valid_time", lat="latitude",
                                                 lon="longitude")
    adapter = GridAdapter(["t"], {"latitude": 2, "longitude": 2}, lat="latitude",
                          lon="longitude", time_dim="valid_time", calendar=True).fit(ds)
    batch = adapter.encode(ds)
    for ours, theirs in [("time", "valid_time"), ("lat", "latitude"), ("lon", "longitude")]:
        np.testing.assert_array_equal(batch.coords[ours], batch.coords[theirs])
    np.testing.assert_allclose(batch.coords["lon"][0], [45.0, 225.0, 45.0, 225.0])
    series = make_signal(length=8, start="2020-01-01").rename(time="t")
    frames = SignalAdapter(["x"], 2, time_dim="t").fit(series).encode(series)
    np.testing.assert_array_equal(frames.coords["time"], frames.coords["t"])


def weather_stations():
    """Hourly temperature at 4 stations named by strings, with their latitude, longitude and
    elevation as coordinates on ``station`` (not dims)."""
    rng = np.random.default_rng(2)
    time = np.datetime64("2022-05-01") + np.arange(30) * np.timedelta64(1, "h")
    return xr.Dataset(
        {"temperature": (("time", "station"), rng.normal(15.0, 3.0, size=(30, 4)), {"units": "C"})},
        coords={"time": time, "station": ["SMA", "BER", "GVE", "LUG"],
                "lat": ("station", [47.38, 46.99, 46.25, 46.0]),
                "lon": ("station", [8.57, 7.46, 6.13, 8.96]),
                "elevation": ("station", [556.0, 553.0, 411.0, 273.0])})


def test_coordinates_on_the_stations_reach_the_tokens_and_a_latlon_model():
    from seqattn.models import build

    ds = weather_stations()
    # stations as tokens: each token carries its station's numbers
    windows = ForecastWindows(GridAdapter(["temperature"], {"station": 1}), leads=[1, 2],
                              history=2).fit(ds, where=ds.time < ds.time[20])
    batch = windows.encode(ds)
    np.testing.assert_array_equal(batch.coords["lat"][0], ds.lat.values)
    np.testing.assert_array_equal(batch.coords["elevation"][0], ds.elevation.values)
    model = build(windows.model_config(d_model=8, nhead=2, num_layers=1, dim_feedforward=8,
                                       coordinates=["latlon", "lead"]))
    out = predict(model, ds, windows)
    assert out.temperature.dims == ("lead", "time", "station")
    # stations as samples: every frame of a station carries its station's numbers
    frames = SignalAdapter(["temperature"], 3).fit(ds)
    batch = frames.encode(ds)
    order = batch.placement.starts[:, 0]
    np.testing.assert_array_equal(batch.coords["lon"][:, 0], ds.lon.values[order])
    model = build(frames.model_config(d_model=8, nhead=2, num_layers=1, dim_feedforward=8,
                                      coordinates=["latlon"]))
    assert np.isfinite(predict(model, ds, frames).temperature).all()
