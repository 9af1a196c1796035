"""The day-of-year position of cftime times counts in the calendar's own years: 365 days in
noleap, 360 in 360_day, 366 in all_leap, and each year's own length (leap years by the
calendar's rule) in standard, gregorian, proleptic_gregorian and julian - from the function
(year_fractions), through the adapters' batches (coords["year_fraction"]) to the model's
features; datetime64 times count proleptic Gregorian years, as the standard calendar does
after 1582. A model given no year_fraction (coordinates of its own) keeps the mean year."""
import cftime
import numpy as np
import pytest
import xarray as xr

from seqattn.adapters import GridAdapter, SignalAdapter
from seqattn.data.coords import as_float
from seqattn.models.coordinates import CoordinateEncoding, year_fractions
from seqattn.nn.positional.calendar import DAYS_PER_YEAR


def gregorian_leap(y):
    return y % 4 == 0 and (y % 100 != 0 or y % 400 == 0)


# Days in year y, by each calendar's rule (the standard calendar is Julian before 1582)
YEAR_LENGTH = {
    "noleap": lambda y: 365, "360_day": lambda y: 360, "all_leap": lambda y: 366,
    "julian": lambda y: 366 if y % 4 == 0 else 365,
    "proleptic_gregorian": lambda y: 366 if gregorian_leap(y) else 365,
    "standard": lambda y: 366 if (y % 4 == 0 if y < 1582 else gregorian_leap(y)) else 365,
    "gregorian": lambda y: 366 if (y % 4 == 0 if y < 1582 else gregorian_leap(y)) else 365,
}
CALENDARS = list(YEAR_LENGTH)


def random_times(calendar, n=60, seed=0):
    """Times of years around 1500 and 1600-2100 (not 1582, the standard calendar's switch),
    century years and leap days among them."""
    rng = np.random.default_rng(seed)
    years = np.concatenate([rng.integers(1400, 1582, n // 3), rng.integers(1600, 2101, n // 3),
                            [1500, 1600, 1700, 1900, 2000, 2100] * (n // 18)])
    days = [30 if calendar == "360_day" else 28] * len(years)
    times = [cftime.datetime(int(y), int(m), int(d), int(h), calendar=calendar)
             for y, m, d, h in zip(years, rng.integers(1, 13, len(years)),
                                   rng.integers(1, np.array(days) + 1), rng.integers(0, 24,
                                                                                  len(years)))]
    leap_day = 30 if calendar == "360_day" else (29 if YEAR_LENGTH[calendar](2000) == 366
                                                 else 28)
    return np.array(times + [cftime.datetime(2000, 2, leap_day, 23, calendar=calendar),
                             cftime.datetime(2000, 12, 30, 12, calendar=calendar)])


def by_hand(times, calendar):
    """The part of its year each time has passed: (day of year - 1 + hours / 24) / year."""
    return np.array([(t.dayofyr - 1 + t.hour / 24) / YEAR_LENGTH[calendar](t.year)
                     for t in times])


@pytest.mark.parametrize("calendar", CALENDARS)
def test_year_fractions_count_in_the_calendars_own_years(calendar):
    times = random_times(calendar)
    got = year_fractions(as_float(times), calendar)
    np.testing.assert_allclose(got, by_hand(times, calendar), rtol=0, atol=1e-12)
    new_year = np.array([cftime.datetime(y, 1, 1, calendar=calendar) for y in (1500, 1970, 2001)])
    np.testing.assert_allclose(year_fractions(as_float(new_year), calendar), 0.0, atol=1e-12)
    seconds = np.array([np.nan, as_float(times[:1])[0]])
    assert np.isnan(year_fractions(seconds, calendar)[0])


def test_an_unknown_calendar_is_named():
    with pytest.raises(ValueError, match="calendar='lunar'; expected one of"):
        year_fractions(np.zeros(2), "lunar")


def test_the_model_reads_the_year_fraction_a_batch_carries():
    encoding = CoordinateEncoding(["day_of_year"], 4, dtype=np.float64, seed=0)
    time = np.full((1, 2), 1e9)
    quarter = encoding.features({"time": time, "year_fraction": np.array([[0.25, np.nan]])},
                                (1, 2))
    np.testing.assert_allclose(quarter, [[[1.0, 0.0], [0.0, 0.0]]], atol=1e-12)
    phase = (1e9 / 86400.0 % DAYS_PER_YEAR) / DAYS_PER_YEAR  # no year_fraction: the mean year
    mean_year = encoding.features({"time": time}, (1, 2))
    np.testing.assert_allclose(mean_year[0, 0], [np.sin(2 * np.pi * phase),
                                                 np.cos(2 * np.pi * phase)], atol=1e-12)


def cftime_grid(calendar, times):
    return xr.Dataset({"t": (("time", "lat", "lon"), np.ones((len(times), 2, 2)))},
                      coords={"time": times, "lat": [0.0, 1.0], "lon": [0.0, 1.0]})


@pytest.mark.parametrize("calendar", CALENDARS)
def test_grid_and_signal_batches_carry_the_calendars_year_fraction(calendar):
    times = random_times(calendar, n=18, seed=1)
    encoding = CoordinateEncoding(["day_of_year"], 4, dtype=np.float64, seed=0)
    expected = by_hand(times, calendar)
    grid = GridAdapter(["t"], {"lat": 1, "lon": 1}, normalize=False).fit(
        cftime_grid(calendar, np.sort(times)))
    batch = grid.encode(cftime_grid(calendar, times))
    np.testing.assert_allclose(batch.coords["year_fraction"], expected[:, None].repeat(4, 1),
                               atol=1e-12)
    features = encoding.features(batch.coords, batch.key_padding_mask.shape)
    np.testing.assert_allclose(features[:, 0], np.stack([np.sin(2 * np.pi * expected),
                                                         np.cos(2 * np.pi * expected)], -1),
                               atol=1e-12)
    hours = xr.date_range("2000-12-30", periods=4, freq="6h", calendar=calendar,
                          use_cftime=True).values
    series = xr.Dataset({"x": ("time", np.arange(4.0))}, coords={"time": hours})
    frames = SignalAdapter(["x"], 1, normalize=False).fit(series).encode(series)
    np.testing.assert_allclose(frames.coords["year_fraction"][0], by_hand(hours, calendar),
                               atol=1e-12)


def test_datetime64_batches_count_gregorian_years():
    times = np.array(["2000-12-31T12", "2001-07-02", "2100-03-01"], dtype="datetime64[ns]")
    ds = xr.Dataset({"t": (("time", "lat", "lon"), np.ones((3, 2, 2)))},
                    coords={"time": times, "lat": [0.0, 1.0], "lon": [0.0, 1.0]})
    batch = GridAdapter(["t"], {"lat": 1, "lon": 1}, normalize=False).fit(ds).encode(ds)
    # 2000 is a leap year, 2100 is not: day 365.5 of 366, 182 of 365, 59 of 365
    np.testing.assert_allclose(batch.coords["year_fraction"][:, 0],
                               [365.5 / 366, 182 / 365, 59 / 365], atol=1e-12)
    numbers = ds.assign_coords(time=[0.0, 1.0, 2.0])  # a time axis of numbers has no year
    plain = GridAdapter(["t"], {"lat": 1, "lon": 1}, normalize=False).fit(numbers)
    assert "year_fraction" not in plain.encode(numbers).coords
