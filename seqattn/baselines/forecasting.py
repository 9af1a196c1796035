"""Forecasting: persistence, climatology and ridge per lead, from forecast batches.

Forecast batches (:class:`seqattn.adapters.ForecastWindows`) carry targets (B, N, Ft) in the
same tokens as the inputs, normalized like them (or as increments), and per-token coordinates
``lead`` (seconds on a datetime axis) and ``time`` (the initial time, seconds since 1970 UTC).

* :class:`Persistence`: each target channel is predicted by the input value channel of the same
  token that matched it best on the training batches, or by zero where zero matched best. With
  ``increments=True`` zero is persistence itself; otherwise the matching channel is the target's
  own cells at the last input step. Choosing on training batches needs no layout knowledge.
* :class:`Climatology`: per lead, token and target channel, a mean plus annual and daily
  harmonics of the valid time (``time + lead``), fitted on the training batches only (with
  increments, the climatological change over the lead added to the last value); the number of
  harmonics is chosen on validation. A cycle longer than the training period is left out (its
  harmonics would be extrapolated, not averaged). Needs ``time`` and ``lead`` in seconds (a
  calendar); ``periods`` gives other cycles in the time coordinate's units.
* :class:`LeadRidge`: per lead, ridge regression from every input of the sample flattened
  (N * F) to every target (N * Ft), the penalty chosen per lead on validation. With
  ``time_of_day`` (and a ``time`` coordinate in seconds) the sine and cosine of the initial
  time's hour join the inputs, as a model encoding the time of day sees it. Past
  ``max_features`` inputs it regresses each token's targets on that token's inputs instead.
"""
import numpy as np

from .base import Baseline
from .estimators import fit_ridge, masked_mse

YEAR, DAY = 365.2425 * 86400.0, 86400.0
HARMONICS = (0, 1, 2, 3)


def _values(batch):
    return np.asarray(batch.values, np.float64)


def _targets(batch):
    """Targets (B, N, Ft) with 0 where unknown, and the known mask."""
    targets = np.asarray(batch.targets, np.float64)
    known = np.isfinite(targets)
    if batch.target_valid is not None:
        known &= np.asarray(batch.target_valid)
    return np.where(known, targets, 0.0), known


def _leads(batch):
    """Each sample's lead (B,), from its first token's ``lead`` coordinate."""
    return np.asarray(batch.coords["lead"])[:, 0]


def _for_lead(fitted, lead):
    if lead not in fitted:
        raise ValueError(f"lead {lead:g} was not among the training batches' leads "
                         f"{sorted(float(x) for x in fitted)}")
    return fitted[lead]


def _require_forecast(batch, name, coords=("lead",)):
    targets = batch.targets
    if targets is None or np.asarray(targets).ndim != 3 or np.asarray(targets).dtype.kind != "f":
        raise ValueError(f"{name} reads forecast batches with value targets (B, N, Ft); got "
                         f"targets of shape {None if targets is None else np.shape(targets)}")
    lacking = [c for c in coords if c not in batch.coords]
    if lacking:
        raise ValueError(f"{name} needs the per-token coordinates {list(coords)}; the batch has "
                         f"{sorted(batch.coords)} (lacking {lacking})")


class Persistence(Baseline):
    """Each target channel predicted by the input value channel of the same token that
    matched it best on the training batches, or by zero (see the module docstring); for
    forecast batches (value targets (B, N, Ft) per token). Takes no parameters.
    """

    name = "persistence"

    def _fit(self, train, validation):
        _require_forecast(train[0], "Persistence", coords=())
        squares = crossed = value_squares = 0.0
        for batch in train:
            targets, known = _targets(batch)
            values = _values(batch)
            T, K = targets.reshape(-1, targets.shape[-1]), known.reshape(-1, known.shape[-1])
            V = values.reshape(-1, values.shape[-1])
            squares = squares + (T ** 2).sum(axis=0)
            crossed = crossed + V.T @ T
            value_squares = value_squares + (V ** 2).T @ K
        # sum of (t - v)^2 over known targets, per (value channel, target channel); row 0: zero
        errors = np.vstack([squares[None], squares[None] - 2 * crossed + value_squares])
        self.source = errors.argmin(axis=0) - 1  # -1: zero
        scores = [masked_mse(self._predict(b), *_targets(b)) for b in validation]
        return {"source_channel": self.source.tolist(), "validation_mse": float(np.mean(scores))}

    def _predict(self, batch):
        values = _values(batch)
        out = np.where(self.source >= 0, values[..., np.maximum(self.source, 0)], 0.0)
        return out.astype(np.float32)


