"""ForecastWindows: history as channels, targets at several leads, dropped edges, valid times."""
import dask.array as dsa
import numpy as np
import pytest
import xarray as xr
from hypothesis import given, settings

from adapters_helpers import (assert_targets_at_valid_times, forecast_batches, forecast_cases,
                              make_grid, make_signal)
from seqattn.adapters import Batch, ForecastWindows, GridAdapter, SignalAdapter

ADAPTER = GridAdapter(["t", "u", "lsm"], {"lat": 2, "lon": 2}, dtype="float64", normalize=False)


def test_layout_of_history_targets_and_leads():
    ds = make_grid(time=6, lat=4, lon=4)
    windows = forecast_batches(ds, ADAPTER, leads=["6h", "12h"], history=1, batch_size=None)
    batch = next(iter(windows))
    # initial times 1..4 for 6 h, 1..3 for 12 h (the rest would pass the end): 7 samples
    assert windows.samples[:, :2].tolist() == [[1, 0], [1, 1], [2, 0], [2, 1], [3, 0], [3, 1],
                                               [4, 0]]
    # per token: t and u as 4 cells x 2 steps, lsm 4 cells, 3 validity channels
    assert batch.tokens.shape == (7, 4, 23) and batch.targets.shape == (7, 4, 8)
    # sample 1 starts at 06:00 with lead 12 h; token 1 is lat rows 0-1, lon columns 2-3
    inputs = ds.t.values[0:2, 0:2, 2:4]                       # the steps 00:00 and 06:00
    np.testing.assert_array_equal(batch.tokens[1, 1, :8], np.moveaxis(inputs, 0, -1).ravel())
    np.testing.assert_array_equal(batch.targets[1, 1, :4], ds.t.values[3, 0:2, 2:4].ravel())
    np.testing.assert_array_equal(batch.targets[1, 1, 4:], ds.u.values[3, 0:2, 2:4].ravel())
    assert batch.lead.dtype.kind == "m" and batch.lead[1] == np.timedelta64(12, "h")
    assert batch.coords["lead"][1].tolist() == [12 * 3600.0] * 4
    assert batch.coords["time"][1, 0] == (ds.time.values[1] - np.datetime64(0, "s")) \
        / np.timedelta64(1, "s")                              # the initial time, in seconds
    assert batch.target_valid.all()


def test_missing_targets_are_masked_never_zeros_and_predictions_go_to_valid_times():
    ds = make_grid(time=4, lat=2, lon=2, static=False)
    ds["t"][3, 0, 0] = np.nan
    adapter = GridAdapter(["t", "u"], {"lat": 2, "lon": 2}, dtype="float64", normalize=False)
    windows = forecast_batches(ds, adapter, leads=[1, 2], batch_size=None)
    batch = next(iter(windows))
    last = [i for i, row in enumerate(windows.samples) if row[0] + row[1] + 1 == 3]
    assert not batch.target_valid[last, 0, 0].any() and batch.target_valid[last, 0, 1:].all()
    assert (batch.targets[last, 0, 0] == 0).all()             # a filler, flagged above
    out = windows.windows.decode(batch, 2 * batch.targets)
    assert np.isnan(out.t.values[:, 3, 0, 0]).all()
    np.testing.assert_array_equal(out.u.sel(lead=np.timedelta64(12, "h")).values[2:],
                                  2 * ds.u.values[2:])
    unmasked = windows.windows.decode(batch, 2 * batch.targets, mask_missing=False)
    assert (unmasked.t.values[:, 3, 0, 0] == 0).all()


@settings(max_examples=40, deadline=None)
@given(forecast_cases())
def test_encode_decode_of_targets_is_exact_at_valid_times(case):
    ds, patch, history, leads, steps, channel_dims = case
    adapter = GridAdapter(["t", "u", "lsm"], patch, channel_dims=channel_dims, dtype=ds.t.dtype,
                          normalize=False)
    windows = forecast_batches(ds, adapter, leads=leads, history=history, batch_size=None)
    per_time = ds.sizes.get("level", 1) if not channel_dims else 1
    assert windows.n_samples == per_time * sum(ds.sizes["time"] - history - s for s in steps)
    assert_targets_at_valid_times(windows.windows.decode(next(iter(windows))), ds, history, steps)
    shuffled = forecast_batches(ds, adapter, leads=leads, history=history, targets=["u"],
                               batch_size=3, shuffle=True, seed=1)
    put_back = shuffled.put_back()
    for batch in shuffled:
        put_back.add(batch)
    assert_targets_at_valid_times(put_back.result(), ds, history, steps)


