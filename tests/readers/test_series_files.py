"""UCR/UEA series files (.ts and the older text files) -> the (sample, time, channel) Dataset:
channels, unequal lengths and missing values kept, labels as strings, clear errors."""
import importlib.util
from pathlib import Path

import numpy as np
import pytest

from seqattn.readers import read_series_file


def test_ts_file_keeps_channels_lengths_and_missing_values(tmp_path):
    path = tmp_path / "tiny.ts"
    path.write_text("# comment\n@problemName tiny\n@classLabel true a b\n@data\n"
                    "1,2,3:4,5,6:a\n7,?:8,9:b\n")
    ds = read_series_file(path)
    assert ds["x"].dims == ("sample", "time", "channel") and ds["x"].shape == (2, 3, 2)
    np.testing.assert_array_equal(ds["x"].values[0], [[1, 4], [2, 5], [3, 6]])
    # the missing value inside the second series and its padding are both NaN
    assert np.isnan(ds["x"].values[1, 1, 0]) and ds["x"].values[1, 1, 1] == 9
    assert np.isnan(ds["x"].values[1, 2]).all()
    assert list(ds["label"].values) == ["a", "b"]


def test_ts_file_with_a_numeric_target_or_no_label(tmp_path):
    target = tmp_path / "target.ts"
    target.write_text("@targetLabel true\n@data\n1,2:0.5\n3,4:-1.25\n")
    ds = read_series_file(target, label="fat")
    assert ds["fat"].dtype == float and list(ds["fat"].values) == [0.5, -1.25]
    unlabelled = tmp_path / "plain.ts"
    unlabelled.write_text("@classLabel false\n@data\n1,2,3\n4,5\n")
    ds = read_series_file(unlabelled, variable="signal")
    assert set(ds.data_vars) == {"signal"} and ds["signal"].shape == (2, 3, 1)


def test_ucr_text_file_reads_labels_first_and_drops_trailing_padding(tmp_path):
    path = tmp_path / "Tiny_TRAIN.txt"
    path.write_text("  1.0000000e+00  0.5  -0.5  2.0\n"
                    "2\t1.5\t2.5\tNaN\n"
                    "\n"
                    "a,3,4,5\n")
    ds = read_series_file(path)
    assert ds["x"].shape == (3, 3, 1)
    assert list(ds["label"].values) == ["1", "2", "a"]
    np.testing.assert_array_equal(ds["x"].values[0, :, 0], [0.5, -0.5, 2.0])
    assert np.isnan(ds["x"].values[1, 2, 0]) and ds["x"].values[1, 1, 0] == 2.5


def test_bad_files_name_the_argument_and_what_was_expected(tmp_path):
    with pytest.raises(FileNotFoundError, match="path: no series file"):
        read_series_file(tmp_path / "missing.ts")
    other = tmp_path / "series.npy"
    other.write_text("1 2 3\n")
    with pytest.raises(ValueError, match=r"path: expected a \.ts file"):
        read_series_file(other)
    no_data = tmp_path / "header.ts"
    no_data.write_text("@classLabel true a\n")
    with pytest.raises(ValueError, match="no @data line"):
        read_series_file(no_data)
    channels = tmp_path / "channels.ts"
    channels.write_text("@classLabel true a\n@data\n1,2:3,4:a\n1,2:a\n")
    with pytest.raises(ValueError, match="line 4: 1 channels, expected 2"):
        read_series_file(channels)
    words = tmp_path / "words.txt"
    words.write_text("1 0.5 high\n")
    with pytest.raises(ValueError, match="line 1: expected numbers after the label"):
        read_series_file(words)
    empty = tmp_path / "empty.txt"
    empty.write_text("\n\n")
    with pytest.raises(ValueError, match="holds no series"):
        read_series_file(empty)


def test_sktime_files_read_as_the_archive_describes_them():
    # sktime's data folder, found without importing sktime (the tests install it --no-deps)
    sktime = importlib.util.find_spec("sktime")
    folder = Path(sktime.submodule_search_locations[0]) / "datasets" / "data" / "JapaneseVowels"
    ds = read_series_file(folder / "JapaneseVowels_TRAIN.ts")
    # 270 utterances of 7-26 frames of 12 coefficients (the test file reaches 29), nine speakers
    assert ds["x"].shape == (270, 26, 12)
    lengths = (~np.isnan(ds["x"].values[..., 0])).sum(axis=1)
    assert lengths.min() == 7 and lengths.max() == 26
    assert len(np.unique(ds["label"].values)) == 9
