"""SignalAdapter: frames in steps or coordinate units, calendar features, ragged batches,
overlap-add back onto the time coordinate, features per frame (log-mel against scipy), round
trips and errors."""
import numpy as np
import pytest
import xarray as xr
from hypothesis import given, settings
from scipy.signal import stft

from adapters_helpers import make_signal, put_back_all, signal_cases
from seqattn.adapters import BatchIterator, ForecastWindows, LogMel, SignalAdapter

RATE = 8000  # Hz: 25 ms frames are 200 samples, a 10 ms hop 80


@settings(max_examples=40, deadline=None)
@given(signal_cases())
def test_encode_decode_is_exact(case):
    ds, window, hop = case
    channel_dims = ("channel",) if "channel" in ds.dims else ()
    adapter = SignalAdapter(list(ds.data_vars), window, hop=hop, channel_dims=channel_dims,
                            dtype=ds.x.dtype, normalize=False).fit(ds)
    xr.testing.assert_identical(adapter.decode(adapter.encode(ds)), ds)


def test_speech_frames_25ms_every_10ms_make_100_tokens_per_second():
    ds = make_signal(length=16000, stations=1, rate=16000.0)
    batch = SignalAdapter(["x"], window=0.025, hop=0.01, normalize=False).fit(ds).encode(ds)
    # 1 s of audio: 98 whole frames and a last one padded past the end (masked cells)
    assert batch.tokens.shape == (1, 99, 400 + 1)
    assert not batch.valid[0, -1, 320:].any() and batch.valid[0, -1, :320].all()
    np.testing.assert_allclose(np.diff(batch.coords["time"][0]), 0.01)
    np.testing.assert_array_equal(batch.values[0, 1], ds.x.values[0, 160:560].astype(np.float32))


def test_calendar_features_from_a_datetime_coordinate():
    ds = make_signal(length=48, stations=1, start="2021-03-01T00")
    batch = SignalAdapter(["x"], window="6h", hop="6h", calendar=True).fit(ds).encode(ds)
    hour_sin, year_sin, hour_cos, year_cos = np.moveaxis(batch.tokens[0, :, -4:], -1, 0)
    # frames start at 00, 06, 12, 18 h: a quarter turn of the day each
    np.testing.assert_allclose(hour_sin[:4], [0, 1, 0, -1], atol=1e-6)
    np.testing.assert_allclose(hour_cos[:4], [1, 0, -1, 0], atol=1e-6)
    assert np.all(np.abs(year_sin ** 2 + year_cos ** 2 - 1) < 1e-6)


def test_series_of_different_lengths_share_a_batch_with_padding_masks():
    long, short = make_signal(length=40), make_signal(seed=1, length=13)
    adapter = SignalAdapter(["x"], 4, hop=2, dtype="float64", normalize=False).fit(long)
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
    adapter = SignalAdapter(["x", "y"], 5, hop=3, channel_dims=("channel",), dtype="float64").fit(ds)
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
        adapter.fit(make())
    good = SignalAdapter(adapter.variables, 2).fit(make_signal())
    with pytest.raises(ValueError, match=r"0 steps along time_dim 'time'; expected at least one"):
        good.encode(make_signal().isel(time=slice(0, 0)))


def test_saved_and_loaded(tmp_path):
    import seqattn

    ds = make_signal(start="2020-01-01")
    adapter = SignalAdapter(["x"], np.timedelta64(3, "h"), hop="1h", calendar=True).fit(ds)
    seqattn.save(adapter, tmp_path / "signal")
    loaded = seqattn.load(tmp_path / "signal")
    assert type(loaded) is SignalAdapter
    np.testing.assert_array_equal(loaded.encode(ds).tokens, adapter.encode(ds).tokens)


def recordings():
    """Two recordings at 8 kHz of a 1 kHz tone in noise, the second stopping (NaN) after 5000
    samples, as (recording, time in s)."""
    rng = np.random.default_rng(0)
    t = np.arange(RATE) / RATE
    tone = np.sin(2 * np.pi * 1000 * t) + 0.1 * rng.standard_normal((2, RATE))
    tone[1, 5000:] = np.nan
    return xr.Dataset({"audio": (("recording", "time"), tone, {"units": "1"})},
                      coords={"time": ("time", t, {"units": "s"})})


def scipy_log_mel(audio):
    """The reference: scipy's STFT (Hann, 200-sample frames every 80, whole frames only) through
    LogMel's mel filters."""
    _, _, spectrum = stft(audio, fs=RATE, window="hann", nperseg=200, noverlap=120,
                          boundary=None, padded=False)
    return np.log(LogMel().filterbank(200, RATE) @ np.abs(spectrum) ** 2 + 1e-6).T