def test_normalized_targets_are_inverted_on_decode():
    ds = make_grid(time=5, level=2, lat=4, lon=4, nan_fraction=0.1)
    adapter = GridAdapter(["t", "u"], {"lat": 2, "lon": 2}, channel_dims=("level",),
                          per_dims=("level",), dtype="float64").fit(ds)
    windows = forecast_batches(ds, adapter, leads="6h", history=2, batch_size=4)
    batch = next(iter(windows))
    assert abs(batch.targets[batch.target_valid].mean()) < 1
    put_back = windows.put_back()
    for batch in windows:
        put_back.add(batch)
    out = put_back.result().isel(lead=0, time=slice(3, None)).drop_vars("lead")
    xr.testing.assert_allclose(out, ds[["t", "u"]].isel(time=slice(3, None)), rtol=1e-12)


def test_dask_data_is_read_only_at_the_steps_a_batch_needs():
    reads = []

    def block(x, block_info=None):
        reads.append(block_info[None]["chunk-location"][0])
        return x

    ds = make_grid(time=12, lat=2, lon=2, static=False)
    lazy = ds.chunk({"time": 1})
    lazy["t"] = lazy.t.copy(data=dsa.map_blocks(block, lazy.t.data, dtype=ds.t.dtype))
    adapter = GridAdapter(["t", "u"], {"lat": 2, "lon": 2}, dtype="float64", normalize=False)
    first = next(iter(forecast_batches(lazy, adapter, leads=[2], history=1, batch_size=2)))
    assert sorted(set(reads)) == [0, 1, 2, 3, 4]          # t = 1, 2: steps 0-2 in, 3-4 out
    expected = next(iter(forecast_batches(ds, adapter, leads=[2], history=1, batch_size=2)))
    np.testing.assert_array_equal(first.tokens, expected.tokens)
    np.testing.assert_array_equal(first.targets, expected.targets)


@pytest.mark.parametrize("kwargs, match", [
    ({"leads": ["36h"]}, r"leads\[0\]='36h' is 6 steps; with history = 0 a sample spans 7 steps"),
    ({"leads": [1], "history": 5}, r"leads\[0\]=1 is 1 steps; with history = 5"),
    ({"leads": ["6h"], "history": -1}, "history = -1; expected a whole number of steps >= 0"),
    ({"leads": ["6h", "9h"]}, r"leads\[1\]=.* is 1.5 steps of 'time'; expected a whole number"),
    ({"leads": ["-6h"]}, r"leads\[0\]=.* is -1 steps; expected at least 1"),
    ({"leads": [1, "6h"]}, r"repeat a lead \(\[1, 1\] steps\)"),
    ({"leads": []}, "leads is empty"),
    ({"leads": [1], "targets": ["lsm"]}, r"targets \['lsm'\] have no 'time' dim"),
    ({"leads": [1], "time_dim": "lat"}, "time_dim 'lat' is a patch or channel dim"),
])
def test_bad_forecast_arguments_name_the_argument(kwargs, match):
    with pytest.raises(ValueError, match=match):
        forecast_batches(make_grid(time=6, lat=4, lon=4), ADAPTER, **kwargs)


def test_uneven_time_axes_and_static_token_variables_with_history_are_refused():
    ds = make_grid(time=4, lat=2, lon=2)
    uneven = ds.assign_coords(time=ds.time.values[[0, 1, 2]].tolist() + [ds.time.values[3]
                                                                         + np.timedelta64(1, "h")])
    with pytest.raises(ValueError, match="'time' is not evenly spaced"):
        forecast_batches(uneven, ADAPTER, leads=[1])
    by_tokens = GridAdapter(["t", "u", "lsm"], {"lat": 2, "lon": 2}, variables_as="tokens")
    with pytest.raises(ValueError, match=r"static variable\(s\) \['lsm'\] one"):
        forecast_batches(ds, by_tokens, leads=[1], history=1)
    with pytest.raises(ValueError, match=r"targets \['u'\] are not among the adapter's variables"):
        forecast_batches(ds, GridAdapter(["t"], {"lat": 2, "lon": 2}, variables_as="tokens"),
                        leads=[1], targets=["u"])
    batch = next(iter(forecast_batches(ds, ADAPTER, leads=[1])))
    with pytest.raises(ValueError, match="Batch.concat is for ragged batches without targets"):
        Batch.concat([batch, batch])


