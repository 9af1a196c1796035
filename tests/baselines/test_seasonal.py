"""SeasonalPersistence against hand indexing of the source Dataset: a target's value one period
(a day) before its valid time, read off the inputs of grids (history channels) and signals
(frames), as values and as increments; persistence where the inputs do not reach that far."""
import datetime

import numpy as np
import pandas as pd
import pytest
import xarray as xr

import seqattn
from seqattn.adapters import ForecastWindows, GridAdapter, SignalAdapter
from seqattn.baselines import Persistence, SeasonalPersistence, for_batch

RNG = np.random.default_rng(38)
DAY = 24  # steps of the hourly series
TRAIN, VALID, TEST = slice(0, 6 * DAY), slice(6 * DAY, 9 * DAY), slice(9 * DAY, 12 * DAY)


def hourly(days=12, stations=2):
    """x: a daily cycle plus an AR(1) departure per station; p: noise (an input before x,
    so that x's channels do not start at 0)."""
    hours = days * DAY
    noise = np.zeros((hours, stations))
    for i in range(1, hours):
        noise[i] = 0.8 * noise[i - 1] + RNG.normal(size=stations)
    cycle = 5 * np.cos(2 * np.pi * np.arange(hours) / DAY)[:, None]
    return xr.Dataset(
        {"p": (("time", "station"), RNG.normal(size=(hours, stations))),
         "x": (("time", "station"), 10 + cycle + noise)},
        coords={"time": pd.date_range("2021-03-01", periods=hours, freq="h"),
                "station": ["a", "b"][:stations]})


def one_batch(windows, ds, where=None):
    return next(iter(windows.batches(ds, where=where, batch_size=None)))


def fitted(windows, ds, period="24h"):
    train = windows.batches(ds, where=TRAIN, batch_size=256)
    valid = windows.batches(ds, where=VALID, batch_size=256)
    return SeasonalPersistence(windows, period=period).fit(train, valid)


def grid_windows(ds, leads, history, adapter=None, **options):
    adapter = adapter or GridAdapter(["p", "x"], {"station": 1})
    return ForecastWindows(adapter, leads=leads, history=history, targets=["x"],
                           **options).fit(ds, where=TRAIN)


GRIDS = {"channels": lambda: GridAdapter(["p", "x"], {"station": 1}),
         "tokens": lambda: GridAdapter(["p", "x"], {"station": 1}, variables_as="tokens"),
         "levels": lambda: GridAdapter(["p", "x"], {"station": 1}, channel_dims=["level"])}


@pytest.mark.parametrize("grid", GRIDS)
@pytest.mark.parametrize("options", [{}, {"increments": True},
                                     {"increments": True, "lead_scales": "rms"}])
def test_grid_forecast_is_the_value_a_day_before_the_valid_time(options, grid):
    ds = on_levels(hourly()) if grid == "levels" else hourly()
    windows = grid_windows(ds, ["1h", "6h", "30h"], history=DAY, adapter=GRIDS[grid](),
                           **options)
    baseline = fitted(windows, ds)
    assert baseline.chosen["seasonal_share"] == {3600.0: 1.0, 21600.0: 1.0, 108000.0: 1.0}
    batch = one_batch(windows, ds, where=TEST)
    forecast = windows.decode(batch, baseline.predict(batch)).x
    for lead, back in [(1, DAY), (6, DAY), (30, 2 * DAY)]:  # 30 h: two days back, seen at t
        at = forecast.sel(lead=np.timedelta64(lead, "h")).dropna("time", how="all")
        assert at.sizes["time"] == 3 * DAY - DAY - lead  # the test part: 3 days
        source = ds.x.sel(time=at.time.values - np.timedelta64(back, "h"))
        np.testing.assert_allclose(at.transpose(*source.dims).values, source.values, rtol=1e-5)


def test_leads_the_history_does_not_reach_fall_back_to_persistence():
    ds = hourly()
    windows = grid_windows(ds, ["1h", "6h"], history=20)  # 1 h needs 23 steps back
    baseline = fitted(windows, ds)
    assert baseline.chosen["seasonal_share"] == {3600.0: 0.0, 21600.0: 1.0}
    assert "leads [3600.0]" in baseline.chosen["persistence_at"]
    assert not baseline.reaches()
    batch = one_batch(windows, ds, where=TEST)
    forecast = windows.decode(batch, baseline.predict(batch)).x
    hour = forecast.sel(lead=np.timedelta64(1, "h")).dropna("time", how="all")
    np.testing.assert_allclose(hour.values, ds.x.sel(
        time=hour.time.values - np.timedelta64(1, "h")).values, rtol=1e-5)
    six = forecast.sel(lead=np.timedelta64(6, "h")).dropna("time", how="all")
    np.testing.assert_allclose(six.values, ds.x.sel(
        time=six.time.values - np.timedelta64(DAY, "h")).values, rtol=1e-5)


