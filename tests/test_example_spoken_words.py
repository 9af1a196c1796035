"""The spoken-words example: its log-mel frames, and its quick mode, where seqattn on 25 ms
log-mel frames beats classifiers of time-averaged spectra on accents it never heard."""
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))

import spoken_words  # noqa: E402


def test_log_mel_frames_are_25_ms_every_10_ms_and_find_a_tone():
    config = spoken_words.ExampleConfig()
    rate = 8000
    t = np.arange(rate) / rate
    frames, times = spoken_words.log_mel(np.sin(2 * np.pi * 1000 * t), rate, config)
    assert frames.shape == (1 + (rate - 200) // 80, config.mel_bands)
    np.testing.assert_allclose(np.diff(times), 0.010)
    centres = spoken_words.mel_filterbank(config.mel_bands, 200, rate).argmax(axis=1) * 40.0
    assert abs(centres[frames.mean(axis=0).argmax()] - 1000) <= 120


def test_recordings_split_by_accent_cover_every_word():
    data = spoken_words.load(spoken_words.ExampleConfig())
    assert {s: d.sizes["recording"] for s, d in data.items()} == {"train": 120, "validation": 30,
                                                                 "test": 60}
    for ds in data.values():
        assert set(ds["word"].values) == set(range(10))


def test_quick_run_beats_time_averaged_spectra():
    results = spoken_words.main(["--quick"])
    assert results["seqattn"] > results["logistic regression"]
    assert results["seqattn"] > results["1-NN"]
