"""seqattn.evaluate's weights: a latitude-weighted RMSE of a grid forecast, against the same
score computed by hand from the Dataset."""
import numpy as np
import pytest
import xarray as xr

import seqattn
from seqattn.adapters import ForecastWindows, GridAdapter

LEADS = (1, 2)


def grid(times=40):
    rng = np.random.default_rng(3)
    lat, lon = np.array([-60.0, -20.0, 20.0, 60.0]), np.arange(4) * 90.0
    # larger changes at high latitudes: weighting by cos(lat) must lower the score
    amplitude = 1 + np.abs(lat)[None, :, None] / 10
    x = np.cumsum(rng.normal(size=(times, 4, 4)) * amplitude, axis=0)
    time = np.datetime64("2020-01-01T00") + np.arange(times) * np.timedelta64(6, "h")
    return xr.Dataset({"x": (("time", "lat", "lon"), x.astype(np.float32))},
                      coords={"time": time, "lat": lat, "lon": lon})


def zero_change(tokens, key_padding_mask, coords=None):
    """Zero increments: persistence."""
    return np.zeros((*tokens.shape[:2], 4), np.float32)


def by_hand(ds, test, weighted):
    x = ds.x.values.astype(np.float64)
    weight = np.cos(np.deg2rad(ds.lat.values))[None, :, None] * np.ones((1, 4, 4)) if weighted \
        else np.ones((1, 4, 4))
    found = []
    for lead in LEADS:
        starts = np.arange(test.start, test.stop - lead)
        error = x[starts + lead] - x[starts]
        w = np.broadcast_to(weight, error.shape)
        found.append(np.sqrt(np.sum(w * error ** 2) / np.sum(w)))
    return np.array(found)


@pytest.mark.parametrize("weighted", [False, True])
def test_latitude_weighted_rmse_matches_a_hand_computation(weighted):
    ds = grid()
    windows = ForecastWindows(GridAdapter(["x"], {"lat": 2, "lon": 2}), leads=list(LEADS),
                              history=0, increments=True).fit(ds.isel(time=slice(0, 20)))
    test = slice(20, 40)
    weights = np.cos(np.deg2rad(ds.lat)) if weighted else None
    scores = seqattn.evaluate(zero_change, ds.isel(time=test), windows, baselines=False,
                              weights=weights)
    np.testing.assert_allclose(scores.rmse.sel(predictor="model").values, by_hand(ds, test,
                               weighted), rtol=1e-5)


def test_weighting_changes_the_score_and_bad_weights_are_named():
    ds = grid()
    windows = ForecastWindows(GridAdapter(["x"], {"lat": 2, "lon": 2}), leads=list(LEADS),
                              history=0, increments=True).fit(ds.isel(time=slice(0, 20)))
    test = ds.isel(time=slice(20, 40))
    plain = seqattn.evaluate(zero_change, test, windows, baselines=False)
    weighted = seqattn.evaluate(zero_change, test, windows, baselines=False,
                                weights=np.cos(np.deg2rad(ds.lat)))
    assert (weighted.rmse < plain.rmse).all()
    with pytest.raises(TypeError, match="weights"):
        seqattn.evaluate(zero_change, test, windows, baselines=False, weights=[1, 2, 3, 4])
    with pytest.raises(ValueError, match="lacking"):
        seqattn.evaluate(zero_change, test, windows, baselines=False,
                         weights=xr.DataArray(np.ones(3), dims="depth"))
    with pytest.raises(ValueError, match=">= 0"):
        seqattn.evaluate(zero_change, test, windows, baselines=False,
                         weights=-np.cos(np.deg2rad(ds.lat)))
