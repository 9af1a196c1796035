"""Phases of the day and of the year from times in seconds since 1970-01-01 (UTC)."""
import numpy as np

SECONDS_PER_DAY = 86400.0
DAYS_PER_YEAR = 365.2425  # the mean Gregorian year, so the yearly phase does not drift


def calendar_phases(seconds, days_per_year=DAYS_PER_YEAR):
    """The time of day and the time of year, as fractions in [0, 1).

    Parameters
    ----------
    seconds : array (...)
        Times in seconds since 1970-01-01 (as the adapters' ``coords["time"]`` are).
    days_per_year : float, default 365.2425
        The year's length: 360 or 365 for the 360_day and noleap calendars of climate models.

    Returns
    -------
    array (..., 2)
        The fractions of the day and of the year.
    """
    seconds = np.asarray(seconds, dtype=np.float64)
    day = (seconds % SECONDS_PER_DAY) / SECONDS_PER_DAY
    year = (seconds / SECONDS_PER_DAY % days_per_year) / days_per_year
    return np.stack([day, year], axis=-1)


def circular_features(fractions):
    """Sines and cosines of periodic fractions: continuous across the seam (midnight, new year).

    Parameters
    ----------
    fractions : array (..., k)
        Values in [0, 1) of k periodic quantities.

    Returns
    -------
    array (..., 2 k)
        ``sin(2 pi fractions)``, then ``cos(2 pi fractions)``.
    """
    angles = 2 * np.pi * np.asarray(fractions, dtype=np.float64)
    return np.concatenate([np.sin(angles), np.cos(angles)], axis=-1)
