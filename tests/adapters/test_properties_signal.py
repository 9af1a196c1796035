"""SignalAdapter over random series (hypothesis): numeric, datetime64 and cftime (360_day) time
axes in any order, with gaps and repeats; 0, 1 or more steps and stations; every dtype; NaN
scattered, over a whole station, everywhere, or one +inf; frames of any window and hop, with
calendar channels or without. Either encode -> decode gives the series back on the same
coordinates (NaN where missing) and an identity model's predictions are the series again, or
the error names the dim or variable at fault - exactly when the case must be refused."""
import numpy as np
import pytest
import xarray as xr
from hypothesis import example, given, settings
from hypothesis import strategies as st

import seqattn
from seqattn.adapters import SignalAdapter
from property_inputs import (DTYPES, NAN_PATTERNS, ORDERS, TIME_KINDS, absolute_tolerance,
                             as_expected, as_times, assert_names, coordinate, tolerance, values)


@st.composite
def signals(draw):
    n_station, n_time = draw(st.integers(0, 2)), draw(st.integers(0, 6))
    hours, monotonic = coordinate(draw, n_time, draw(st.sampled_from(ORDERS)))
    kind = draw(st.sampled_from(TIME_KINDS))
    station, _ = coordinate(draw, n_station, draw(st.sampled_from(ORDERS)))
    dtype = draw(st.sampled_from(DTYPES))
    x = values(draw, (n_station, n_time), dtype, draw(st.sampled_from(NAN_PATTERNS)))
    ds = xr.Dataset({"x": (("station", "time"), x, {"units": "m"})},
                    coords={"station": station, "time": as_times(hours, kind)})
    window = draw(st.integers(1, 3))
    frames = {"window": window, "hop": draw(st.integers(1, window)),
              "calendar": draw(st.booleans())}
    return ds, frames, monotonic, kind


def refusals(ds, frames, monotonic, kind):
    """The names an error must mention for this case (none: it must succeed)."""
    names = [d for d in ("station", "time") if ds.sizes[d] == 0]
    names += [] if monotonic else ["time"]
    names += ["time"] if frames["calendar"] and kind == "number" else []
    x = ds["x"].values
    names += ["x"] if x.size and not np.isfinite(x.astype(np.float64)).any() else []
    return names


# float32 values far apart: the smaller comes back within float32's precision at the larger
# one's magnitude (found by hypothesis against a tolerance relative to each element)
FAR_APART = xr.Dataset({"x": (("station", "time"), np.array([[-1720.3358, 57.632603]],
                                                            np.float32), {"units": "m"})},
                       coords={"station": [1.0], "time": [1.0, 2.0]})


@settings(max_examples=100, deadline=None)
@given(signals())
@example((FAR_APART, {"window": 1, "hop": 1, "calendar": False}, True, "number"))
def test_signal_round_trip_or_named_error(case):
    ds, frames, monotonic, kind = case
    before = ds.copy(deep=True)
    adapter = SignalAdapter(["x"], frames["window"], hop=frames["hop"],
                            calendar=frames["calendar"], dtype="float64")
    names = refusals(ds, frames, monotonic, kind)
    if names:
        with pytest.raises((ValueError, TypeError)) as refused:
            adapter.fit(ds)
        assert_names(refused.value, *names)
        return
    adapter.fit(ds)
    width = adapter.value_width()
    expected = as_expected(ds["x"].values)
    rtol = tolerance(ds["x"].dtype)
    atol = absolute_tolerance(expected, ds["x"].dtype)
    batch = adapter.encode(ds)
    assert np.isfinite(batch.tokens).all()
    decoded = adapter.decode(batch)
    predicted = seqattn.predict(lambda tokens, mask: tokens[..., :width], ds, adapter)
    for out in (decoded, predicted):
        xr.testing.assert_identical(out.coords.to_dataset(), ds.coords.to_dataset())
        np.testing.assert_allclose(out["x"].transpose("station", "time").values.astype(
            np.float64), expected, rtol=rtol, atol=atol)
    # unmasked predictions: a station without any valid step predicts NaN, never the bias
    unmasked = seqattn.predict(lambda tokens, mask: tokens[..., :width] + 1.0, ds, adapter,
                               mask_missing=False)["x"].transpose("station", "time").values
    std = float(adapter.normalizer.stats["x"].sel(stat="std"))
    for station, x in enumerate(expected):
        if np.isnan(x).all():
            assert np.isnan(unmasked[station]).all()
        elif not np.isnan(x).any():
            np.testing.assert_allclose(unmasked[station], x + std, rtol=rtol,
                                       atol=rtol * 10 * std)
    xr.testing.assert_identical(ds, before)