def test_signal_frames_shifted_by_the_lead_are_the_targets():
    ds = make_signal(length=12, stations=2, start="2020-01-01", dtype="float64")
    adapter = SignalAdapter(["x"], 2, dtype="float64", normalize=False)
    windows = forecast_batches(ds, adapter, leads=["2h"], history=3, batch_size=None)
    batch = next(iter(windows))
    # initial times 3..9, stations 0 and 1; frames of 2 steps over steps t-3 .. t
    assert windows.samples[:3].tolist() == [[3, 0, 0], [3, 0, 1], [4, 0, 0]]
    assert batch.tokens.shape == (14, 2, 3) and batch.targets.shape == (14, 2, 2)
    np.testing.assert_array_equal(batch.values[2].ravel(), ds.x.values[0, 1:5])
    np.testing.assert_array_equal(batch.targets[2].ravel(), ds.x.values[0, 3:7])
    back = windows.windows.decode(batch).isel(lead=0)
    np.testing.assert_array_equal(back.x.values[:, 2:], ds.x.values[:, 2:])
    assert np.isnan(back.x.values[:, :2]).all()            # before the first lead's reach
    with pytest.raises(ValueError, match=r"a frame is 2 steps .* \(in ForecastWindows: "
                                         r"history >= 1\)"):
        forecast_batches(ds, adapter, leads=[1], history=0)
    with pytest.raises(ValueError, match="time_dim 'station' is not the SignalAdapter's time dim"):
        forecast_batches(ds, adapter, leads=[1], time_dim="station")


