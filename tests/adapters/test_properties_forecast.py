"""ForecastWindows over random station series (hypothesis), through a GridAdapter (time a
sample dim) and a SignalAdapter (time the token dim): time axes of numbers, datetime64 or cftime
(360_day) in any order, evenly spaced or with gaps; 0, 1 or more steps and stations; every
dtype; NaN scattered, over a whole time step, everywhere, or one +inf; any history, leads and
increments. Either the targets decode to the data at their valid times (NaN where missing or no
sample reaches) and a persistence model predicts the data `lead` earlier on the user's
coordinates, or the error names the dim, lead or variable at fault - exactly when the case must
be refused."""
import numpy as np
import pytest
import xarray as xr
from hypothesis import given, settings
from hypothesis import strategies as st

import seqattn
from seqattn.adapters import ForecastWindows, GridAdapter, SignalAdapter
from property_inputs import (DTYPES, NAN_PATTERNS, ORDERS, TIME_KINDS, absolute_tolerance,
                             as_expected, as_times, assert_names, coordinate, tolerance, values)


@st.composite
def forecasts(draw):
    n_time, n_station = draw(st.integers(0, 6)), draw(st.integers(0, 2))
    # forward, evenly spaced time axes most often: the others are refused whole
    hours, _ = coordinate(draw, n_time, draw(st.sampled_from(("ascending",) * 4 + ORDERS)),
                          gaps=draw(st.sampled_from([False, False, True])))
    dtype = draw(st.sampled_from(DTYPES))
    x = values(draw, (n_time, n_station), dtype, draw(st.sampled_from(NAN_PATTERNS)))
    ds = xr.Dataset({"x": (("time", "station"), x, {"units": "m"})},
                    coords={"time": as_times(hours, draw(st.sampled_from(TIME_KINDS))),
                            "station": np.arange(n_station)})
    setup = {"signal": draw(st.booleans()), "history": draw(st.integers(0, 2)),
             "steps": sorted(draw(st.sets(st.integers(1, 3), min_size=1, max_size=2))),
             "increments": draw(st.booleans())}
    return ds, setup, hours


def refusals(ds, setup, hours):
    """The names an error must mention for this case (none: it must succeed)."""
    n = ds.sizes["time"]
    names = [d for d in ("station", "time") if ds.sizes[d] == 0]
    names += ["time"] if n > 1 and not (np.diff(hours) > 0).all() else []  # forward in time
    names += ["time"] if n > 1 and len(set(np.diff(hours))) > 1 else []
    names += [f"leads[{i}]" for i, s in enumerate(setup["steps"]) if setup["history"] + s >= n]
    x = ds["x"].values
    names += ["x"] if x.size and not np.isfinite(x.astype(np.float64)).any() else []
    return names


def persistence(setup):
    """A model that forecasts no change: the last input value of each token (its history's
    newest step on a grid, the frame itself on a signal), or a zero increment."""
    column = 0 if setup["signal"] else setup["history"]

    def model(tokens, key_padding_mask):
        if setup["increments"]:
            return np.zeros((*tokens.shape[:2], 1))
        return tokens[..., column:column + 1]
    return model


def persisted(x, s, history, signal, increments, mean):
    """What the persistence model predicts at lead `s` for data `x` (time, station): NaN
    before the first valid time, where the target is missing (mask_missing) and where every
    sample reaching a cell had no valid input at all; the newest input where it is valid; on a
    grid, the mean (0 in normalized units) for a token without input in a sample with some, or
    NaN as an increment from nothing; inf where this is left unchecked (a signal's frames
    without input, averaged over the samples that hold them)."""
    n = len(x)
    valid = np.isfinite(x)
    out = np.full_like(x, np.nan)
    for j in range(s if signal else history + s, n):
        t = j - s
        # the samples (initial times) whose targets hold valid time j
        starts = range(max(t, history), min(t + history, n - 1 - s) + 1) if signal else [t]
        seen = np.array([valid[u - history:u + 1].any(axis=0) for u in starts])
        seen = seen.any(axis=0) if signal else np.broadcast_to(seen.any(), valid[t].shape)
        fallback = np.inf if signal else (np.nan if increments else mean)
        out[j] = np.where(valid[t], x[t], np.where(seen, fallback, np.nan))
        out[j][~valid[j]] = np.nan
    return out


@settings(max_examples=150, deadline=None)
@given(forecasts())
def test_forecast_round_trip_or_named_error(case):
    ds, setup, hours = case
    signal, history, steps = setup["signal"], setup["history"], setup["steps"]
    data = ds.transpose("station", "time") if signal else ds
    before = data.copy(deep=True)
    adapter = (SignalAdapter(["x"], 1, dtype="float64") if signal
               else GridAdapter(["x"], {"station": 1}, dtype="float64"))
    windows = ForecastWindows(adapter, leads=steps, history=history,
                              increments=setup["increments"])
    names = refusals(ds, setup, hours)
    if names:
        with pytest.raises((ValueError, TypeError)) as refused:
            windows.fit(data)
        assert_names(refused.value, *names)
        return
    windows.fit(data)
    batch = windows.batches(data, batch_size=None).encode_all()
    decoded = windows.decode(batch)  # its own targets
    x = as_expected(ds["x"].values)  # (time, station)
    rtol = tolerance(ds["x"].dtype)
    atol = absolute_tolerance(x, ds["x"].dtype)
    got = decoded["x"].transpose("lead", "time", "station").values
    for i, s in enumerate(steps):
        first = s if signal else history + s  # the first valid time a sample reaches
        expected = x.copy()
        expected[:first] = np.nan
        if setup["increments"]:  # an increment needs the value it is a change from
            expected[s:][np.isnan(x[:-s])] = np.nan
        np.testing.assert_allclose(got[i], expected, rtol=rtol, atol=atol,
                                   err_msg=f"lead {s}")
    predicted = seqattn.predict(persistence(setup), data, windows)["x"]
    predicted = predicted.transpose("lead", "time", "station").values
    mean = float(windows.adapter.normalizer.stats["x"].sel(stat="mean"))
    for i, s in enumerate(steps):
        expected = persisted(x, s, history, signal, setup["increments"], mean)
        checked = ~np.isinf(expected)
        np.testing.assert_allclose(predicted[i][checked], expected[checked], rtol=rtol,
                                   atol=atol, err_msg=f"persistence at lead {s}")
    assert decoded["time"].equals(ds["time"]) and decoded["station"].equals(ds["station"])
    xr.testing.assert_identical(data, before)