class Climatology(Baseline):
    """Per lead, token and target channel, a mean plus harmonics of the valid time (``time +
    lead``) fitted on the training batches, the number of harmonics chosen on validation
    (see the module docstring). Reads forecast batches with ``time`` and ``lead``
    coordinates.

    Parameters
    ----------
    periods : tuple of float, default (365.2425 * 86400, 86400)
        The cycles' periods, in the units of ``time`` and ``lead`` (default: a year and a
        day, in seconds). A cycle longer than the training batches' span of valid times is
        left out.
    harmonics : tuple of int, default (0, 1, 2, 3)
        The candidate numbers of harmonics per cycle (0: the mean alone).
    """

    name = "climatology"

    def __init__(self, periods=(YEAR, DAY), harmonics=HARMONICS):
        self.periods, self.harmonics = tuple(periods), tuple(harmonics)

    def design(self, batch, harmonics):
        """(B, N, P) regressors at each token's valid time: 1, then cos and sin per period and
        harmonic.

        Parameters
        ----------
        batch : seqattn.data.Batch
            A forecast batch with ``time`` and ``lead`` coordinates (B, N).
        harmonics : int
            The number of harmonics per cycle kept by fit.

        Returns
        -------
        numpy.ndarray
            (B, N, P) with P = 1 + 2 * harmonics * the number of cycles.
        """
        valid_time = np.asarray(batch.coords["time"]) + np.asarray(batch.coords["lead"])
        columns = [np.ones_like(valid_time)]
        for period in self.cycles:
            for h in range(1, harmonics + 1):
                angle = 2 * np.pi * h * valid_time / period
                columns += [np.cos(angle), np.sin(angle)]
        return np.nan_to_num(np.stack(columns, axis=-1))

    def _solve(self, train, harmonics):
        """{lead: (N, Ft, P) coefficients}, fitted on `train`."""
        gram, moments = {}, {}
        for batch in train:
            targets, known = _targets(batch)
            P = self.design(batch, harmonics)
            leads = _leads(batch)
            for lead in np.unique(leads):
                rows = leads == lead
                gram[lead] = gram.get(lead, 0.0) + np.einsum(
                    "bnj,bnp,bnq->njpq", known[rows], P[rows], P[rows])
                moments[lead] = moments.get(lead, 0.0) + np.einsum(
                    "bnj,bnp->njp", targets[rows], P[rows])
        # a small ridge keeps a token whose targets never vary (or are never known) solvable
        return {lead: np.linalg.solve(gram[lead] + 1e-6 * np.eye(gram[lead].shape[-1]),
                                      moments[lead][..., None])[..., 0] for lead in gram}

    def _fit(self, train, validation):
        _require_forecast(train[0], "Climatology", coords=("time", "lead"))
        valid_times = np.concatenate([(np.asarray(b.coords["time"]) + np.asarray(b.coords["lead"]))
                                      .ravel() for b in train])
        span = np.nanmax(valid_times) - np.nanmin(valid_times)
        self.cycles = tuple(p for p in self.periods if p <= span)
        scores, fits = {}, {}
        for h in self.harmonics:
            self.h, self.coef = h, self._solve(train, h)
            fits[h] = self.coef
            errors = [(masked_mse(self._predict(b), *_targets(b)), _targets(b)[1].sum())
                      for b in validation]
            scores[h] = float(sum(e * n for e, n in errors) / max(sum(n for _, n in errors), 1))
        self.h = min(scores, key=scores.get)
        self.coef = fits[self.h]
        return {"harmonics": self.h, "periods": list(self.cycles), "validation_mse": scores}

    def _predict(self, batch):
        P = self.design(batch, self.h)
        leads = _leads(batch)
        out = np.zeros((*P.shape[:2], next(iter(self.coef.values())).shape[1]))
        for lead in np.unique(leads):
            rows = leads == lead
            out[rows] = np.einsum("bnp,njp->bnj", P[rows], _for_lead(self.coef, lead))
        return out.astype(np.float32)