@settings(max_examples=15, deadline=None)
@given(forecast_cases())
def test_targets_as_increments_decode_to_the_targets_where_both_steps_are_present(case):
    ds, patch, history, leads, steps, channel_dims = case
    adapter = GridAdapter(["t", "u", "lsm"], patch, channel_dims=channel_dims, dtype="float64",
                          normalize=False)
    windows = forecast_batches(ds, adapter, leads=leads, history=history, batch_size=None,
                              increments=True)
    batch = next(iter(windows))
    plain = next(iter(forecast_batches(ds, adapter, leads=leads, history=history,
                                      batch_size=None)))
    assert not (batch.target_valid & ~plain.target_valid).any()
    out = windows.windows.decode(batch)
    for i, s in enumerate(steps):
        valid = slice(history + s, None)
        for name in ("t", "u"):
            truth = ds[name].isel(time=valid)
            present = truth.notnull() & ds[name].shift(time=s).isel(time=valid).notnull()
            got = out[name].isel(lead=i, time=valid).drop_vars("lead")
            np.testing.assert_array_equal(got.notnull(), present)
            np.testing.assert_allclose(got.where(present).values,
                                       truth.where(present).values, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("make, adapter", [
    (lambda: make_grid(time=9, level=2, lat=4, lon=4, nan_fraction=0.1),
     GridAdapter(["t", "u", "lsm"], {"lat": 2, "lon": 2}, channel_dims=("level",),
                 calendar=True, dtype="float64")),
    (lambda: make_signal(length=30, stations=2, start="2020-01-01", nan_fraction=0.1),
     SignalAdapter(["x"], 2, hop=1, calendar=True, dtype="float64")),
])
def test_in_memory_windows_give_the_same_batches_cut_from_one_encoding(make, adapter):
    ds = make()
    options = dict(leads=[1, 3], history=3, batch_size=5, shuffle=True, seed=2, increments=True)
    lazy, cached = (forecast_batches(ds, adapter, in_memory=m, **options) for m in (False, True))
    reads = []
    cached._encode = lambda rows, encode=cached._encode: reads.append(len(rows)) or encode(rows)
    for epoch in (0, 1):
        pairs = list(zip(lazy.epoch(epoch), cached.epoch(epoch), strict=True))
        for a, b in pairs:
            for field in ("tokens", "key_padding_mask", "valid", "targets", "target_valid",
                          "lead"):
                np.testing.assert_array_equal(getattr(a, field), getattr(b, field), field)
            assert a.coords.keys() == b.coords.keys()
            for name in a.coords:
                np.testing.assert_array_equal(a.coords[name], b.coords[name], name)
            np.testing.assert_array_equal(a.placement.starts, b.placement.starts)
    assert reads == [cached.n_samples]  # one encoding of every sample, for both epochs
    restored = ForecastWindows.from_dict(cached.windows.to_dict())
    assert restored.in_memory and restored.batches(ds).windows.in_memory
    xr.testing.assert_identical(cached.windows.decode(next(iter(cached.epoch(0)))),
                                lazy.windows.decode(next(iter(lazy.epoch(0)))))


def test_increments_scaled_per_lead_have_unit_rms_and_put_back_unchanged():
    ds = make_signal(length=40, stations=2, start="2020-01-01", nan_fraction=0.1)
    ds["x"] = ds.x.cumsum("time")  # a random walk: increments grow with the lead
    adapter = SignalAdapter(["x"], 2, hop=1, dtype="float64")
    options = dict(leads=[1, 4], history=3, batch_size=None, increments=True)
    plain = forecast_batches(ds, adapter, **options)
    scaled = forecast_batches(ds, adapter, lead_scales="rms", **options)
    (a,), (b,) = plain.epoch(0), scaled.epoch(0)
    lead = scaled.samples[:, 1]
    for i, scale in enumerate(scaled.windows.scales):
        valid = b.target_valid[lead == i]
        np.testing.assert_allclose(np.sqrt(np.mean(b.targets[lead == i][valid] ** 2)), 1.0)
        np.testing.assert_allclose(b.targets[lead == i], a.targets[lead == i] / scale)
    assert scaled.windows.scales[1] > 1.5 * scaled.windows.scales[0]
    xr.testing.assert_allclose(scaled.windows.decode(b), plain.windows.decode(a))
    xr.testing.assert_allclose(scaled.windows.decode(b, 0 * b.targets), plain.windows.decode(a, 0 * a.targets))
    # validation batches keep the training scales, and so does a saved set-up
    later = ds.isel(time=slice(10, None))
    (c,), (d,) = (w.windows.batches(later, batch_size=None).epoch(0) for w in (plain, scaled))
    scales = scaled.windows.scales[d.placement.starts[:, 0]][:, None, None]
    np.testing.assert_allclose(d.targets, c.targets / scales, rtol=1e-6)
    np.testing.assert_array_equal(
        ForecastWindows.from_dict(scaled.windows.to_dict()).scales, scaled.windows.scales)
    cached = forecast_batches(ds, adapter, lead_scales="rms", in_memory=True, **options)
    np.testing.assert_array_equal(next(iter(cached.epoch(0))).targets, b.targets)


@pytest.mark.parametrize("kwargs, match", [
    ({"lead_scales": "rms"}, "give increments=True as well"),
    ({"lead_scales": [1.0], "increments": True}, r"expected 'rms' or 2 positive numbers"),
    ({"lead_scales": [1.0, 0.0], "increments": True}, r"expected 'rms' or 2 positive numbers"),
    ({"lead_scales": "std", "increments": True}, "lead_scales='std'"),
])
def test_bad_lead_scales_say_what_to_give(kwargs, match):
    ds = make_signal(length=20, stations=1)
    with pytest.raises(ValueError, match=match):
        forecast_batches(ds, SignalAdapter(["x"], 1), leads=[1, 2], history=2, **kwargs)


def test_a_selection_with_a_gap_is_never_bridged_and_fit_reads_the_training_times_only():
    ds = make_grid(time=12, lat=2, lon=2, static=False)
    selected = np.ones(12, dtype=bool)
    selected[5] = False                                      # a gap at step 5
    windows = ForecastWindows(GridAdapter(["t", "u"], {"lat": 2, "lon": 2}), leads=[1],
                              history=1).fit(ds, where={"time": selected})
    batches = windows.batches(ds, where={"time": selected}, batch_size=None)
    steps = [(t - 1, t + 1) for t, _ in batches.samples[:, :2]]   # first and valid step
    assert all(not (first <= 5 <= valid) for first, valid in steps)
    assert len(steps) == 12 - 2 - 3                          # initial times 1..10 but 4, 5, 6
    mean = float(windows.adapter.normalizer.stats.t.sel(stat="mean"))
    assert mean == pytest.approx(float(ds.t.isel(time=selected).mean()), rel=1e-12)
