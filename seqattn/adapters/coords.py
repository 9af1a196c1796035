"""Turning coordinate values into the float64 numbers positional encodings consume."""
import numpy as np

SECONDS_PER_DAY = 86400.0


def as_float(values):
    """Numbers as float64; datetimes as seconds since 1970-01-01; timedeltas as seconds."""
    values = np.asarray(values)
    if np.issubdtype(values.dtype, np.datetime64):
        return (values - np.datetime64(0, "s")) / np.timedelta64(1, "s")
    if np.issubdtype(values.dtype, np.timedelta64):
        return values / np.timedelta64(1, "s")
    return values.astype(np.float64)


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


def calendar_features(times):
    """sin/cos of hour of day and of day of year for datetime64 `times`: (..., 4) float64."""
    seconds = as_float(times)
    day_fraction = (seconds % SECONDS_PER_DAY) / SECONDS_PER_DAY
    # The mean tropical year, so the yearly phase does not drift by a day every four years.
    year_fraction = (seconds / SECONDS_PER_DAY % 365.2425) / 365.2425
    angles = 2 * np.pi * np.stack([day_fraction, year_fraction], axis=-1)
    return np.concatenate([np.sin(angles), np.cos(angles)], axis=-1)
