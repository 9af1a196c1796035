"""SeasonalPersistence: the forecast of a valid time is the value one period earlier.

The standard skill reference for anything with a strong daily or annual cycle: hourly station
temperatures are forecast by the same hour yesterday (a period of a day), daily fields by the
same day a year earlier (a period the user gives, e.g. ``"365D"``). Where the lead is longer than
the period, the value is taken a whole number of periods back, the most recent one the forecast
could know (seasonal naive): a 30 h forecast with a day's period reads the value 48 h before its
valid time.

The value is read off the batch's own inputs, so the baseline sees nothing the model does not:

* on a grid (:class:`~seqattn.adapters.GridAdapter`, time a sample dim) from the history
  channels of the target's own cells (inputs t - history .. t);
* on a signal (:class:`~seqattn.adapters.SignalAdapter`, time the token dim) from the frame that
  holds the step one period before each target step, never a step after the end of the target's
  own input frame (a causal model's token sees no later frame).

A batch does not say how its channels are laid out (how many history steps, which variable
sits where, a signal's frames) nor by how much its increments were scaled, so the baseline
reads that from the fitted :class:`~seqattn.adapters.ForecastWindows` that made the batches.

Where the input window does not reach a period back (a lead longer than the history allows on a
grid; on a signal, the target steps of the earliest frames) the target is predicted by plain
persistence (the source cells: the last input step on a grid, the token's own frame on a
signal), and ``chosen["seasonal_share"]`` says per lead which share of the targets had a
seasonal value; a window that reaches a period back for no lead at all is refused. Falling back
rather than refusing keeps one baseline for every lead of a multi-lead set-up, and on a signal,
whose earliest frames can never reach a period back, it is the only way to have one at all. A
seasonal value that is missing in the data is replaced by persistence too.

With ``increments=True`` the prediction is the increment that puts back to the seasonal value:
``(seasonal - source) / lead scale`` in normalized units.
"""
import datetime
import numbers
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..adapters.forecast import ForecastWindows
from ..data.coords import as_float
from .base import Baseline
from .estimators import masked_mse
from .forecasting import _leads, _require_forecast, _targets, _values

DAY = "24h"


def period_value(period):
    """`period` as (a positive number, its kind), the way the adapters read a lead or a window:
    an int is a number of steps of the time axis, a float is in the time coordinate's units
    (seconds on a datetime axis), a string or timedelta a duration.

    Parameters
    ----------
    period : int, float, str, datetime.timedelta, numpy.timedelta64 or pandas.Timedelta
        The period, e.g. ``24`` (steps), ``86400.0``, ``"24h"`` or
        ``datetime.timedelta(days=1)``.

    Returns
    -------
    tuple of (float, str)
        The number (steps, coordinate units, or seconds for a duration) and its kind:
        ``"steps"``, ``"units"`` or ``"duration"``.
    """
    if isinstance(period, (bool, np.bool_)):
        raise TypeError(f"period={period!r} is a bool; give a number of steps, a timedelta "
                        "or a string like '24h'")
    if isinstance(period, str):
        try:
            value, kind = pd.Timedelta(period).total_seconds(), "duration"
        except ValueError as error:
            raise ValueError(f"period={period!r} is not a duration pandas reads ({error}); give "
                             "e.g. '24h', '365D', a timedelta or a number of steps") from None
    elif isinstance(period, (datetime.timedelta, np.timedelta64)):
        value, kind = pd.Timedelta(period).total_seconds(), "duration"
    elif isinstance(period, numbers.Integral):
        value, kind = float(period), "steps"
    elif isinstance(period, numbers.Real):
        value, kind = float(period), "units"
    else:
        raise TypeError(f"period is a {type(period).__name__}; give a number of steps, a "
                        "timedelta or a string like '24h'")
    if not (np.isfinite(value) and value > 0):
        raise ValueError(f"period={period!r}; expected a positive, finite period")
    return value, kind


def _window_step(windows):
    """One step of the windows' time axis in the coordinate's units (seconds on a datetime
    axis), and whether that axis holds times."""
    leads = np.asarray(windows.lead_values)
    timed = leads.dtype.kind == "m" or (leads.dtype.kind == "O"
                                        and isinstance(leads.flat[0], datetime.timedelta))
    return float(as_float(leads[0])) / float(windows.steps[0]), timed


