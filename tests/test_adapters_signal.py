"""SignalAdapter: frames in steps or coordinate units, calendar features, ragged batches,
overlap-add back onto the time coordinate, round trips and errors."""
import numpy as np
import pytest
import xarray as xr
from hypothesis import given, settings

from adapters_helpers import make_signal, put_back_all, signal_cases
from seqattn.adapters import BatchIterator, SignalAdapter


@settings(max_examples=40, deadline=None)
@given(signal_cases())
def test_encode_decode_is_exact(case):
    ds, window, hop = case
    channel_dims = ("channel",) if "channel" in ds.dims else ()
    adapter = SignalAdapter(list(ds.data_vars), window, hop, channel_dims=channel_dims,
                            dtype=ds.x.dtype)
    xr.testing.assert_identical(adapter.decode(adapter.encode(ds)), ds)


def test_speech_frames_25ms_every_10ms_make_100_tokens_per_second():
    ds = make_signal(length=16000, stations=1, rate=16000.0)
    batch = SignalAdapter(["x"], window=0.025, hop=0.01).encode(ds)
    # 1 s of audio: 98 whole frames and a last one padded past the end (masked cells)
    assert batch.tokens.shape == (1, 99, 400 + 1)
    assert not batch.valid[0, -1, 320:].any() and batch.valid[0, -1, :320].all()
    np.testing.assert_allclose(np.diff(batch.coords["time"][0]), 0.01)
    np.testing.assert_array_equal(batch.values[0, 1], ds.x.values[0, 160:560].astype(np.float32))


def test_calendar_features_from_a_datetime_coordinate():
    ds = make_signal(length=48, stations=1, start="2021-03-01T00")
    batch = SignalAdapter(["x"], window="6h", hop="6h", calendar=True).encode(ds)
    hour_sin, year_sin, hour_cos, year_cos = np.moveaxis(batch.tokens[0, :, -4:], -1, 0)
    # frames start at 00, 06, 12, 18 h: a quarter turn of the day each
    np.testing.assert_allclose(hour_sin[:4], [0, 1, 0, -1], atol=1e-6)
    np.testing.assert_allclose(hour_cos[:4], [1, 0, -1, 0], atol=1e-6)
    assert np.all(np.abs(year_sin ** 2 + year_cos ** 2 - 1) < 1e-6)


def test_series_of_different_lengths_share_a_batch_with_padding_masks():
    long, short = make_signal(length=40), make_signal(seed=1, length=13)
    adapter = SignalAdapter(["x"], 4, 2, dtype="float64")
    batch = adapter.encode([long, short])
    assert batch.tokens.shape == (4, 19, 5)
    assert batch.key_padding_mask[2:, 6:].all() and not batch.key_padding_mask[2:, :6].any()
    back = adapter.decode(batch)
    xr.testing.assert_identical(back[0], long)
    xr.testing.assert_identical(back[1], short)
    predictions = adapter.decode(batch, -batch.values)
    xr.testing.assert_identical(predictions[1], -short)


def test_long_recordings_in_overlapping_windows_are_put_back():
    ds = make_signal(length=100, channels=2, nan_fraction=0.1)
    adapter = SignalAdapter(["x", "y"], 5, 3, channel_dims=("channel",), dtype="float64").fit(ds)
    it = BatchIterator(ds, adapter, input_dims={"time": 30}, input_overlap={"time": 10},
                       batch_size=4, shuffle=True, seed=3)
    xr.testing.assert_allclose(put_back_all(it), ds, rtol=1e-12)


@pytest.mark.parametrize("make, adapter, match", [
    (lambda: make_signal().isel(time=[0, 1, 3, 4]), SignalAdapter(["x"], 0.02),
     "'time' is not evenly spaced"),
    (lambda: make_signal(), SignalAdapter(["x"], 0.025), r"window=0.025 is 2.5 steps"),
    (lambda: make_signal().rename(time="t"), SignalAdapter(["x"], 2), "time dim 'time' is not in"),
    (lambda: make_signal(), SignalAdapter(["x"], 2, calendar=True), "needs a datetime coordinate"),
    (lambda: make_signal().isel(time=[1, 0, 2]), SignalAdapter(["x"], 2), "'time' is not monotonic"),
])
def test_bad_signals_raise_errors_naming_the_dim(make, adapter, match):
    with pytest.raises(ValueError, match=match):
        adapter.encode(make())


def test_saved_and_loaded(tmp_path):
    import seqattn

    ds = make_signal(start="2020-01-01")
    adapter = SignalAdapter(["x"], np.timedelta64(3, "h"), "1h", calendar=True).fit(ds)
    seqattn.save(adapter, tmp_path / "signal")
    loaded = seqattn.load(tmp_path / "signal")
    assert type(loaded) is SignalAdapter
    np.testing.assert_array_equal(loaded.encode(ds).tokens, adapter.encode(ds).tokens)
