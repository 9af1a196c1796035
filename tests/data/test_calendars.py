"""cftime calendars (noleap, 360_day: climate-model output) wherever datetime64 times work in
seqattn.data.coords: seconds since 1970-01-01 counted in the calendar, hour of day and day of
year with the calendar's own year length, steps and spacing, order checks; and through the
grid and signal adapters' encode and decode of a small cftime Dataset, their calendar features
(``calendar=True``), and forecast windows over it."""
import cftime
import numpy as np
import pytest
import xarray as xr

from seqattn.adapters import GridAdapter, SignalAdapter
from seqattn.data.checks import require_monotonic
from seqattn.data.coords import (as_float, calendar_features, even_step, is_time,
                                 require_numeric_axis, to_utc, token_coordinates, whole_steps)

DAY = 86400.0
YEAR_DAYS = {"noleap": 365, "360_day": 360}
CALENDARS = list(YEAR_DAYS)


def _times(calendar, start="2001-02-27", periods=8, freq="6h"):
    return xr.date_range(start, periods=periods, freq=freq, calendar=calendar,
                         use_cftime=True).values


def _random_times(calendar, n=200, seed=0):
    """Times over several years (leap years of the Gregorian calendar among them)."""
    rng = np.random.default_rng(seed)
    days = 30 if calendar == "360_day" else 28  # a day every month has
    return np.array([cftime.datetime(int(y), int(m), int(d), int(h), calendar=calendar)
                     for y, m, d, h in zip(rng.integers(1960, 2101, n), rng.integers(1, 13, n),
                                           rng.integers(1, days + 1, n), rng.integers(0, 24, n))])


@pytest.mark.parametrize("calendar", CALENDARS)
def test_times_are_seconds_since_1970_counted_in_their_calendar(calendar):
    times = _random_times(calendar)
    year, month_days = YEAR_DAYS[calendar], 30 if calendar == "360_day" else None
    expected = []
    for t in times:
        day_of_year = t.dayofyr - 1 if month_days is None else (t.month - 1) * 30 + t.day - 1
        expected.append(((t.year - 1970) * year + day_of_year) * DAY + t.hour * 3600.0)
    np.testing.assert_array_equal(as_float(times), expected)
    assert as_float(times.reshape(20, 10)).shape == (20, 10)


def _features_by_hand(times, calendar):
    """(sin day, sin year, cos day, cos year) of cftime `times` from their hour and day of year."""
    day = np.array([t.hour / 24 for t in times])
    year = np.array([(t.dayofyr - 1 + t.hour / 24) / YEAR_DAYS[calendar] for t in times])
    angles = 2 * np.pi * np.stack([day, year], axis=-1)
    return np.concatenate([np.sin(angles), np.cos(angles)], axis=-1)


@pytest.mark.parametrize("calendar", CALENDARS)
def test_hour_of_day_and_day_of_year_follow_the_calendars_year(calendar):
    times = _random_times(calendar, seed=1)
    np.testing.assert_allclose(calendar_features(times), _features_by_hand(times, calendar),
                               atol=1e-9)


@pytest.mark.parametrize("calendar", CALENDARS)
def test_seconds_counted_in_a_calendar_give_its_features(calendar):
    """What an adapter holding per-token seconds (NaN for padding) passes on."""
    times = _random_times(calendar, n=20, seed=2)
    seconds = np.append(as_float(times), np.nan)
    features = calendar_features(seconds, calendar=calendar)
    np.testing.assert_array_equal(features[:-1], calendar_features(times))
    assert np.isnan(features[-1]).all()
    with pytest.raises(ValueError, match="calendar must be one of .* got 'lunar'"):
        calendar_features(seconds, calendar="lunar")


def test_the_year_turns_at_new_year_in_every_calendar():
    for calendar in CALENDARS:
        new_year = [cftime.datetime(y, 1, 1, calendar=calendar) for y in (1971, 2000, 2100)]
        np.testing.assert_allclose(calendar_features(np.array(new_year))[:, [1, 3]],
                                   [[0.0, 1.0]] * 3, atol=1e-9, err_msg=calendar)
    midsummer = cftime.datetime(2001, 7, 1, calendar="360_day")  # day 180 of 360, midnight
    np.testing.assert_allclose(calendar_features(np.array([midsummer])), [[0, 0, 1, -1]],
                               atol=1e-9)


def test_gregorian_cftime_times_are_the_datetime64_times():
    stamps = ["1999-12-31T18", "2000-02-29T06", "2024-07-01T12"]
    gregorian = np.array([cftime.datetime(int(s[:4]), int(s[5:7]), int(s[8:10]),
                                          int(s[11:]), calendar="standard") for s in stamps])
    datetimes = np.array(stamps, dtype="datetime64[h]")
    np.testing.assert_array_equal(as_float(gregorian), as_float(datetimes))
    np.testing.assert_array_equal(calendar_features(gregorian), calendar_features(datetimes))