def test_a_history_that_reaches_no_period_back_is_refused():
    ds = hourly()
    windows = grid_windows(ds, ["1h", "2h"], history=12)
    with pytest.raises(ValueError,
                       match=r"history = 12 .* leads \['1h', '2h'\]; give history >= 23"):
        fitted(windows, ds)


def on_levels(ds):
    """x on two levels (the second a noisy copy), a channel dim of the signal's frames."""
    second = ds.x + RNG.normal(size=ds.x.shape)
    return ds.assign(x=xr.concat([ds.x, second], dim="level").transpose("time", ..., "level"))


def signal_windows(ds, history, lead="2h", hop=2, **options):
    adapter = SignalAdapter(["p", "x"], 2, hop=hop, channel_dims=["level"], dtype="float64",
                            normalize=False)
    return ForecastWindows(adapter, leads=[lead], history=history, targets=["x"],
                           **options).fit(ds, where=TRAIN)


@pytest.mark.parametrize("period, lead, history, hop", [
    (24, 2, 2 * DAY - 2, 2),  # 24 frames side by side, the last one's second step padding
    (2, 3, 2 * DAY - 1, 2),   # a lead longer than the period: two periods back
    (24, 2, 2 * DAY - 1, 1),  # overlapping frames: a step is in two of them
])
@pytest.mark.parametrize("increments", [False, True])
def test_signal_frames_read_the_step_a_period_before_each_target_step(period, lead, history,
                                                                       hop, increments):
    ds = on_levels(hourly(stations=1).isel(station=0, drop=True))
    windows = signal_windows(ds, history, f"{lead}h", hop, increments=increments)
    baseline = fitted(windows, ds, period=f"{period}h")
    batch = one_batch(windows, ds, where=TEST)
    predicted = baseline.predict(batch)
    x = ds.x.values
    for b in range(0, len(batch), 5):
        start = batch.placement.starts[b, 1] - lead  # the window's first step, t - history
        found = real = 0
        for token in range(predicted.shape[1]):
            for at in range(2):  # the target's step in its frame of 2
                r = token * hop + at  # its step in the window, lead earlier
                if r > history:
                    continue  # padding past the window
                valid = start + r + lead
                frame_end = start + min(token * hop + 1, history)
                source = valid - period
                while source > frame_end:  # never a step after the target's own frame
                    source -= period
                real, found = real + 1, found + (source >= start)
                value = x[source] if source >= start else x[valid - lead]
                expected = value - x[valid - lead] if increments else value
                np.testing.assert_allclose(predicted[b, token, 2 * at:2 * at + 2], expected,
                                           atol=1e-6, err_msg=f"sample {b}, step {r}")
        assert baseline.chosen["seasonal_share"] == {3600.0 * lead: found / real}


def test_signal_increments_are_divided_by_the_lead_scale():
    ds = on_levels(hourly(stations=1).isel(station=0, drop=True))
    windows = signal_windows(ds, 2 * DAY - 1, increments=True, lead_scales=[4.0])
    baseline = fitted(windows, ds)
    batch = one_batch(windows, ds, where=TEST)
    unscaled = fitted(signal_windows(ds, 2 * DAY - 1, increments=True), ds)
    np.testing.assert_allclose(baseline.predict(batch) * 4.0, unscaled.predict(batch),
                               rtol=1e-6)


@pytest.mark.parametrize("period, error, message", [
    (0, ValueError, "period=0; expected a positive"),
    (-3600.0, ValueError, "period=-3600.0"),
    (float("nan"), ValueError, "period=nan"),
    ("a day", ValueError, "period='a day' is not a duration"),
    (True, TypeError, "period=True is a bool"),
    ([24], TypeError, "period is a list"),
])
def test_a_bad_period_is_named(period, error, message):
    windows = grid_windows(hourly(), ["1h"], history=DAY)
    with pytest.raises(error, match=message):
        SeasonalPersistence(windows, period=period)


