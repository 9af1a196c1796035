"""Turning coordinate values into the float64 numbers positional encodings consume, and sizes
given in coordinate units into whole steps.

Two kinds of coordinates need care before that:

* **labels** (station ids, variable names: strings) have no numeric value; a token or sample along
  such a dim gets the label's index along its dim as its coordinate (:func:`token_coordinates`),
  and the numbers that describe it (``lat``, ``lon``, ``elevation`` as non-dimension coordinates
  on ``station``) reach the tokens under their own names.
* **tz-aware times** (what ``xr.Dataset.from_dataframe`` gives for a tz-aware pandas index) are
  converted to UTC (naive datetime64) for encoding (:func:`to_utc`); putting back keeps the
  source's own coordinates, so predictions come back on the tz-aware times they were given.

Times may also be cftime datetimes (the noleap, 360_day, ... calendars of climate-model
output): they count seconds since 1970-01-01 in their own calendar, and their year has that
calendar's length (365 days in noleap, 360 in 360_day, each year's own in the calendars with
leap years, datetime64's proleptic Gregorian one among them), wherever datetime64 times are
accepted; batches carry the part of its year each token's time has passed as
``coords["year_fraction"]`` (:func:`with_year_fraction`).
"""
import datetime

import numpy as np
import pandas as pd

from ..models.coordinates import YEAR_DAYS as CALENDAR_YEAR_DAYS
from ..models.coordinates import year_fractions
from ..nn.positional.calendar import calendar_phases, circular_features

DATETIME64_CALENDAR = "proleptic_gregorian"  # NumPy's datetime64 extends Gregorian years back


def is_cftime(values):
    """True for an object array (or one value) of cftime datetimes."""
    values = np.asarray(values)
    return (values.dtype == object and values.size > 0
            and all(type(v).__module__.startswith("cftime") for v in values.ravel()))


def is_time(values):
    """True for times: datetime64 values or cftime datetimes (what ``calendar=True`` needs)."""
    values = np.asarray(values)
    return np.issubdtype(values.dtype, np.datetime64) or is_cftime(values)


def cftime_calendar(values):
    """The one calendar of cftime datetimes `values` (an error naming them when they mix)."""
    calendars = {v.calendar for v in np.asarray(values).ravel()}
    if len(calendars) != 1 or not calendars <= set(CALENDAR_YEAR_DAYS):
        raise ValueError(f"times must share one calendar of {sorted(CALENDAR_YEAR_DAYS)}; got "
                         f"cftime datetimes in {sorted(calendars)}")
    return calendars.pop()


def time_calendar(values):
    """The cftime calendar of times `values`, None for datetime64 times (or `values` None): what
    :func:`calendar_features` needs to read times that an adapter has turned into seconds."""
    return cftime_calendar(values) if values is not None and is_cftime(values) else None


def _is_timedelta_objects(values):
    return (values.dtype == object and values.size > 0
            and all(isinstance(v, datetime.timedelta) for v in values.ravel()))


def as_float(values):
    """Numbers as float64; datetimes as seconds since 1970-01-01 (cftime datetimes in their own
    calendar); timedeltas (the steps between cftime datetimes too) as seconds."""
    values = np.asarray(values)
    if np.issubdtype(values.dtype, np.datetime64):
        return (values - np.datetime64(0, "s")) / np.timedelta64(1, "s")
    if np.issubdtype(values.dtype, np.timedelta64):
        return values / np.timedelta64(1, "s")
    if is_cftime(values):
        import cftime

        seconds = cftime.date2num(values.ravel(), "seconds since 1970-01-01 00:00:00",
                                  calendar=cftime_calendar(values))
        return np.asarray(seconds, dtype=np.float64).reshape(values.shape)
    if _is_timedelta_objects(values):
        return np.vectorize(datetime.timedelta.total_seconds, otypes=[np.float64])(values)
    return values.astype(np.float64)