@pytest.mark.parametrize("calendar", CALENDARS)
def test_steps_spacing_and_order_along_a_cftime_axis(calendar):
    ds = xr.Dataset(coords={"time": _times(calendar, freq="1h", periods=24)})
    assert is_time(ds.time.values) and not is_time(np.arange(3.0))
    require_numeric_axis(ds, "time", "window")
    assert whole_steps("6h", ds, "time", "window") == 6
    assert as_float(even_step(ds.time.values)) == 3600.0
    with pytest.raises(ValueError, match=r"window='90min' is 1.5 steps of 'time'"):
        whole_steps("90min", ds, "time", "window")
    uneven = ds.isel(time=[0, 1, 3])
    assert even_step(uneven.time.values) is None
    with pytest.raises(ValueError, match="coordinate 'time' is not monotonic; sort it"):
        require_monotonic(ds.isel(time=[0, 2, 1]), "time")
    require_monotonic(ds.isel(time=slice(None, None, -1)), "time")


def test_times_of_two_calendars_together_are_refused_by_name():
    mixed = np.array([cftime.datetime(2001, 1, 1, calendar="noleap"),
                      cftime.datetime(2001, 1, 1, calendar="360_day")])
    with pytest.raises(ValueError, match=r"one calendar .* got cftime datetimes in "
                                         r"\['360_day', 'noleap'\]"):
        as_float(mixed)


def test_cftime_coordinates_reach_the_tokens_and_tz_handling_leaves_them_alone():
    ds = xr.Dataset(coords={"time": _times("noleap", periods=3),
                            "issued": ("time", _times("noleap", periods=3, freq="1D"))})
    found = token_coordinates(ds)
    assert set(found) == {"time", "issued"} and found["issued"][0] == "time"
    assert to_utc(ds) is ds


def _grid(calendar):
    rng = np.random.default_rng(2)
    return xr.Dataset({"t": (("time", "lat", "lon"), rng.normal(size=(4, 4, 4)))},
                      coords={"time": _times(calendar, periods=4), "lat": np.linspace(60, -60, 4),
                              "lon": np.arange(4) * 90.0})


@pytest.mark.parametrize("calendar", CALENDARS)
def test_the_grid_adapter_encodes_and_decodes_a_cftime_dataset(calendar):
    ds = _grid(calendar)
    adapter = GridAdapter(["t"], {"lat": 2, "lon": 2}, dtype="float64").fit(ds)
    batch = adapter.encode(ds)
    seconds = as_float(ds.time.values)
    np.testing.assert_array_equal(batch.coords["time"], np.repeat(seconds[:, None], 4, axis=1))
    by_index = ds.assign_coords(time=np.arange(4))
    np.testing.assert_array_equal(batch.tokens, adapter.encode(by_index).tokens)
    back = adapter.decode(batch)
    assert list(back.time.values) == list(ds.time.values)
    np.testing.assert_allclose(back.t.transpose(*ds.t.dims), ds.t, rtol=1e-12)


@pytest.mark.parametrize("calendar", CALENDARS)
def test_the_signal_adapter_encodes_and_decodes_a_cftime_dataset(calendar):
    rng = np.random.default_rng(3)
    ds = xr.Dataset({"x": (("station", "time"), rng.normal(size=(2, 12)))},
                    coords={"time": _times(calendar, periods=12, freq="1h")})
    adapter = SignalAdapter(["x"], "3h", dtype="float64").fit(ds)
    batch = adapter.encode(ds)
    assert batch.tokens.shape[:2] == (2, 4)
    frame_centres = as_float(ds.time.values).reshape(4, 3).mean(axis=1)  # as for datetime64
    np.testing.assert_array_equal(batch.coords["time"][0], frame_centres)
    back = adapter.decode(batch)
    assert list(back.time.values) == list(ds.time.values)
    np.testing.assert_allclose(back.x.transpose(*ds.x.dims), ds.x, rtol=1e-12)


