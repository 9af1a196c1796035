"""Per-level statistics meet the data by coordinate value: a level written 1e-7 off, or stored
as float32, meets its statistic (within seqattn.data.normalize.MATCH_TOLERANCE of the levels'
spacing); levels in another order or a subset of them meet theirs; a level fit never saw, a
label that differs, repeated levels at fit, or a dim without coordinates of another size are
refused with an error naming the coordinate and the value - never all-NaN predictions."""
import numpy as np
import pytest
import xarray as xr

import seqattn
from seqattn.adapters import GridAdapter
from seqattn.data.normalize import MATCH_TOLERANCE, Normalizer

LEVELS = [1000.0, 850.0, 500.0]


def levels_grid(levels=LEVELS, seed=0):
    """(time, level, lat, lon) temperatures whose mean and spread differ by level."""
    rng = np.random.default_rng(seed)
    t = 200 + np.arange(len(levels))[:, None, None] * 30 \
        + rng.normal(size=(4, len(levels), 2, 2)) * (1 + np.arange(len(levels)))[:, None, None]
    return xr.Dataset({"t": (("time", "level", "lat", "lon"), t)},
                      coords={"time": np.arange(4), "level": levels, "lat": [10.0, 20.0],
                              "lon": [0.0, 90.0]})


def fitted():
    return GridAdapter(["t"], {"lat": 1, "lon": 1}, channel_dims=["level"], per_dims=["level"],
                       dtype="float64").fit(levels_grid())


def identity(tokens, key_padding_mask):
    return tokens[..., :len(LEVELS)]


def test_levels_a_hair_off_meet_their_statistics():
    adapter, ds = fitted(), levels_grid()
    exact = seqattn.predict(identity, ds, adapter)
    spacing = 150.0
    for shifted in (ds.assign_coords(level=ds.level + 1e-7),
                    ds.assign_coords(level=ds.level + 0.9 * MATCH_TOLERANCE * spacing),
                    ds.assign_coords(level=ds.level.astype(np.float32))):
        out = seqattn.predict(identity, shifted, adapter)
        assert not out["t"].isnull().any()
        np.testing.assert_allclose(out["t"].values, exact["t"].values, rtol=1e-12)
        np.testing.assert_array_equal(out["level"].values, shifted["level"].values)
    np.testing.assert_allclose(exact["t"].values, ds["t"].values, rtol=1e-12)


def test_levels_in_another_order_or_a_subset_meet_their_own_statistics():
    adapter, ds = fitted(), levels_grid()
    stats = adapter.normalizer.stats["t"]
    for part in (ds.isel(level=[2, 0]), ds.isel(level=[1]), ds.sortby("level")):
        tokens = adapter.encode(part).values  # (time, lat * lon, level) in this order
        mean = stats.sel(stat="mean", level=part.level.values).values
        std = stats.sel(stat="std", level=part.level.values).values
        expected = (part["t"].transpose("time", "lat", "lon", "level").values - mean) / std
        np.testing.assert_allclose(tokens, expected.reshape(tokens.shape), rtol=1e-12)


@pytest.mark.parametrize("levels, value", [([1000.0, 850.0, 300.0], "300.0"),
                                           ([1000.0, 850.0, 500.001], "500.001")])
def test_a_level_fit_never_saw_is_refused_by_name(levels, value):
    adapter = fitted()
    other = levels_grid(levels)
    with pytest.raises(ValueError, match=rf"coordinate 'level' = {value} has no statistics "
                                         r"of variable 't': fit saw 'level' = \[1000.0, 850.0, "
                                         r"500.0\]"):
        seqattn.predict(identity, other, adapter)
    with pytest.raises(ValueError, match="coordinate 'level'"):
        adapter.encode(other)


def test_repeated_levels_at_fit_are_refused():
    with pytest.raises(ValueError, match="coordinate 'level' of variable 't' repeats the value "
                                         "850.0; per_dims='level'"):
        GridAdapter(["t"], {"lat": 1, "lon": 1}, channel_dims=["level"],
                    per_dims=["level"]).fit(levels_grid([1000.0, 850.0, 850.0]))


def test_labels_match_exactly_and_unlabelled_dims_by_size():
    ds = xr.Dataset({"x": (("time", "station"), np.arange(12.0).reshape(4, 3))},
                    coords={"station": ["a", "b", "c"]})
    normalizer = Normalizer.fit(ds, ["x"], per_dims=("station",))
    np.testing.assert_allclose(normalizer.apply(ds.isel(station=[2, 0]))["x"].values,
                               normalizer.apply(ds)["x"].values[:, [2, 0]])
    for labels in (["a", "b", "d"], np.array(["a", "b", "d"], dtype=object)):
        with pytest.raises(ValueError, match="coordinate 'station' = 'd' has no statistics"):
            normalizer.apply(ds.assign_coords(station=labels))
    bare = Normalizer.fit(ds.drop_vars("station"), ["x"], per_dims=("station",))
    with pytest.raises(ValueError, match="'x' has 2 entries along 'station', but its statistics "
                                         "per 'station' were fitted on 3"):
        bare.apply(ds.drop_vars("station").isel(station=[0, 1]))


def test_statistics_meet_variables_whose_dims_come_in_another_order():
    # statistics per (level, channel) applied to a variable laid out (channel, time, level):
    # the same numbers as xarray's own broadcasting by dim name gives, and back again
    rng = np.random.default_rng(3)
    ds = xr.Dataset({"x": (("time", "level", "channel"), rng.normal(size=(6, 3, 2)) * 5 + 7)},
                    coords={"level": LEVELS})
    ds["x"].attrs["units"] = "K"
    normalizer = Normalizer.fit(ds, ["x"], per_dims=("level", "channel"))
    turned = ds.transpose("channel", "time", "level").isel(level=[2, 0])
    stats = normalizer.stats["x"].sel(level=turned.level)
    want = (turned["x"] - stats.sel(stat="mean", drop=True)) / stats.sel(stat="std", drop=True)
    got = normalizer.apply(turned)
    assert got["x"].dims == ("channel", "time", "level") and got["x"].attrs == {"units": "K"}
    np.testing.assert_allclose(got["x"].values, want.transpose(*got["x"].dims).values,
                               rtol=1e-12)
    xr.testing.assert_allclose(normalizer.invert(got), turned)
    assert np.abs(got["x"].values).max() < 4  # normalized, not the raw values
