"""Per-token coordinates (what the adapters put in ``Batch.coords``) turned into positions.

A task model's config lists the encodings it uses in ``coordinates``; each reads coordinates
by the adapters' names, computes fixed features of them on the host, and a learned linear map
adds their sum into the tokens:

* ``"latlon"``: ``lat``, ``lon`` in degrees, as random Fourier features of the point on the
  unit sphere (no seam at +-180 degrees, no crowding at the poles).
* ``"time_of_day"``, ``"day_of_year"``: ``time`` in seconds since 1970-01-01, as sin/cos of the
  daily and yearly phase. The yearly phase is ``year_fraction`` where the batch has it (the
  adapters give it for every time coordinate, counted in the calendar's own years by
  :func:`year_fractions`: 365 days in noleap, 360 in 360_day, 366 in all_leap, each year's own
  length in the standard, gregorian, proleptic_gregorian (datetime64) and julian calendars),
  else the fraction of the mean Gregorian year.
* ``"lead"``: ``lead`` in seconds, the forecast lead time, as sinusoidal features of hours: one
  model learns every lead (as ClimaX and Aurora condition on lead time).
* ``"level"``: ``level`` (pressure or depth, any unit) as sinusoidal features.

A NaN coordinate (a padded token) gives zero features.
"""
import numpy as np

from ..nn import Linear, Module
from ..nn.placement import moved
from ..nn.positional import (FourierFeatures, calendar_phases, circular_features,
                             sinusoidal_table, unit_sphere)

SECONDS_PER_HOUR = 3600.0
SECONDS_PER_DAY = 86400.0
GREGORIAN_ONLY = -12212553600.0  # 1583-01-01: the standard calendar is Gregorian from here on
# Days in every year of the cftime calendars whose years all have one length; the others
# (None) have leap years, whose length each year's own dates give.
YEAR_DAYS = {"noleap": 365, "365_day": 365, "360_day": 360, "all_leap": 366, "366_day": 366,
             "standard": None, "gregorian": None, "proleptic_gregorian": None, "julian": None}
COORDINATE_ENCODINGS = ("latlon", "time_of_day", "day_of_year", "lead", "level")
NEEDS = {"latlon": ("lat", "lon"), "time_of_day": ("time",), "day_of_year": ("time",),
         "lead": ("lead",), "level": ("level",)}


def year_fractions(seconds, calendar):
    """The fraction of its year that has passed at each time, in [0, 1) (NaN stays NaN).

    Parameters
    ----------
    seconds : array (...)
        Times in seconds since 1970-01-01 00:00, counted in `calendar` (as
        :func:`seqattn.data.coords.as_float` counts cftime datetimes).
    calendar : str
        A cftime calendar name (a key of ``YEAR_DAYS``).
    """
    if calendar not in YEAR_DAYS:
        raise ValueError(f"calendar={calendar!r}; expected one of {sorted(YEAR_DAYS)}")
    seconds = np.asarray(seconds, dtype=np.float64)
    days = YEAR_DAYS[calendar]
    if days is not None:  # 1970-01-01 starts a year, and every year is `days` long
        return np.mod(seconds / SECONDS_PER_DAY, days) / days
    known = np.isfinite(seconds)
    if calendar == "proleptic_gregorian" or (calendar in ("standard", "gregorian") and np.all(
            seconds[known] >= GREGORIAN_ONLY)):
        return _gregorian_year_fractions(seconds, known)
    import cftime

    units = "seconds since 1970-01-01 00:00:00"
    out = np.full(seconds.shape, np.nan)
    # a batch repeats few distinct times (a sample's time on all its tokens): date them once
    unique, where = np.unique(seconds[known], return_inverse=True)
    years = np.array([t.year for t in cftime.num2date(unique, units, calendar=calendar)])
    starts = {y: cftime.date2num(cftime.datetime(y, 1, 1, calendar=calendar), units,
                                 calendar=calendar) for y in np.unique(np.r_[years, years + 1])}
    start = np.array([starts[y] for y in years], dtype=np.float64)
    end = np.array([starts[y + 1] for y in years], dtype=np.float64)
    out[known] = ((unique - start) / (end - start))[where]
    return out