def times_from_seconds(seconds, like):
    """Float `seconds` since 1970-01-01 back as times of the kind `like` holds: datetime64[ns]
    for datetime64, cftime datetimes of `like`'s calendar for cftime; numbers stay numbers (the
    inverse of :func:`as_float` for coordinates)."""
    like = np.asarray(like)
    seconds = np.asarray(seconds, dtype=np.float64)
    if np.issubdtype(like.dtype, np.datetime64):
        return (seconds * 1e9).round().astype("datetime64[ns]")
    if is_cftime(like):
        import cftime

        return np.asarray(cftime.num2date(seconds, "seconds since 1970-01-01 00:00:00",
                                          calendar=cftime_calendar(like)))
    return seconds


def is_label(values):
    """True for coordinates of strings (or bytes), which have no order or distance."""
    values = np.asarray(values)
    if values.dtype.kind in "US":
        return True
    return values.dtype == object and all(isinstance(v, (str, bytes)) for v in values.ravel())


def token_coordinates(ds):
    """{name: (dim, 1-D values)} for the 1-D coordinates of `ds` that can become float64
    per-token coordinates: every dimension coordinate (labels as their indices along the dim)
    and every numeric or datetime non-dimension coordinate on one dim (a station's ``lat``,
    ``lon``, ``elevation`` on ``station``), so coordinates of the samples reach the batch."""
    out = {}
    for name, coordinate in ds.coords.items():
        if coordinate.ndim != 1:
            continue
        dim = coordinate.dims[0]
        values = np.asarray(coordinate.values)
        if name == dim:
            out[name] = (dim, np.arange(len(values), dtype=np.float64) if is_label(values)
                         else values)
        elif name not in ds.dims and (values.dtype.kind in "iufmM" or is_cftime(values)):
            out[name] = (dim, values)
    return out


def _is_tz_aware(coordinate):
    if isinstance(coordinate.dtype, pd.DatetimeTZDtype):
        return True
    values = np.asarray(coordinate.values)
    return (values.dtype == object and values.size > 0 and all(
        isinstance(v, datetime.datetime) and v.tzinfo is not None for v in values.ravel()))


def to_utc(ds):
    """`ds` with every tz-aware 1-D coordinate converted to naive UTC datetime64[ns] (a new
    Dataset; `ds` is not modified). Other coordinates are left as they are."""
    converted = {}
    for name, coordinate in ds.coords.items():
        if coordinate.ndim == 1 and _is_tz_aware(coordinate):
            times = pd.to_datetime(list(coordinate.to_index()), utc=True)
            converted[name] = (coordinate.dims, times.tz_localize(None).to_numpy("datetime64[ns]"),
                               coordinate.attrs)
    return ds.assign_coords(converted) if converted else ds


def require_numeric_axis(ds, dim, role):
    """Coordinate `dim` must hold numbers or times to measure `role` along it."""
    values = np.asarray(ds[dim].values)
    if values.dtype.kind not in "iufmM" and not is_cftime(values):
        example = values.ravel()[0] if values.size else None
        held = "str" if values.dtype.kind in "US" else type(example).__name__
        raise ValueError(f"coordinate {dim!r} holds {held} values "
                         f"(dtype {values.dtype}), not numbers or times, so {role} has no size "
                         f"along it; convert it, e.g. ds.assign_coords({dim}=pd.to_datetime("
                         f"ds[{dim!r}].values, utc=True).tz_localize(None)), or give {role} "
                         "in steps (an int)")


def canonical_names(coords, names):
    """`coords` with each dim's coordinate also under the name models read it by (`names`:
    dim -> canonical name), so ``valid_time`` or ``latitude`` reach a model as ``time``/``lat``.
    A canonical name the data already use for something else is left alone."""
    out = dict(coords)
    for dim, name in names.items():
        if dim != name and dim in coords and name not in coords:
            out[name] = coords[dim]
    return out


