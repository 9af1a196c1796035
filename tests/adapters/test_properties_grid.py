"""GridAdapter over random grids (hypothesis): latitudes in any order, with gaps and repeats;
sizes 0 and 1; every dtype; NaN scattered, over a whole time step, everywhere, or one +inf.
Either encode -> decode gives the data back on the same coordinates (NaN where missing) and an
identity model's predictions are the data again, or the error names the dim, patch or variable
at fault - exactly when the case is one the adapter must refuse."""
import numpy as np
import pytest
import xarray as xr
from hypothesis import example, given, settings
from hypothesis import strategies as st

import seqattn
from seqattn.adapters import GridAdapter
from property_inputs import (DTYPES, NAN_PATTERNS, ORDERS, absolute_tolerance, as_expected,
                             assert_names, coordinate, tolerance, values)


@st.composite
def grids(draw):
    n_time, n_lat, n_lon = draw(st.integers(0, 3)), draw(st.integers(0, 4)), draw(st.integers(1, 4))
    # ordered latitudes most often: the others are refused whole
    lat, lat_monotonic = coordinate(draw, n_lat, draw(st.sampled_from(
        ("ascending", "descending") * 2 + ORDERS)))
    time, _ = coordinate(draw, n_time, draw(st.sampled_from(ORDERS)))  # samples: any order
    dtype = draw(st.sampled_from(DTYPES))
    x = values(draw, (n_time, n_lat, n_lon), dtype, draw(st.sampled_from(NAN_PATTERNS)))
    ds = xr.Dataset({"t": (("time", "lat", "lon"), x, {"units": "K"})},
                    coords={"time": time, "lat": lat, "lon": np.arange(n_lon) * 90.0})
    patch = {"lat": draw(st.integers(1, max(n_lat, 1) + 1)), "lon": draw(st.integers(1, 3))}
    return ds, patch, lat_monotonic


def float16_grid():
    """Values in the thousands, whose squares float16 cannot hold."""
    x = np.array([[[1500.0, -2200.0], [3100.0, 900.0]], [[-400.0, 2700.0], [np.nan, 1800.0]]])
    ds = xr.Dataset({"t": (("time", "lat", "lon"), x.astype(np.float16), {"units": "K"})},
                    coords={"time": [0.0, 1.0], "lat": [10.0, 0.0], "lon": [0.0, 90.0]})
    return ds, {"lat": 1, "lon": 2}, True


def refusals(ds, patch, lat_monotonic):
    """The names an error must mention for this case (none: it must succeed)."""
    names = [d for d in ("lat", "lon") if ds.sizes[d] == 0]
    names += ["time"] if ds.sizes["time"] == 0 else []
    names += [] if lat_monotonic else ["lat"]
    names += ["patch"] if any(0 < ds.sizes[d] < p for d, p in patch.items()) else []
    x = ds["t"].values
    names += ["t"] if x.size and not np.isfinite(x.astype(np.float64)).any() else []
    return names


def identity(tokens, key_padding_mask):
    return tokens[..., :-1]  # the values: every column but the validity channel


def shifted(tokens, key_padding_mask):
    return tokens[..., :-1] + 1.0  # one std above the data, missing cells included


@settings(max_examples=100, deadline=None)
@given(grids())
@example(float16_grid())
def test_grid_round_trip_or_named_error(case):
    ds, patch, lat_monotonic = case
    before = ds.copy(deep=True)
    adapter = GridAdapter(["t"], patch, dtype="float64")
    names = refusals(ds, patch, lat_monotonic)
    if names:
        with pytest.raises((ValueError, TypeError)) as refused:
            adapter.fit(ds)
        assert_names(refused.value, *names)
        return
    adapter.fit(ds)
    expected = as_expected(ds["t"].values)
    rtol = tolerance(ds["t"].dtype)
    atol = absolute_tolerance(expected, ds["t"].dtype)
    decoded = adapter.decode(adapter.encode(ds))
    predicted = seqattn.predict(identity, ds, adapter)
    for out in (decoded, predicted):
        xr.testing.assert_identical(out.coords.to_dataset(), ds.coords.to_dataset())
        np.testing.assert_allclose(out["t"].values.astype(np.float64), expected, rtol=rtol,
                                   atol=atol)
        assert out["t"].attrs == ds["t"].attrs
    # unmasked predictions: a time step with no valid cell predicts NaN, never the bias; one
    # fully valid is the data one std up
    unmasked = seqattn.predict(shifted, ds, adapter, mask_missing=False)["t"].values
    std = float(adapter.normalizer.stats["t"].sel(stat="std"))
    for step, x in enumerate(expected):
        if np.isnan(x).all():
            assert np.isnan(unmasked[step]).all()
        elif not np.isnan(x).any():
            np.testing.assert_allclose(unmasked[step], x + std, rtol=rtol, atol=rtol * 10 * std)
    xr.testing.assert_identical(ds, before)