def test_log_mel_frames_of_25_ms_every_10_ms_match_scipy_and_find_the_tone():
    ds = recordings()
    adapter = SignalAdapter(["audio"], window=0.025, hop=0.01, frame_features="log_mel",
                            dtype="float64", normalize=False).fit(ds)
    batch = adapter.encode(ds)
    # 1 s: 98 whole frames and a partial one, which is missing as a whole (masked)
    assert batch.tokens.shape == (2, 99, 40 + 1)
    for i, length in enumerate([RATE, 5000]):
        reference = scipy_log_mel(ds.audio.values[i, :length])
        whole = len(reference)
        np.testing.assert_allclose(batch.values[i, :whole], reference, rtol=0, atol=1e-10)
        assert not batch.key_padding_mask[i, :whole].any()
        assert batch.key_padding_mask[i, whole:].all()
    np.testing.assert_allclose(np.diff(batch.coords["time"][0]), 0.01)

    spectra = adapter.decode(batch)["audio"]
    assert spectra.dims == ("recording", "time", "mel")
    np.testing.assert_allclose(spectra["time"].values[:3], (np.arange(3) * 80 + 99.5) / RATE)
    loudest = spectra.isel(recording=0).mean("time", skipna=True).argmax("mel").item()
    assert abs(spectra["mel"].values[loudest] - 1000) < 60  # bands are ~70 Hz wide there


