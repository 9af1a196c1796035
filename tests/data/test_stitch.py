"""Stitcher: a batch's windows are blended back in a few array operations, to the bit what
writing them one window after another gives (Blender.add per sample)."""
import numpy as np
import pytest
import xarray as xr

from seqattn.data import Placement, Stitcher, Template
from seqattn.data.blend import Blender, taper


def _template():
    ds = xr.Dataset({"t": (("time", "lat", "lon"), np.zeros((7, 9, 4), np.float32)),
                     "z": (("lat",), np.zeros(9))},
                    coords={"time": np.arange(7), "lat": np.arange(9.0), "lon": np.arange(4.0)})
    return Template.of(ds)


def _batches(template, rng, count=4):
    """Random windows of 5 lats by 3 times, overlapping each other (several samples of one
    batch write the same cells), with NaNs among the values."""
    for _ in range(count):
        b = 6
        starts = np.stack([rng.integers(0, 5, b), rng.integers(0, 5, b)], axis=1)
        placement = Placement(template, ("lat", "time"), (5, 3), (2, 1), starts)
        t = rng.standard_normal((b, 3, 5, 4)).astype(np.float32)
        t[rng.random(t.shape) < 0.2] = np.nan
        z = rng.standard_normal((b, 5))
        z[rng.random(z.shape) < 0.2] = np.nan
        yield {"t": t, "z": z}, placement


def _one_window_after_another(template, batches):
    """The blend that writing each sample's window in turn gives."""
    out = {}
    for name in ("t", "z"):
        dims = template.var_dims[name]
        blender = Blender(tuple(template.sizes[d] for d in dims))
        for arrays, placement in batches:
            window = placement.window_sizes()
            overlap = dict(zip(placement.dims, placement.overlap))
            at = {d: i for i, d in enumerate(placement.dims)}
            weights = np.ones(())
            for d in dims:
                weights = np.multiply.outer(weights, taper(window[d], overlap.get(d, 0)))
            for b, values in enumerate(arrays[name]):
                index = tuple(slice(placement.starts[b, at[d]],
                                    placement.starts[b, at[d]] + window[d])
                              if d in at else slice(None) for d in dims)
                blender.add(index, values, weights)
        out[name] = blender.result()
    return out


def test_a_batch_of_overlapping_windows_blends_as_one_window_after_another():
    template = _template()
    batches = list(_batches(template, np.random.default_rng(0)))
    stitcher = Stitcher(template, ["t", "z"])
    for arrays, placement in batches:
        stitcher.add(arrays, placement)
    got = stitcher.result()
    want = _one_window_after_another(template, batches)
    # float32 data come back float32, as before
    np.testing.assert_array_equal(got.t.values, want["t"].astype(np.float32))
    np.testing.assert_array_equal(got.z.values, want["z"])
    assert np.isnan(got.t.values).any() and not np.isnan(got.t.values).all()


def test_identical_overlapping_values_come_back_bit_for_bit():
    template = _template()
    rng = np.random.default_rng(1)
    truth = rng.standard_normal((7, 9, 4))
    stitcher = Stitcher(template, ["t"])
    starts = np.array([[0, 0], [2, 1], [4, 4], [1, 2], [4, 0]])
    placement = Placement(template, ("lat", "time"), (5, 3), (3, 2), starts)
    windows = np.stack([truth[s[1]:s[1] + 3, s[0]:s[0] + 5] for s in starts])
    stitcher.add({"t": windows}, placement)
    covered = np.zeros((7, 9), bool)
    for s in starts:
        covered[s[1]:s[1] + 3, s[0]:s[0] + 5] = True
    got = stitcher.result().t.values.astype(np.float64)
    np.testing.assert_array_equal(got[covered], truth.astype(np.float32)[covered])
    assert np.isnan(got[~covered]).all()


def test_a_window_outside_the_source_is_an_error_that_names_the_dim():
    template = _template()
    placement = Placement(template, ("lat", "time"), (5, 3), (0, 0), np.array([[5, 0]]))
    with pytest.raises(ValueError, match="along 'lat' put windows of 5 outside the source's 9"):
        Stitcher(template, ["t"]).add({"t": np.zeros((1, 3, 5, 4))}, placement)
