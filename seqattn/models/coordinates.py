"""Per-token coordinates (what the adapters put in ``Batch.coords``) turned into positions.

A task model's config lists the encodings it uses in ``coordinates``; each reads coordinates
by the adapters' names, computes fixed features of them on the host, and a learned linear map
adds their sum into the tokens:

* ``"latlon"``: ``lat``, ``lon`` in degrees, as random Fourier features of the point on the
  unit sphere (no seam at +-180 degrees, no crowding at the poles).
* ``"time_of_day"``, ``"day_of_year"``: ``time`` in seconds since 1970-01-01, as sin/cos of the
  daily and yearly phase.
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
COORDINATE_ENCODINGS = ("latlon", "time_of_day", "day_of_year", "lead", "level")
NEEDS = {"latlon": ("lat", "lon"), "time_of_day": ("time",), "day_of_year": ("time",),
         "lead": ("lead",), "level": ("level",)}


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