def _gregorian_year_fractions(seconds, known):
    """year_fractions in the proleptic Gregorian calendar (NumPy's datetime64), vectorized."""
    out = np.full(seconds.shape, np.nan)
    whole = np.floor(seconds[known])
    year = whole.astype(np.int64).astype("datetime64[s]").astype("datetime64[Y]")
    start = year.astype("datetime64[s]").astype(np.float64)
    end = (year + 1).astype("datetime64[s]").astype(np.float64)
    out[known] = (seconds[known] - start) / (end - start)
    return out


def check_encodings(encodings):
    unknown = [e for e in encodings if e not in COORDINATE_ENCODINGS]
    if unknown:
        raise ValueError(f"coordinates {unknown} are not known encodings; choose from "
                         f"{COORDINATE_ENCODINGS}")
    return tuple(encodings)


class CoordinateEncoding(Module):
    """tokens (B, N, E) + W features(coords) + b, features (B, N, C) from ``encodings``."""

    def __init__(self, encodings, d_model, num_frequencies=8, dtype=np.float32, seed=None):
        super().__init__()
        self.encodings = check_encodings(encodings)
        self.num_frequencies = num_frequencies
        if "latlon" in self.encodings:
            self.sphere = FourierFeatures(3, num_frequencies, dtype=dtype, seed=seed)
        width = sum(self._width(e) for e in self.encodings)
        self.project = Linear(width, d_model, dtype=dtype, seed=seed)

    def _width(self, encoding):
        return 2 if encoding in ("time_of_day", "day_of_year") else 2 * self.num_frequencies

    def features(self, coords, shape):
        """(B, N, C) host features for tokens of ``shape`` (B, N)."""
        missing = sorted({name for e in self.encodings for name in NEEDS[e]} - set(coords or {}))
        if missing:
            fix = ("give the Dataset coordinates of these names (on a dim, or numbers on the "
                   "sample dims such as lat/lon on station; lat=/lon=/time_dim= name others), "
                   "or drop them from the config's coordinates" if coords else
                   "pass the batch's coords (the adapters provide them by these names)")
            raise ValueError(f"the model encodes coordinates {list(self.encodings)} and needs "
                             f"coords {missing} (B, N), got {sorted(coords or {})}; {fix}")
        columns = []
        for e in self.encodings:
            c = {name: np.broadcast_to(np.asarray(coords[name], dtype=np.float64), shape)
                 for name in NEEDS[e]}
            if e == "latlon":
                columns.append(moved(self.sphere(unit_sphere(c["lat"], c["lon"])), "cpu"))
            elif e == "day_of_year" and "year_fraction" in coords:
                phase = np.broadcast_to(np.asarray(coords["year_fraction"], np.float64), shape)
                columns.append(np.where(np.isnan(phase)[..., None], 0.0,
                                        circular_features(phase[..., None])))
            elif e in ("time_of_day", "day_of_year"):
                phase = calendar_phases(c["time"])[..., 0 if e == "time_of_day" else 1]
                columns.append(circular_features(phase[..., None]))
            else:
                value = c["lead"] / SECONDS_PER_HOUR if e == "lead" else c["level"]
                table = sinusoidal_table(np.nan_to_num(value), 2 * self.num_frequencies)
                columns.append(table.reshape(*shape, -1))
        features = np.concatenate([np.asarray(col, np.float64) for col in columns], axis=-1)
        nan = np.zeros(shape, bool)
        for names in (NEEDS[e] for e in self.encodings):
            for name in names:
                nan |= np.isnan(np.broadcast_to(np.asarray(coords[name], np.float64), shape))
        features[nan] = 0.0
        return features

    def forward(self, x, coords):
        features = self.features(coords, x.shape[:2]).astype(x.dtype)
        return x + self.project(moved(np.ascontiguousarray(features), self.device))
