"""Hypothesis strategies for the adapters' property tests (tests/adapters/test_properties_*.py):
coordinates in any order, with gaps and repeats; values of any dtype with NaN and inf patterns;
and the check that an error names what the user got wrong."""
import datetime

import cftime
import numpy as np
from hypothesis import strategies as st

ORDERS = ("ascending", "descending", "shuffled", "repeated")
TIME_KINDS = ("number", "datetime64", "cftime")
DTYPES = ("float16", "float32", "float64", "int8", "int32", "int64")
NAN_PATTERNS = ("none", "scattered", "first sample", "all", "inf")


def coordinate(draw, n, order, gaps=True):
    """`n` coordinate values with random gaps (or evenly spaced), in `order` (repeated: the
    second equals the first); True when they are strictly monotonic, as patch and time dims
    must be."""
    steps = (draw(st.lists(st.integers(1, 3), min_size=n, max_size=n)) if gaps
             else [draw(st.integers(1, 3))] * n)
    values = np.cumsum(steps).astype(float)
    if order == "descending":
        values = values[::-1]
    elif order == "shuffled":
        values = np.asarray(draw(st.permutations(values)))
    elif order == "repeated" and n > 1:
        values[1] = values[0]
    steps = np.diff(values)
    return values, bool(np.all(steps > 0) or np.all(steps < 0))


def as_times(hours, kind):
    """Coordinate values `hours` as numbers, datetime64 hours or cftime (360_day) hours."""
    if kind == "datetime64":
        return np.datetime64("2001-02-27T00") + hours.astype(np.int64) * np.timedelta64(1, "h")
    if kind == "cftime":
        start = cftime.datetime(2001, 2, 27, calendar="360_day")
        return np.array([start + datetime.timedelta(hours=int(h)) for h in hours])
    return hours


def values(draw, shape, dtype, pattern, sample_axis=0):
    """Random values of `shape` in `dtype` (integers hold no NaN and are clipped to their range)
    with a NaN `pattern`: a cell here and there, one whole sample along `sample_axis`,
    everything, or one +inf cell."""
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    # float16's squares overflow past 256 and its values past 65504 (then they are +-inf)
    x = rng.normal(size=shape) * draw(st.sampled_from([3.0, 3000.0, 20000.0]))
    if np.dtype(dtype).kind == "f" and x.size:
        if pattern == "scattered":
            x[rng.random(shape) < 0.3] = np.nan
        elif pattern == "first sample":
            np.moveaxis(x, sample_axis, 0)[0] = np.nan
        elif pattern == "all":
            x[...] = np.nan
        elif pattern == "inf":
            x.flat[rng.integers(x.size)] = np.inf
    if np.dtype(dtype).kind == "i":
        x = np.clip(np.round(x), np.iinfo(dtype).min, np.iinfo(dtype).max)
    return x.astype(dtype)


def as_expected(x):
    """What decoding must give back for data `x`: its values as float64, NaN where missing."""
    x = np.asarray(x, dtype=np.float64)
    return np.where(np.isfinite(x), x, np.nan)


def tolerance(dtype):
    """A relative tolerance for a round trip through float64 tokens of data in `dtype`: floats
    come back in their own precision (float16 data are normalized in float32, since their own
    arithmetic would overflow), integers in float64."""
    return {np.float16: 2e-3, np.float32: 1e-6}.get(np.dtype(dtype).type, 1e-9)


def absolute_tolerance(values, dtype):
    """An absolute tolerance for the same round trip: normalizing subtracts the mean in the
    data's own dtype, so every element keeps the precision of that dtype at the data's
    magnitude (float32 data of -1720 and 57.6 bring 57.6 back within about 1e-4, not 1e-5);
    never less than the 10 * tolerance that data of magnitude up to 10 get."""
    magnitude = np.nanmax(np.abs(values), initial=0.0) if np.size(values) else 0.0
    return tolerance(dtype) * max(10.0, float(magnitude))


def assert_names(error, *names):
    """`error` is a ValueError or TypeError whose message names one of `names` (an argument, a
    dim or a variable, quoted as the messages quote them) - never a bare numpy message."""
    assert isinstance(error, (ValueError, TypeError)), repr(error)
    message = str(error)
    assert any(f"{name!r}" in message or f"{name}=" in message or f"{name}[" in message
               for name in names), f"{message!r} names none of {names}"