class LeadRidge(Baseline):
    """Per lead, ridge regression from every input of the sample flattened to every target,
    the penalty chosen per lead on validation (see the module docstring); for forecast
    batches (value targets (B, N, Ft) per token, a ``lead`` coordinate).

    Parameters
    ----------
    max_features : int, default 4096
        The most flattened inputs (N * F, with the hour's two channels) regressed jointly;
        past it each token's targets are regressed on that token's inputs ("lead token
        ridge").
    time_of_day : bool, default True
        Add the sine and cosine of the initial time's hour to every token's inputs, where
        the batches have a ``time`` coordinate in seconds.
    """

    def __init__(self, max_features=4096, time_of_day=True):
        self.max_features, self.time_of_day = int(max_features), bool(time_of_day)

    @property
    def name(self):
        return "lead ridge" if getattr(self, "flatten", True) else "lead token ridge"

    def inputs(self, batch):
        """(B, N, F [+ 2]) the tokens, with the initial time's hour as sine and cosine.

        Parameters
        ----------
        batch : seqattn.data.Batch
            A forecast batch, tokens (B, N, F).

        Returns
        -------
        numpy.ndarray
            (B, N, F + 2) with ``time_of_day`` and a ``time`` coordinate, else (B, N, F).
        """
        tokens = np.asarray(batch.tokens, np.float64)
        if not (self.time_of_day and "time" in batch.coords):
            return tokens
        phase = 2 * np.pi * (np.asarray(batch.coords["time"], np.float64) % DAY) / DAY
        phase = np.nan_to_num(phase)
        return np.concatenate([tokens, np.sin(phase)[..., None], np.cos(phase)[..., None]],
                              axis=2)

    def rows(self, batches, lead):
        X, Y, K = [], [], []
        for batch in batches:
            chosen = _leads(batch) == lead
            tokens = self.inputs(batch)[chosen]
            targets, known = (a[chosen] for a in _targets(batch))
            if self.flatten:
                X.append(tokens.reshape(len(tokens), -1))
                Y.append(targets.reshape(len(targets), -1))
                K.append(known.reshape(len(known), -1))
            else:
                present = ~np.asarray(batch.key_padding_mask)[chosen]
                X.append(tokens[present])
                Y.append(targets[present])
                K.append(known[present])
        return np.concatenate(X), np.concatenate(Y), np.concatenate(K)

    def _fit(self, train, validation):
        _require_forecast(train[0], "LeadRidge")
        _, N, F = self.inputs(train[0]).shape
        self.flatten = N * F <= self.max_features
        self.n_tokens, self.hour_inputs = N, F > np.asarray(train[0].tokens).shape[2]
        leads = np.unique(np.concatenate([_leads(b) for b in train]))
        self.models, chosen = {}, {}
        for lead in leads:
            X_valid, Y_valid, K_valid = self.rows(validation, lead)
            if len(X_valid) == 0:
                raise ValueError(f"the validation batches hold no sample at lead {lead:g}; "
                                 "ridge per lead chooses each lead's penalty on its own samples")
            self.models[lead], chosen[float(lead)] = fit_ridge(*self.rows(train, lead), X_valid,
                                                               Y_valid, K_valid)
        return {"flattened": self.flatten, "per_lead": chosen}

    def _predict(self, batch):
        tokens = self.inputs(batch)
        B, N, _ = tokens.shape
        out = np.zeros((B, N, self.models[next(iter(self.models))].intercept.shape[0]
                        // (N if self.flatten else 1)))
        leads = _leads(batch)
        for lead in np.unique(leads):
            chosen = leads == lead
            model = _for_lead(self.models, lead)
            if self.flatten:
                out[chosen] = model.predict(tokens[chosen].reshape(chosen.sum(), -1)).reshape(
                    chosen.sum(), N, -1)
            else:
                out[chosen] = model.predict(tokens[chosen].reshape(-1, tokens.shape[-1])).reshape(
                    chosen.sum(), N, -1)
        return out.astype(np.float32)
