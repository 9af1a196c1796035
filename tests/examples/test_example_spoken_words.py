"""The spoken-words example: its recordings split by accent, and its quick mode, where seqattn on
25 ms log-mel frames (computed inside the SignalAdapter, tested against scipy in
test_adapters_signal.py), with a linear path on the frames pooled over time started at the
library's logistic regression on them (its strongest baseline here, fitted on the training
accents), beats every baseline seqattn.evaluate fits on those frames, in accuracy and log loss,
on accents it never heard."""
import sys
from pathlib import Path

from seqattn.evaluation import strongest_baseline

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))

import spoken_words  # noqa: E402


def test_recordings_split_by_accent_cover_every_word():
    data = spoken_words.load()
    assert {s: d.sizes["recording"] for s, d in data.items()} == {"train": 120, "validation": 30,
                                                                 "test": 60}
    for ds in data.values():
        assert set(ds["word"].values) == set(range(10))
        assert ds["time"].attrs["units"] == "s" and ds["time"].values[1] == 1 / 8000


def test_quick_run_beats_the_strongest_library_baseline():
    results = spoken_words.main(["--quick"])
    scores = results["scores"]
    assert int(scores.n) == 60
    accuracy = scores.accuracy.to_series()
    assert "pooled logistic" in accuracy.index, accuracy
    assert accuracy["model"] > accuracy[strongest_baseline(scores, "accuracy")], accuracy
    log_loss = scores.log_loss.to_series()
    assert log_loss["model"] < log_loss[strongest_baseline(scores, "log_loss")], log_loss
    neighbours = [name for name in accuracy.index if name.endswith("nearest neighbour")]
    assert len(neighbours) == 1 and accuracy["model"] > accuracy[neighbours[0]], accuracy
    table = results["validation"]
    assert table["ran"].all() and table.attrs["chosen"] == results["choice"]
    assert table.log_loss.sel(candidate=results["choice"]) == table.log_loss.min()
