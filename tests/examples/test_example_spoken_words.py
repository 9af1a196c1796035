"""The spoken-words example: its recordings split by accent, and its quick mode, where seqattn on
25 ms log-mel frames (computed inside the SignalAdapter, tested against scipy in
test_adapters_signal.py) beats classifiers of time-averaged spectra on accents it never heard."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))

import spoken_words  # noqa: E402


def test_recordings_split_by_accent_cover_every_word():
    data = spoken_words.load()
    assert {s: d.sizes["recording"] for s, d in data.items()} == {"train": 120, "validation": 30,
                                                                 "test": 60}
    for ds in data.values():
        assert set(ds["word"].values) == set(range(10))
        assert ds["time"].attrs["units"] == "s" and ds["time"].values[1] == 1 / 8000


def test_quick_run_beats_time_averaged_spectra():
    results = spoken_words.main(["--quick"])
    assert results["seqattn"] > results["logistic regression"]
    assert results["seqattn"] > results["1-NN"]