@pytest.mark.parametrize("calendar", CALENDARS)
def test_grid_calendar_features_count_the_day_of_year_in_the_calendar(calendar):
    """Times every 18 h over a new year: the features of a sample's time, and of a patch's
    centre when time is a patch dim (the last patch padded: its centre is its one step)."""
    times = _times(calendar, start="2001-12-29T06", periods=5, freq="18h")
    rng = np.random.default_rng(4)
    ds = xr.Dataset({"t": (("time", "lat", "lon"), rng.normal(size=(5, 4, 4)))},
                    coords={"time": times, "lat": np.linspace(60, -60, 4),
                            "lon": np.arange(4) * 90.0})
    per_sample = GridAdapter(["t"], {"lat": 2, "lon": 2}, calendar=True, dtype="float64")
    batch = per_sample.fit(ds).encode(ds)
    expected = np.repeat(_features_by_hand(times, calendar)[:, None], 4, axis=1)
    np.testing.assert_allclose(batch.tokens[..., -4:], expected, atol=1e-12)
    per_patch = GridAdapter(["t"], {"time": 2, "lat": 2, "lon": 2}, calendar=True,
                            dtype="float64")
    batch = per_patch.fit(ds).encode(ds)
    centres = [times[0] + (times[1] - times[0]) / 2, times[2] + (times[3] - times[2]) / 2,
               times[4]]
    expected = np.repeat(_features_by_hand(centres, calendar), 4, axis=0)
    np.testing.assert_allclose(batch.tokens[0, :, -4:], expected, atol=1e-12)


@pytest.mark.parametrize("calendar", CALENDARS)
def test_signal_calendar_features_are_those_of_each_frames_first_step(calendar):
    """Frames of 2 steps every 6 h over a new year; the last frame (one step and padding) too."""
    times = _times(calendar, start="2001-12-30T12", periods=11, freq="6h")
    ds = xr.Dataset({"x": (("station", "time"), np.ones((2, 11)))}, coords={"time": times})
    adapter = SignalAdapter(["x"], "12h", calendar=True, dtype="float64").fit(ds)
    batch = adapter.encode(ds)
    expected = _features_by_hand(times[::2], calendar)
    np.testing.assert_allclose(batch.tokens[..., -4:], np.stack([expected] * 2), atol=1e-12)


@pytest.mark.parametrize("calendar", CALENDARS)
def test_frame_features_over_cftime_times_come_back_on_cftime_frame_centres(calendar):
    """Frames of a day of 6-hourly steps: their centres are 9 h after their starts, in the
    calendar (a new year's day among them), and the rate is that of the steps."""
    times = _times(calendar, start="2001-12-29", periods=12, freq="6h")
    ds = xr.Dataset({"x": (("station", "time"), np.arange(24.0).reshape(2, 12))},
                    coords={"time": times})
    mean_and_spread = lambda frames: np.stack([frames.mean(-1), frames.std(-1)], axis=-1)
    adapter = SignalAdapter(["x"], "1D", frame_features=mean_and_spread,
                            dtype="float64").fit(ds)
    assert adapter.rate == 1 / (6 * 3600.0)
    back = adapter.decode(adapter.encode(ds))
    assert list(back.time.values) == [t + (times[1] - times[0]) * 1.5 for t in times[::4]]
    np.testing.assert_allclose(back.x.isel(feature=0, station=0), [1.5, 5.5, 9.5])


def test_calendar_needs_times_and_says_which_it_takes():
    ds = _grid("noleap").assign_coords(time=np.arange(4.0))
    with pytest.raises(ValueError, match=r"calendar=True needs a datetime coordinate "
                                         r"time_dim='time' \(datetime64 or cftime times\), got "
                                         r"dtype float64"):
        GridAdapter(["t"], {"lat": 2, "lon": 2}, calendar=True).fit(ds)
    signal = xr.Dataset({"x": (("time",), np.ones(4))})
    with pytest.raises(ValueError, match=r"calendar=True needs a datetime coordinate "
                                         r"time_dim='time' \(datetime64 or cftime times\), got "
                                         r"no such coordinate"):
        SignalAdapter(["x"], 2, calendar=True).fit(signal)


def test_forecast_windows_over_a_cftime_grid_are_those_over_datetime64():
    """Leads given as durations become the same steps; only the time coordinate's seconds
    differ, by the calendars' offset since 1970."""
    from seqattn.adapters import ForecastWindows

    cftimes = _grid("360_day")
    datetimes = cftimes.assign_coords(time=np.datetime64("2001-02-27") +
                                      np.arange(4) * np.timedelta64(6, "h"))
    batches = []
    for ds in (cftimes, datetimes):
        windows = ForecastWindows(GridAdapter(["t"], {"lat": 2, "lon": 2}, dtype="float64"),
                                  leads=["6h", "12h"], history=1).fit(ds)
        batches.append(next(iter(windows.batches(ds, batch_size=4))))
    on_cftime, on_datetime64 = batches
    np.testing.assert_array_equal(on_cftime.tokens, on_datetime64.tokens)
    np.testing.assert_array_equal(on_cftime.coords["lead"], on_datetime64.coords["lead"])
    offset = as_float(cftimes.time.values[:1]) - as_float(datetimes.time.values[:1])
    np.testing.assert_array_equal(on_cftime.coords["time"], on_datetime64.coords["time"] + offset)