def _back(ahead, period_steps):
    """How many periods back (>= 1) a target `ahead` steps after its forecast's origin reads:
    the fewest that land on or before the origin (seasonal naive)."""
    return np.maximum(1, -(-ahead // period_steps))


@dataclass(frozen=True)
class _Sources:
    """Where each target's (N, Ft) two predictors sit among the inputs of a lead's samples:
    ``seasonal`` and ``persistent`` are (token, feature) index arrays; ``found`` says which
    targets have a seasonal value in the window, ``real`` which stand for a step of the data
    (not a signal's padding past the window)."""

    seasonal: tuple
    persistent: tuple
    found: np.ndarray
    real: np.ndarray

    def share(self):
        return float(self.found.sum() / max(self.real.sum(), 1))


class SeasonalPersistence(Baseline):
    """Each target predicted by its own cells' value one `period` before its valid time, read
    off the batch's inputs (see the module docstring); for the batches of `windows`.

    Parameters
    ----------
    windows : seqattn.adapters.ForecastWindows
        The fitted windows that make the batches: their history, frames, variables and lead
        scales say where each input value sits.
    period : int, float, str or timedelta, default "24h"
        The cycle's period, read as the windows read their leads: an int is a number of steps
        of the time axis, a float is in the time coordinate's units (seconds on a datetime
        axis), a string like ``"24h"`` or ``"365D"`` or a timedelta is a duration (a datetime
        axis only); a whole number of the axis' steps.
    """

    name = "seasonal persistence"

    def __init__(self, windows, period=DAY):
        if not isinstance(windows, ForecastWindows):
            raise TypeError(f"windows is a {type(windows).__name__}; expected the fitted "
                            "ForecastWindows whose batches the baseline reads")
        self.windows = windows
        self.period = period
        self.value, self.kind = period_value(period)

    def period_steps(self):
        """The period in steps of the windows' time axis.

        Returns
        -------
        int
            The number of steps (>= 1) one period spans.
        """
        if not self.windows.fitted:
            raise ValueError("windows is not fitted; fit it (windows.fit(ds, where=train)) "
                             "before SeasonalPersistence reads its layout")
        if self.kind == "steps":
            return int(self.value)
        step, timed = _window_step(self.windows)
        if self.kind == "duration" and not timed:
            raise ValueError(f"period={self.period!r} is a duration, but the time axis is "
                             "numeric; give the period as a number of steps or in the time "
                             "coordinate's units")
        steps = self.value / step
        if not (np.isclose(steps, round(steps)) and round(steps) >= 1):
            raise ValueError(f"period={self.period!r} is {steps:g} steps of the time axis; "
                             "expected a whole number of steps (>= 1)")
        return int(round(steps))

    def reaches(self):
        """Whether, at every lead, the inputs reach a period back from the valid time of a
        forecast from the last input step.

        Returns
        -------
        bool
            True when no lead's forecast from the last input step falls back to persistence.
        """
        period = self.period_steps()
        steps = np.asarray(self.windows.steps)
        return bool((self.windows.history + steps - _back(steps, period) * period >= 0).all())

    def _fit(self, train, validation):
        _require_forecast(train[0], "SeasonalPersistence", coords=("lead", "time"))
        windows = self.windows
        period = self.period_steps()
        n_tokens = np.asarray(train[0].tokens).shape[1]
        leads = [float(lead) for lead in as_float(windows.lead_values)]
        self.sources = {lead: self._sources(steps, period, n_tokens)
                        for lead, steps in zip(leads, windows.steps)}
        self.scales = dict(zip(leads, np.ones(len(leads)) if windows.scales is None
                               else windows.scales))
        share = {lead: s.share() for lead, s in self.sources.items()}
        if not any(share.values()):
            steps = np.asarray(windows.steps)
            needed = int((_back(steps, period) * period - steps).max())
            raise ValueError(f"with history = {windows.history} the inputs reach back to no "
                             f"valid time's value one period (period={self.period!r}, {period} "
                             f"steps) earlier at any of the leads {windows.given_leads}; give "
                             f"history >= {needed} (every lead) or a shorter period")
        scores = [masked_mse(self._predict(b), *_targets(b)) for b in validation]
        chosen = {"period_steps": period, "seasonal_share": share,
                  "validation_mse": float(np.mean(scores))}
        short = [lead for lead, s in share.items() if s < 1]
        if short:
            chosen["persistence_at"] = (
                f"leads {short} (seconds): the inputs ({windows.history + 1} steps) do not reach "
                "a period back from every valid time; those targets are predicted by "
                "persistence")
        return chosen

    def _layout(self):
        """Per target feature (Ft,): where its variable's features start among a token's
        inputs, its place within its variable's target features, and that variable's channels
        per step (of a signal's frame)."""
        windows = self.windows
        adapter = windows.adapter
        targets = windows.targets or windows.timed
        lacking = [v for v in targets if v not in adapter.variables]
        if lacking:
            raise ValueError(f"targets {lacking} are not inputs of the windows' adapter, so the "
                             "inputs hold no earlier value of them; add them to its variables")
        widths = adapter.value_widths
        if getattr(adapter, "variables_as", "channels") == "tokens":
            # each variable in its own tokens, with the same features
            width = widths[adapter.variables[0]]
            return np.zeros(width, np.int64), np.arange(width), np.ones(width, np.int64)
        # a grid's time-varying variables hold each cell's history steps side by side
        steps = {v: windows.history + 1 if not windows.along_tokens and v in windows.timed
                 else 1 for v in adapter.variables}
        starts = np.cumsum([0] + [widths[v] * steps[v] for v in adapter.variables])
        starts = dict(zip(adapter.variables, starts))
        per_step = {v: widths[v] // adapter.frame[0] if windows.along_tokens else 1
                    for v in targets}
        return (np.concatenate([np.full(widths[v], starts[v]) for v in targets]),
                np.concatenate([np.arange(widths[v]) for v in targets]),
                np.concatenate([np.full(widths[v], per_step[v]) for v in targets]))

    def _sources(self, lead_steps, period, n_tokens):
        """The :class:`_Sources` of the samples at lead `lead_steps`, N = `n_tokens`."""
        history = self.windows.history
        start, offset, per_step = self._layout()
        tokens = np.arange(n_tokens)[:, None]
        shape = (n_tokens, len(start))
        if not self.windows.along_tokens:
            # a cell's history step h sits at offset * (history + 1) + h; t is step `history`
            step = history + lead_steps - _back(lead_steps, period) * period
            cell = start + offset * (history + 1)
            every = np.broadcast_to(tokens, shape)
            return _Sources((every, np.broadcast_to(cell + step, shape)),
                            (every, np.broadcast_to(cell + history, shape)),
                            np.full(shape, step >= 0), np.ones(shape, bool))
        window, hop = self.windows.adapter.frame
        at, channel = offset // per_step, offset % per_step  # step in the frame, its channel
        step = tokens * hop + at  # each target's step lead earlier in the window, oldest 0
        origin = np.minimum(tokens * hop + window - 1, history)  # its frame's last real step
        ahead = step + lead_steps - origin
        seasonal = step + lead_steps - _back(ahead, period) * period
        # a frame that holds the seasonal step (frames overlap where hop < window)
        frame = np.minimum(np.maximum(seasonal, 0) // hop, n_tokens - 1)
        within = seasonal - frame * hop
        real = step <= history
        found = (seasonal >= 0) & (within < window) & real
        within = np.where(found, within, 0)
        return _Sources((frame, start + within * per_step + channel),
                        (np.broadcast_to(tokens, shape), np.broadcast_to(start + offset, shape)),
                        found, real)

    def _predict(self, batch):
        values = _values(batch)
        valid = np.asarray(batch.valid)
        leads = _leads(batch)
        out = np.zeros((*values.shape[:2], self.layout.n_outputs))
        for lead in np.unique(leads):
            if float(lead) not in self.sources:
                raise ValueError(f"lead {lead:g} is not one of the windows' leads "
                                 f"{sorted(self.sources)} (seconds)")
            rows = leads == lead
            sources = self.sources[float(lead)]
            seasonal = values[rows][:, sources.seasonal[0], sources.seasonal[1]]
            known = valid[rows][:, sources.seasonal[0], sources.seasonal[1]] & sources.found
            source = values[rows][:, sources.persistent[0], sources.persistent[1]]
            if self.windows.increments:
                # persistence is a zero increment; this one puts back to the seasonal value
                out[rows] = np.where(known, seasonal - source, 0.0) / self.scales[float(lead)]
            else:
                out[rows] = np.where(known, seasonal, source)
        return out.astype(np.float32)