def test_mel_filters_are_triangles_between_edges_evenly_spaced_in_mel():
    from seqattn.adapters.frame_features import hz_to_mel, mel_to_hz

    assert abs(hz_to_mel(1000.0) - 1000.0) < 0.05
    assert abs(mel_to_hz(hz_to_mel(3210.0)) - 3210.0) < 1e-9
    bank = LogMel(n_mels=8, fmin=100.0, fmax=3000.0).filterbank(RATE, RATE)  # 1 Hz rfft bins
    assert bank.shape == (8, RATE // 2 + 1)
    edges = 700 * (10 ** (np.linspace(hz_to_mel(100.0), hz_to_mel(3000.0), 10) / 2595) - 1)
    for m, (low, peak, high) in enumerate(zip(edges, edges[1:], edges[2:])):
        hz = np.arange(RATE // 2 + 1)
        assert not bank[m, (hz < low) | (hz > high)].any(), m
        np.testing.assert_allclose(bank[m, round((low + peak) / 2)], 0.5, atol=1 / (peak - low))
        np.testing.assert_allclose(bank[m, round((peak + high) / 2)], 0.5, atol=1 / (high - peak))
        assert bank[m].max() > 1 - 1 / (peak - low)


def test_frame_features_are_normalized_per_band_and_decode_to_physical_units():
    ds = recordings()
    adapter = SignalAdapter(["audio"], window=0.025, hop=0.01, frame_features=LogMel(40),
                            dtype="float64").fit(ds)
    batch = adapter.encode(ds)
    values = batch.values[~batch.key_padding_mask]
    np.testing.assert_allclose(values.mean(axis=0), 0, atol=1e-10)
    np.testing.assert_allclose(values.std(axis=0), 1, rtol=1e-10)
    decoded = adapter.decode(batch)["audio"].values
    np.testing.assert_allclose(decoded[0, :98], scipy_log_mel(ds.audio.values[0]), atol=1e-10)
    # predictions (B, N, 40) in normalized units come back per band in physical units
    stats = adapter.normalizer.stats["audio"]
    zeros = adapter.decode(batch, np.zeros_like(batch.values))["audio"]
    np.testing.assert_allclose(zeros.isel(recording=0, time=0), stats.sel(stat="mean"))
    assert np.isnan(zeros.isel(recording=1, time=-1)).all()


def test_a_function_per_frame_and_channel_and_its_statistics_per_channel(tmp_path):
    import seqattn

    ds = make_signal(length=42, channels=3, stations=1)  # 9 whole frames and a partial one
    summary = lambda frames: np.stack([frames.mean(-1), frames.max(-1)], axis=-1)
    adapter = SignalAdapter(["y"], window=8, hop=4, channel_dims=("channel",),
                            per_dims=("channel",), frame_features=summary,
                            dtype="float64").fit(ds)
    batch = adapter.encode(ds)
    frames = np.stack([ds.y.values[4 * f:4 * f + 8] for f in range(9)])  # (frame, step, channel)
    raw = np.stack([frames.mean(1), frames.max(1)], axis=1)  # (frame, feature, channel)
    mean, std = raw.mean(axis=0), raw.std(axis=0)
    np.testing.assert_allclose(batch.values[0, :9], ((raw - mean) / std).reshape(9, -1))
    assert batch.key_padding_mask[0].tolist() == [False] * 9 + [True]
    back = adapter.decode(batch)["y"]
    assert back.dims == ("time", "feature", "channel")
    np.testing.assert_allclose(back.values[:9], raw)
    with pytest.raises(TypeError, match="frame_features=.* cannot be stored as JSON"):
        seqattn.save(adapter, tmp_path / "adapter")


def test_log_mel_adapter_saved_and_loaded(tmp_path):
    import seqattn

    ds = recordings()
    adapter = SignalAdapter(["audio"], 0.025, hop=0.01, frame_features=LogMel(16, fmin=100.0)).fit(ds)
    seqattn.save(adapter, tmp_path / "adapter")
    loaded = seqattn.load(tmp_path / "adapter")
    np.testing.assert_array_equal(loaded.encode(ds).tokens, adapter.encode(ds).tokens)
    assert loaded.encode(ds).tokens.shape[-1] == 16 + 1


@pytest.mark.parametrize("call, match", [
    (lambda ds: SignalAdapter(["audio"], 0.025, frame_features="mfcc"), "frame_features='mfcc'"),
    (lambda ds: SignalAdapter(["audio"], 0.025, frame_features=lambda f: f[..., 0]).fit(ds),
     r"returned shape \(2, 40, 1\) for frames of shape \(2, 40, 1, 200\)"),
    (lambda ds: SignalAdapter(["audio"], 200, frame_features="log_mel").fit(
        ds.drop_vars("time")), "LogMel needs the sample rate"),
    (lambda ds: ForecastWindows(SignalAdapter(["audio"], 200, frame_features="log_mel"),
                                leads=[200], history=399), "cannot be forecast"),
])
def test_frame_feature_errors_say_what_to_give(call, match):
    with pytest.raises((ValueError, TypeError), match=match):
        call(recordings())


def test_check_leaves_the_adapter_as_it_is_and_fit_keeps_the_frame(tmp_path):
    import seqattn

    ds = make_signal(length=40, rate=100.0)
    adapter = SignalAdapter(["x"], 0.04, hop=0.02)
    adapter.check(ds)
    assert adapter.frame is None and adapter.rate is None and not adapter.fitted
    adapter.fit(ds)
    assert adapter.frame == (4, 2) and adapter.rate == pytest.approx(100.0)
    with pytest.raises(ValueError, match=r"window/hop are \(2, 1\) steps on this data but were "
                                         r"\(4, 2\) steps on the data fit saw"):
        adapter.check(make_signal(length=40, rate=50.0))
    seqattn.save(adapter, tmp_path / "adapter")
    loaded = seqattn.load(tmp_path / "adapter")
    assert loaded.frame == (4, 2) and loaded.model_config().in_features == 4 + 1


def test_inf_is_missing_at_fit_and_at_encode_and_never_spreads():
    ds = make_signal(length=40, stations=2)
    ds["x"][0, 5] = np.inf
    adapter = SignalAdapter(["x"], 4).fit(ds)
    finite = ds.x.where(np.isfinite(ds.x))
    assert float(adapter.normalizer.stats.x.sel(stat="mean")) == pytest.approx(
        float(finite.mean()), rel=1e-12)
    batch = adapter.encode(ds)
    assert np.isfinite(batch.tokens).all()
    assert not batch.valid[0, 1, 1] and batch.valid[0, 1, [0, 2, 3]].all()  # step 5: frame 1
    assert batch.tokens[0, 1, -1] == 0.75                                   # its validity
    back = adapter.decode(batch)
    assert np.isnan(back.x.values[0, 5]) and np.isfinite(back.x.values[0, 4])


def test_step_features_take_the_steps_back_out_of_the_frames():
    rng = np.random.default_rng(0)
    ds = xr.Dataset({"x": (("sample", "time", "channel"), rng.normal(size=(3, 20, 2))),
                     "y": (("sample", "time"), rng.normal(size=(3, 20))),
                     "label": ("sample", ["a", "b", "a"])})
    adapter = SignalAdapter(["x", "y"], 4, hop=2, channel_dims=("channel",),
                            normalize=False).fit(ds, targets="label")
    steps = adapter.step_features()
    # x's 4 x 2 frame features, then y's 4: step s of a token is x's 2 * s, 2 * s + 1 and y's s
    np.testing.assert_array_equal(steps, [[0, 1, 8], [2, 3, 9]])
    tokens = np.asarray(adapter.encode(ds).tokens)
    series = tokens[:, :, steps].reshape(3, -1, 3)
    np.testing.assert_allclose(series[:, :18, :2], ds.x.values[:, :18], rtol=1e-6)
    np.testing.assert_allclose(series[:, :18, 2], ds.y.values[:, :18], rtol=1e-6)
    with pytest.raises(ValueError, match="leave steps out"):
        SignalAdapter(["y"], 2, hop=3, normalize=False).fit(ds, targets="label").step_features()
    features = SignalAdapter(["y"], 4, hop=2, normalize=False,
                             frame_features=lambda f: f.mean(-1, keepdims=True))
    features = features.fit(ds, targets="label")
    with pytest.raises(ValueError, match="frame_features"):
        features.step_features()