def patch_centres(values, patch, circular=False):
    """Centres of consecutive patches along the last axis of `values` (..., n * patch), NaN-padded
    cells ignored. Circular coordinates (longitude in degrees) use the mean angle, so a patch
    straddling 0/360 is centred on the seam, not on 180; the result is in [0, 360)."""
    grouped = values.reshape(*values.shape[:-1], -1, patch)
    # nanmean is several times slower than mean; only padded grids need it
    mean = np.nanmean if np.isnan(values).any() else np.mean
    if not circular:
        return mean(grouped, axis=-1)
    angle = np.deg2rad(grouped)
    centre = np.arctan2(mean(np.sin(angle), axis=-1), mean(np.cos(angle), axis=-1))
    return np.rad2deg(centre) % 360.0


def calendar_features(times, calendar=None):
    """sin/cos of hour of day and of day of year, in the order (sin day, sin year, cos day,
    cos year), for `times` as datetime64, cftime datetimes (the year of their calendar, each
    year's own length where it has leap years) or float seconds since 1970-01-01 (UTC; counted
    in the cftime `calendar` when given, as :func:`as_float` counts them, else datetime64's
    proleptic Gregorian years): (..., 4) float64."""
    if is_cftime(times):
        calendar = cftime_calendar(times)
    if calendar is not None and calendar not in CALENDAR_YEAR_DAYS:
        raise ValueError(f"calendar must be one of {sorted(CALENDAR_YEAR_DAYS)}; got "
                         f"{calendar!r}")
    seconds = as_float(times)
    phases = calendar_phases(seconds)
    phases[..., 1] = year_fractions(seconds, calendar or DATETIME64_CALENDAR)
    return circular_features(phases)


def year_calendar(values):
    """The calendar whose years times `values` count in: their cftime calendar, the proleptic
    Gregorian one for datetime64; None for numbers (or `values` None), which have no year."""
    if values is None:
        return None
    if np.issubdtype(np.asarray(values).dtype, np.datetime64):
        return DATETIME64_CALENDAR
    return time_calendar(values)


def with_year_fraction(coords, seconds, calendar):
    """`coords` (per-token) with ``year_fraction``, the part of its year each token's time
    (`seconds`, as in ``coords["time"]``) has passed in `calendar` (:func:`year_calendar`; None:
    the coordinate holds numbers, not times, and `coords` are returned as they are)."""
    if calendar is None or seconds is None:
        return coords
    return {**coords, "year_fraction": year_fractions(seconds, calendar)}


def whole_steps(value, ds, dim, name):
    """`value` as a whole number (>= 1) of steps along `dim`: an int is already steps; a float, a
    timedelta or a string like "6h" is in the units of coordinate `dim`, which must be evenly
    spaced. `name` is the argument the user passed, for the error messages."""
    given = value
    if isinstance(value, (str, np.timedelta64, datetime.timedelta)):
        value = pd.Timedelta(value).to_timedelta64()
    if isinstance(value, (int, np.integer)) and not isinstance(value, np.timedelta64):
        steps = int(value)
    else:
        if dim not in ds.coords or ds.sizes[dim] < 2:
            raise ValueError(f"{name}={given!r} is in coordinate units, which needs a "
                             f"coordinate {dim!r} with at least 2 values; "
                             "or give it in steps (an int)")
        require_numeric_axis(ds, dim, name)
        step = even_step(ds[dim].values)
        if step is None:
            raise ValueError(f"coordinate {dim!r} is not evenly spaced, so {name}="
                             f"{given!r} has no size in steps; give it in steps (an int)")
        ratio = as_float(value) / as_float(step)
        steps = int(round(float(ratio)))
        if not np.isclose(ratio, steps):
            raise ValueError(f"{name}={given!r} is {ratio:g} steps of {dim!r}; "
                             "expected a whole number")
    if steps < 1:
        raise ValueError(f"{name}={given!r} is {steps} steps; expected at least 1")
    return steps


def even_step(values):
    """The step of evenly spaced 1-D coordinate `values` (at least 2 of them), None if uneven."""
    step = np.diff(values)
    if np.any(step != step[0]) and not np.allclose(as_float(step), as_float(step[0])):
        return None
    return step[0]