def test_a_period_of_no_whole_steps_and_a_duration_on_numbers_are_named():
    ds = hourly()
    windows = grid_windows(ds, ["1h"], history=DAY)
    with pytest.raises(ValueError, match=r"period='90min' is 1.5 steps"):
        fitted(windows, ds, period="90min")
    numeric = ds.assign_coords(time=np.arange(ds.sizes["time"], dtype=float))
    windows = grid_windows(numeric, [1], history=DAY)
    with pytest.raises(ValueError, match=r"period='24h' is a duration, but the time axis is"):
        fitted(windows, numeric)
    assert fitted(windows, numeric, period=24).chosen["period_steps"] == DAY
    assert fitted(windows, numeric, period=24.0).chosen["period_steps"] == DAY


def test_periods_as_steps_seconds_timedeltas_and_strings_agree():
    """An int is steps and a float coordinate units, as the windows read leads."""
    ds = hourly()
    windows = grid_windows(ds, ["1h"], history=DAY)
    for period in (24, 86400.0, datetime.timedelta(days=1), np.timedelta64(24, "h"), "1D"):
        assert SeasonalPersistence(windows, period=period).period_steps() == DAY
    with pytest.raises(TypeError, match="windows is a GridAdapter"):
        SeasonalPersistence(windows.adapter)


def test_for_batch_adds_it_where_the_history_reaches_a_day_back():
    ds = hourly()
    reaching = grid_windows(ds, ["1h", "6h"], history=DAY - 1)
    found = for_batch(one_batch(reaching, ds, where=slice(0, 3 * DAY)), reaching)
    assert [type(b) for b in found].count(SeasonalPersistence) == 1
    short = grid_windows(ds, ["1h", "6h"], history=DAY - 2)
    assert not any(isinstance(b, SeasonalPersistence)
                   for b in for_batch(one_batch(short, ds, where=slice(0, 3 * DAY)), short))
    assert not any(isinstance(b, SeasonalPersistence)
                   for b in for_batch(one_batch(reaching, ds, where=slice(0, 3 * DAY))))


def zero_increments(tokens, key_padding_mask, **coords):
    return np.zeros((*tokens.shape[:2], 1), tokens.dtype)


def test_evaluate_scores_it_beside_the_other_baselines():
    ds = hourly()
    windows = grid_windows(ds, ["1h", "6h"], history=DAY, increments=True)
    scores = seqattn.evaluate(zero_increments, ds, windows, where=TEST,
                              train=TRAIN, validation=VALID)
    assert "seasonal persistence" in scores.predictor.values
    x = ds.x.values[TEST]
    for i, lead in enumerate([1, 6]):
        valid = np.arange(DAY + lead, len(x))  # a sample's history lies in the test part
        for predictor, back in [("model", lead), ("seasonal persistence", DAY)]:
            expected = np.sqrt(np.mean((x[valid - back] - x[valid]) ** 2))
            assert float(scores.rmse.sel(predictor=predictor).isel(lead=i)) == \
                pytest.approx(expected, rel=1e-5), predictor
    six = scores.rmse.sel(lead=np.timedelta64(6, "h"))
    assert six.sel(predictor="seasonal persistence") < six.sel(predictor="model"), \
        "a strong daily cycle: a day back beats six hours back"


@pytest.mark.parametrize("options", [{}, {"increments": True}])
def test_a_missing_seasonal_value_falls_back_to_persistence(options):
    ds = hourly()
    missing = 9 * DAY + 30  # the value a day before valid time 10 * DAY + 6
    ds["x"][missing, 0] = np.nan
    windows = grid_windows(ds, ["6h"], history=DAY, **options)
    baseline = fitted(windows, ds)
    batch = one_batch(windows, ds, where=TEST)
    forecast = windows.decode(batch, baseline.predict(batch)).x.sel(lead=np.timedelta64(6, "h"))
    valid = ds.time.values[missing + DAY]
    assert float(forecast.sel(time=valid).isel(station=0)) == pytest.approx(
        float(ds.x.isel(time=missing + DAY - 6, station=0)), rel=1e-5)
    assert float(forecast.sel(time=valid).isel(station=1)) == pytest.approx(
        float(ds.x.isel(time=missing, station=1)), rel=1e-5)


def test_a_noleap_calendar_reads_a_day_as_24_hourly_steps():
    ds = hourly()
    ds = ds.assign_coords(time=xr.date_range("2001-03-01", periods=ds.sizes["time"], freq="h",
                                             calendar="noleap", use_cftime=True))
    windows = grid_windows(ds, ["1h"], history=DAY)
    assert SeasonalPersistence(windows).period_steps() == DAY
    assert fitted(windows, ds).chosen["seasonal_share"] == {3600.0: 1.0}
