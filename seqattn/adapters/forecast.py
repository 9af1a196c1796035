"""ForecastWindows: forecasting samples over a Dataset, and predictions back on valid times.

A sample is one (initial time t, lead) pair: its inputs end at step t of ``time_dim``, its targets
are what the model is asked to predict ``lead`` later. Several leads give several samples per
initial time, each carrying its own lead (in ``Batch.lead`` and as the per-token coordinate
``coords["lead"]``): the way a lead-conditioned model learns every lead from one dataset. Samples
are ordered by initial time, then lead, then the adapter's other sample dims (ensemble members,
stations, ...). In every case ``targets[:, i]`` belongs to ``tokens[:, i]``: a token's target is
its own cells ``lead`` later.

Two kinds of adapter, by the role the time dim plays in it:

* **time is a sample dim** (a :class:`GridAdapter`): the inputs are the adapter's variables at the
  ``history + 1`` steps t - history .. t, the history being the innermost channel (per variable:
  patch cells x channel dims x history steps, oldest first, then the validity and calendar
  channels; a static field has no history). The targets are the ``targets`` variables at the
  valid time t + lead, in the same patches (patch cells x channel dims per variable, no validity
  channel). With ``variables_as="tokens"`` each variable keeps its own tokens and the targets sit
  in the tokens of their variable; tokens of other variables (static fields) have no target
  (``target_valid`` False). Stations along a string-labelled dim become tokens with
  ``patch={"station": 1}``.
* **time is the token dim** (a :class:`SignalAdapter`, one station or many along a sample dim):
  the inputs are the ``history + 1`` steps t - history .. t cut into the adapter's frames; the
  targets are the same frames ``lead`` later (steps t - history + lead .. t + lead). With frames
  of w steps, a lead of at least w steps keeps every target step after all the steps its token
  holds, so a causal model never sees its own target.

Leads are given like SignalAdapter's window: an int is a number of steps of the time dim; a float,
a timedelta or a string like ``"6h"`` is in the time coordinate's units and must be a whole number
(>= 1) of its steps. ``Batch.lead`` is in the coordinate's units (timedelta64 on a datetime axis, a
number on a numeric one, steps when the dim has no coordinate); ``coords["lead"]`` is the same in
float64 (seconds for timedeltas, like ``coords["time"]``).

Increments. With ``increments=True`` the targets are the change from the source cells (the same
cells ``lead`` earlier: the last input step t on a grid, the input frame itself on a signal), in
normalized units, ``(y - x) / std``; a target is missing where either value is. Putting back adds
the source values back in physical units (``prediction * std + x``), so a model that predicts zero
gives persistence exactly, and a prediction needs the value it is an increment from.
Increments grow with the lead, so a loss on them is dominated by the longest leads; with
``lead_scales="rms"`` each lead's increments are also divided by their root mean square over this
Dataset's samples (one number per lead, kept in ``lead_scales`` and passed on by ``like`` and
``to_dict``, so validation and test windows use the training data's), which weighs every lead
alike; putting back multiplies them again. A list gives the numbers directly.

A missing target is 0 in ``targets`` and False in ``target_valid``, never a silent value.

Edges of the time axis. Only samples whose whole history and valid time lie on the axis are made:
the first ``history`` steps are never initial times, and a t whose t + lead falls past the end is
dropped for that lead (no sample is ever filled with zeros). To forecast past the end of the data,
append the future times as NaN and put predictions back with ``mask_missing=False``.

Putting back. ``predict(model)`` (one call: batches, model, put-back, lazily on dask data, see
:mod:`seqattn.adapters.forecast_predict`), ``put_back()`` and ``decode()`` give a Dataset of the
target variables with a leading ``lead`` dim (the leads in the coordinate's units) and otherwise
the source's coordinates, where ``time`` is the valid time (the initial time is time - lead); a
(lead, time) no sample reaches is NaN. Overlapping frames of a signal's samples are averaged.
Each batch reads only the time steps and sample indices its samples need, so a dask or zarr
dataset is never loaded whole; shuffled batches read scattered steps, which is slower on disk.

In memory. With ``in_memory=True`` every sample is encoded in one pass over the Dataset, the first
time a batch is asked for, and batches are cut from that: much faster per batch when the samples
fit in memory (an hourly station year: a few tens of MB), and the same batches as without it.

Epochs. ``epoch(e)`` yields the batches of epoch e; with ``shuffle=True`` their order depends only
on (``seed``, e), so a resumed training run replays an epoch exactly. Iterating the object runs
epochs 0, 1, ... Saving: ``to_dict()`` / ``ForecastWindows.from_dict(d, ds)`` (the adapter with
its normalizer, and every option, as JSON-able values; the data are not part of it).
"""
import dataclasses

import numpy as np
import pandas as pd
import xarray as xr

from ..data.batch import Batch, Placement, Template
from ..data.batching import check_epoch, normalized
from ..data.checks import require_dims, require_variables
from ..data.coords import (as_float, even_step, require_numeric_axis, to_utc, token_coordinates,
                     whole_steps)
from .grid import GridAdapter
from ..data.persistence import Persistable
from .signal import SignalAdapter
from ..data.stitch import PutBack

HISTORY = "history"  # the channel dim that the input steps t - history .. t become
LEAD = "lead"        # the dim that put-back predictions gain, one index per lead


class ForecastWindows:
    """Iterate over forecasting samples of `ds` in batches; see the module docstring.

    `adapter` is a GridAdapter whose sample dims include `time_dim`, or a SignalAdapter whose
    time dim is `time_dim`; `targets` default to its variables that have `time_dim`.
    `batch_size=None` puts all samples in one batch; ``shuffle`` draws a new order every epoch
    from (`seed`, epoch); ``increments`` makes the targets changes from the source cells;
    ``in_memory`` encodes every sample once and cuts the batches from them.
    """

    def __init__(self, ds, adapter, leads, history=0, targets=None, time_dim="time",
                 batch_size=32, shuffle=False, seed=None, drop_last=False, increments=False,
                 lead_scales=None, in_memory=False):
        if not isinstance(adapter, (GridAdapter, SignalAdapter)):
            raise TypeError(f"adapter must be a GridAdapter or a SignalAdapter, got "
                            f"{type(adapter).__name__}")
        source = ds
        ds = to_utc(ds)
        adapter.check(ds)
        require_dims(ds, [time_dim], "time_dim")
        sample_dims = adapter.sample_dims(ds)
        along_tokens = isinstance(adapter, SignalAdapter)
        if along_tokens and adapter.frame_features is not None:
            raise ValueError("a SignalAdapter with frame_features cannot be forecast: a target "
                             "must be values on the time steps; forecast with frame_features=None")
        if along_tokens and time_dim != adapter.time_dim:
            raise ValueError(f"time_dim {time_dim!r} is not the SignalAdapter's time dim "
                             f"{adapter.time_dim!r}; a signal is forecast along its own time dim")
        if not along_tokens and time_dim not in sample_dims:
            raise ValueError(f"time_dim {time_dim!r} is a patch or channel dim of the adapter (its "
                             f"sample dims are {sample_dims}); forecasts step along a sample dim")
        taken = [d for d in (HISTORY, LEAD) if d in ds.dims]
        if taken:
            raise ValueError(f"the dataset has dim(s) {taken}, names ForecastWindows gives to the "
                             "input steps and the leads; rename them")
        if not isinstance(history, (int, np.integer)) or history < 0:
            raise ValueError(f"history = {history!r}; expected a whole number of steps >= 0 "
                             "(the inputs are t - history .. t)")
        if batch_size is not None and (not isinstance(batch_size, (int, np.integer))
                                       or batch_size < 1):
            raise ValueError(f"batch_size = {batch_size!r}; expected a positive integer or None")
        targets = [v for v in adapter.variables if time_dim in ds[v].dims] \
            if targets is None else list(targets)
        require_variables(ds, targets, "target")
        static = [v for v in targets if time_dim not in ds[v].dims]
        if static or not targets:
            raise ValueError(f"targets {static or targets} have no {time_dim!r} dim, so no valid "
                             "time; name time-varying variables in targets=[...]")
        by_tokens = getattr(adapter, "variables_as", "channels") == "tokens"
        if by_tokens:
            self._check_token_variables(ds, adapter, targets, history, time_dim)
        if increments:
            lacking = [v for v in targets if v not in adapter.variables]
            if lacking:
                raise ValueError(f"increments=True: targets {lacking} are not inputs of the "
                                 "adapter, so there is no earlier value to take the change from; "
                                 "add them to the adapter's variables")

        config = adapter.config()
        normalizer = adapter.normalizer
        if along_tokens:
            self.inputs = adapter
            adapter.check_window(time_dim, int(history) + 1)
        else:
            self.inputs = GridAdapter(**{**config, "channel_dims": [*adapter.channel_dims,
                                                                    HISTORY]},
                                      normalizer=normalizer)
        self.target_adapter = type(adapter)(**{**config, "calendar": False,
                                               "validity_channel": False,
                                               "variables": adapter.variables if by_tokens
                                               else targets}, normalizer=normalizer)
        self.target_adapter.check(ds)

        self.given_leads = leads
        self.steps, self.leads = self._leads(ds, leads, history, time_dim)
        self.adapter = adapter
        self.history = int(history)
        self.targets = targets
        self.time_dim = time_dim
        self.along_tokens = along_tokens
        self.increments = bool(increments)
        self.other_dims = tuple(d for d in sample_dims if d != time_dim)
        needed = list(dict.fromkeys(adapter.variables + targets))
        self.ds = ds[needed]
        self.source = source[needed]
        self.template = Template.of(source[self.target_adapter.variables].expand_dims(
            {LEAD: self.leads}))
        self.batch_size = batch_size
        self.shuffle = shuffle
        self.seed = seed
        self.drop_last = drop_last
        self.in_memory = bool(in_memory)
        self._encoded = None  # with in_memory: every sample, in self.samples' order
        self._epoch = 0
        self._coords = token_coordinates(ds)
        # columns (initial time, lead index, *other sample dims), by initial time first
        grid = np.meshgrid(np.arange(self.history, ds.sizes[time_dim]), np.arange(len(self.steps)),
                           *[np.arange(ds.sizes[d]) for d in self.other_dims], indexing="ij")
        rows = np.stack([g.ravel() for g in grid], axis=1).astype(np.int64)
        self.samples = rows[rows[:, 0] + self.steps[rows[:, 1]] < ds.sizes[time_dim]]
        self.lead_scales = None
        if lead_scales is not None:
            self.lead_scales = self._lead_scales(lead_scales)

    def _lead_scales(self, given):
        """One positive number per lead that its increments are divided by (see the module
        docstring): `given`, or with "rms" the root mean square of this Dataset's increments."""
        if not self.increments:
            raise ValueError("lead_scales scale increments; give increments=True as well")
        if isinstance(given, str):
            if given != "rms":
                raise ValueError(f"lead_scales={given!r}; expected 'rms' or one number per lead")
            whole = self._encode(self.samples)
            squares = np.where(whole.target_valid, whole.targets, 0).astype(np.float64) ** 2
            counts = whole.target_valid.reshape(len(whole), -1).sum(axis=1)
            lead = self.samples[:, 1]
            scales = []
            for i in range(len(self.steps)):
                n = counts[lead == i].sum()
                if n == 0:
                    raise ValueError(f"leads[{i}] has no valid target in this Dataset, so "
                                     "lead_scales='rms' has nothing to measure")
                scales.append(np.sqrt(squares[lead == i].sum() / n))
            scales = np.where(np.asarray(scales) > 0, scales, 1.0)
            if self.in_memory:  # the encoding just made is the one to cut batches from
                self._encoded = dataclasses.replace(whole, targets=(
                    whole.targets / scales[lead][:, None, None]).astype(whole.targets.dtype))
            return scales
        scales = np.asarray(given, dtype=np.float64)
        if scales.shape != (len(self.steps),) or not (np.isfinite(scales).all()
                                                       and (scales > 0).all()):
            raise ValueError(f"lead_scales={given!r}; expected 'rms' or {len(self.steps)} "
                             "positive numbers, one per lead")
        return scales

    @staticmethod
    def _check_token_variables(ds, adapter, targets, history, time_dim):
        """With variables as tokens a target sits in its own variable's tokens, and every
        variable needs the same number of input features."""
        elsewhere = [v for v in targets if v not in adapter.variables]
        if elsewhere:
            raise ValueError(f"targets {elsewhere} are not among the adapter's variables; with "
                             "variables_as='tokens' a target is predicted in its own variable's "
                             "tokens, so add them to the adapter's variables")
        static = [v for v in adapter.variables if time_dim not in ds[v].dims]
        if static and history:
            raise ValueError(f"variables_as='tokens' with history = {history} gives time-varying "
                             f"variables {history + 1} steps per cell but static variable(s) "
                             f"{static} one; drop them from the adapter's variables, use "
                             "history=0 or variables_as='channels'")

    @staticmethod
    def _leads(ds, leads, history, time_dim):
        """Leads in steps, and in the time coordinate's units; errors name the lead."""
        leads = list(leads) if isinstance(leads, (list, tuple, np.ndarray)) else [leads]
        if not leads:
            raise ValueError("leads is empty; give at least one lead, e.g. leads=['6h']")
        steps = np.array([whole_steps(lead, ds, time_dim, f"leads[{i}]")
                          for i, lead in enumerate(leads)], dtype=np.int64)
        size = ds.sizes[time_dim]
        for i, s in enumerate(steps):
            if history + s >= size:
                raise ValueError(f"leads[{i}]={leads[i]!r} is {s} steps; with history = {history} "
                                 f"a sample spans {history + s + 1} steps of {time_dim!r}, which "
                                 f"has {size}; use a shorter lead or less history")
        if len(set(steps.tolist())) < len(steps):
            raise ValueError(f"leads {leads} repeat a lead ({steps.tolist()} steps); "
                             "give each once")
        if time_dim not in ds.coords:
            return steps, steps
        require_numeric_axis(ds, time_dim, "a lead")
        step = even_step(ds[time_dim].values)
        if step is None:
            raise ValueError(f"coordinate {time_dim!r} is not evenly spaced, so a lead is not one "
                             "duration; resample it to a regular step")
        return steps, steps * step

    # ---- configuration -------------------------------------------------------------------------

    def config(self):
        """The constructor's options (all but `ds` and `adapter`) as JSON-able values."""
        leads = self.given_leads
        leads = list(leads) if isinstance(leads, (list, tuple, np.ndarray)) else [leads]
        return {"leads": [_json_lead(lead) for lead in leads], "history": self.history,
                "targets": list(self.targets), "time_dim": self.time_dim,
                "batch_size": None if self.batch_size is None else int(self.batch_size),
                "shuffle": bool(self.shuffle),
                "seed": None if self.seed is None else int(self.seed),
                "drop_last": bool(self.drop_last), "increments": self.increments,
                "lead_scales": None if self.lead_scales is None
                else [float(x) for x in self.lead_scales], "in_memory": self.in_memory}

    def to_dict(self):
        """Options and adapter (with its normalizer) as a JSON-able dict; not the data."""
        return {"windows": type(self).__name__, "config": self.config(),
                "adapter": self.adapter.to_dict()}

    @classmethod
    def from_dict(cls, d, ds):
        """The windows :meth:`to_dict` describes, over Dataset `ds`."""
        if d.get("windows") != cls.__name__:
            raise ValueError(f"this dict describes {d.get('windows')!r}, not {cls.__name__}")
        return cls(ds, Persistable.from_dict(d["adapter"]), **d["config"])

    def like(self, ds, **changes):
        """Windows with this set-up (adapter, leads, history, ...) over another Dataset `ds`;
        `changes` override options, e.g. ``shuffle=False``."""
        return type(self)(ds, self.adapter, **{**self.config(), **changes})

    # ---- iterating -----------------------------------------------------------------------------

    @property
    def n_samples(self):
        return len(self.samples)

    def __len__(self):
        if self.batch_size is None:
            return 1
        whole, rest = divmod(self.n_samples, self.batch_size)
        return whole if self.drop_last or not rest else whole + 1

    def __iter__(self):
        epoch = self._epoch
        self._epoch += 1
        return self.epoch(epoch)

    def epoch(self, epoch):
        """The batches of epoch `epoch` (an int >= 0), lazily; with ``shuffle`` in an order that
        depends only on (seed, epoch) (``seed=None``: fresh randomness, not reproducible)."""
        epoch = check_epoch(epoch)
        order = np.arange(self.n_samples)
        if self.shuffle:
            rng = np.random.default_rng(None if self.seed is None else [self.seed, epoch])
            order = rng.permutation(self.n_samples)
        return self._batches(order)

    def _batches(self, order):
        size = self.batch_size or self.n_samples
        end = self.n_samples - self.n_samples % size if self.drop_last else self.n_samples
        for start in range(0, end, size):
            if self.in_memory:
                yield self._cut(order[start:start + size])
            else:
                yield self._encode(self.samples[order[start:start + size]])

    def _cut(self, rows):
        """Samples `rows` (indices into self.samples) of the batch of every sample, encoded once."""
        if self._encoded is None:
            self._encoded = self._encode(self.samples)
        whole = self._encoded
        return dataclasses.replace(
            whole, tokens=whole.tokens[rows], key_padding_mask=whole.key_padding_mask[rows],
            valid=whole.valid[rows], coords={k: v[rows] for k, v in whole.coords.items()},
            placement=dataclasses.replace(whole.placement, starts=whole.placement.starts[rows]),
            targets=whole.targets[rows], target_valid=whole.target_valid[rows],
            lead=whole.lead[rows])

    def _encode(self, rows):
        time = self.time_dim
        t, lead = rows[:, 0], rows[:, 1]
        other = {d: rows[:, 2 + i] for i, d in enumerate(self.other_dims)}
        steps = self.steps[lead]
        window = t[:, None] + np.arange(-self.history, 1)  # (B, history + 1), oldest first
        # the cells a token stands for, and the same cells `lead` later
        source = window if self.along_tokens else t[:, None]
        target = source + steps[:, None]
        need = {time: np.union1d(window, target), **{d: np.unique(i) for d, i in other.items()}}
        region = normalized(self.adapter, self.ds.isel(need).compute())
        # positions inside the region, one (B, m) array per sample dim
        spot = {d: np.searchsorted(need[d], i)[:, None] for d, i in other.items()}
        at = lambda positions: {time: np.searchsorted(need[time], positions), **spot}

        b = len(rows)
        sizes = {**self.ds.sizes, **{d: 1 for d in other}}
        sizes.update({time: self.history + 1} if self.along_tokens
                     else {time: 1, HISTORY: self.history + 1})
        coords = {d: (self._coords[d][window] if d == time else
                      np.broadcast_to(self._coords[d], (b, sizes[d])))
                  for d in self.adapter.token_dims if d in self._coords}
        sample_coords = {**({} if self.along_tokens else {time: t}), **other}
        coords.update({d: self._coords[d][i] for d, i in sample_coords.items()
                       if d in self._coords})
        placement = Placement(self.template, (LEAD, time, *other),
                              (1, target.shape[1], *[1] * len(other)), (0,) * (2 + len(other)),
                              np.stack([lead, target[:, 0], *other.values()], axis=1))

        arrays, var_dims = {}, {}
        for name in self.adapter.variables:
            da = region[name]
            arrays[name], var_dims[name] = take(da, at(window)), da.dims
            if time in da.dims and not self.along_tokens:
                # its steps become the history channel; time is the sample's
                var_dims[name] = tuple(HISTORY if d == time else d for d in da.dims) + (time,)
                arrays[name] = arrays[name][..., None]
        encoded = self.inputs.encode_samples(arrays, var_dims, sizes, coords, placement)
        expected = self._encode_targets(region, at(target), sizes, coords, placement)
        targets, target_valid = expected.tokens, expected.valid
        if self.increments:
            base = self._encode_targets(region, at(source), sizes, coords, placement)
            target_valid = target_valid & base.valid
            targets = np.where(target_valid, targets - base.tokens, 0).astype(targets.dtype)
            if self.lead_scales is not None:
                targets = (targets / self.lead_scales[lead][:, None, None]).astype(targets.dtype)
        if self.target_adapter.variables != self.targets:  # tokens of non-target variables
            n = targets.shape[1] // len(self.target_adapter.variables)
            for j, name in enumerate(self.target_adapter.variables):
                if name not in self.targets:
                    target_valid[:, j * n:(j + 1) * n] = False
                    targets[:, j * n:(j + 1) * n] = 0
        leads = self.leads[lead]
        n = encoded.tokens.shape[1]
        return Batch(tokens=encoded.tokens, key_padding_mask=encoded.key_padding_mask,
                     valid=encoded.valid,
                     coords={**encoded.coords, LEAD: np.repeat(as_float(leads)[:, None], n, 1)},
                     placement=placement, targets=targets, target_valid=target_valid,
                     lead=leads)

    def _encode_targets(self, region, positions, sizes, coords, placement):
        names = self.target_adapter.variables
        return self.target_adapter.encode_samples(
            {v: take(region[v], positions) for v in names}, {v: region[v].dims for v in names},
            sizes, coords, placement)

    # ---- putting back --------------------------------------------------------------------------

    def put_back(self, variables=None, mask_missing=True):
        """A :class:`TargetPutBack` for this iterator's batches: ``add(batch, predictions)`` for
        each batch, then ``result()`` is the targets' Dataset with a lead dim, on valid times."""
        variables = list(variables or self.targets)
        unknown = [v for v in variables if v not in self.targets]
        if unknown:
            raise ValueError(f"variables {unknown} are not among the targets {self.targets}")
        base = self._persistence(variables) if self.increments else None
        return TargetPutBack(self.target_adapter, self.template, variables, mask_missing, base,
                             self.lead_scales)

    def decode(self, batch, values=None, variables=None, mask_missing=True):
        """One batch's targets (or `values`, predictions (B, N, Ft) in the layout of `targets`
        or of the subset `variables`) on valid times; `mask_missing` makes a prediction NaN where
        its target is missing. See the module docstring for the Dataset's layout."""
        put_back = self.put_back(variables, mask_missing)
        put_back.add(batch, values)
        return put_back.result()

    def predict(self, model, ds=None, *, variables=None, mask_missing=True, store=None,
                batch_size=None):
        """`model`'s forecasts for every sample of `ds` (default: this iterator's Dataset) with
        this set-up, as one Dataset (lead, ..., time = valid time) in physical units; lazy and
        chunk-parallel on dask data; `batch_size` samples per model call (default this set-up's).
        See :func:`seqattn.adapters.forecast_predict.predict_forecast`.
        """
        from .forecast_predict import predict_forecast

        return predict_forecast(model, self, self.source if ds is None else ds,
                                variables=variables, mask_missing=mask_missing, store=store,
                                batch_size=batch_size)

    def _persistence(self, variables):
        """{variable: (lead, *its dims)} its value `lead` before each valid time: what increments
        are added to (lazy on dask data)."""
        out = {}
        for name in variables:
            da = self.ds[name]
            shifted = xr.concat([da.shift({self.time_dim: int(s)}) for s in self.steps], dim=LEAD)
            out[name] = shifted.variable.transpose(*self.template.var_dims[name])
        return out


class TargetPutBack(PutBack):
    """PutBack for forecast batches: what is put back stands for the targets, so the batch's
    targets (and their validity) take the place of its inputs. A token is left out (NaN) only
    when it has neither a valid input nor a valid target: its targets decode exactly, and
    predictions past the data's end (all targets NaN) survive ``mask_missing=False``.

    With `base` ({variable: array on the template's dims}) the values are increments: the result
    is ``values * std + base`` in physical units; with `lead_scales` (one per lead) increments
    in units of their lead's scale, ``values * scale * std + base``."""

    def __init__(self, adapter, template, variables=None, mask_missing=True, base=None,
                 lead_scales=None):
        super().__init__(adapter, template, variables, mask_missing)
        self.base = base
        self.lead_scales = lead_scales

    def add(self, batch, values=None):
        empty = batch.key_padding_mask & ~batch.target_valid.any(axis=-1)
        as_targets = Batch(tokens=batch.targets, key_padding_mask=empty, valid=batch.target_valid,
                           coords=batch.coords, placement=batch.placement)
        if values is None:
            values, names, mask = batch.targets, self.adapter.variables, True
        else:
            values, names, mask = np.asarray(values), self.variables, self.mask_missing
            if values.shape[:2] != batch.targets.shape[:2]:
                raise ValueError(f"values have shape {values.shape}; expected (B, N, F) with "
                                 f"(B, N) = {batch.targets.shape[:2]}, the batch's tokens")
            if getattr(self.adapter, "variables_as", "channels") == "tokens":
                values = values[:, self._token_rows(values.shape[1], names)]
        if self.lead_scales is not None:  # starts[:, 0] is each sample's lead index
            values = values * self.lead_scales[batch.placement.starts[:, 0]][:, None, None]
        arrays = self.adapter.decode_samples(as_targets, values, names, mask)
        self._stitcher.add(arrays, batch.placement)

    def _token_rows(self, n, names):
        """Rows of variables `names` among all variables' tokens (variables as tokens)."""
        everyone = self.adapter.variables
        per_variable = n // len(everyone)
        return np.concatenate([np.arange(per_variable) + everyone.index(v) * per_variable
                               for v in names])

    def result(self):
        if self.base is None:
            return super().result()
        increments = self._stitcher.result()
        if self.adapter.normalizer is not None:
            increments = self.adapter.normalizer.invert_scale(increments)
        out = increments.copy()
        for name in self.variables:
            total = increments[name] + self.base[name]
            dtype = self._stitcher.template.var_dtypes[name]
            if np.issubdtype(dtype, np.floating):
                total = total.astype(dtype)
            out[name] = total.assign_attrs(increments[name].attrs)
        return out


def _json_lead(lead):
    """A lead as JSON: steps and numbers as they are, durations as pandas' string for them."""
    if isinstance(lead, (bool, np.bool_)):
        raise TypeError(f"lead {lead!r} is a bool; give steps (int) or a duration")
    if isinstance(lead, (int, np.integer)) and not isinstance(lead, np.timedelta64):
        return int(lead)
    if isinstance(lead, (float, np.floating)):
        return float(lead)
    return str(pd.Timedelta(lead))


def take(da, index):
    """Values of `da` for each sample: ``index[d]`` (B, m) picks m positions along dim d per
    sample. Returns (B, *da's dims), sized m along the picked dims and whole along the others."""
    values = np.asarray(da.values)
    picked = [d for d in da.dims if d in index]
    if not picked:  # a static field: the same array for every sample, so no copy
        b = len(next(iter(index.values())))
        return np.broadcast_to(values, (b, *values.shape))
    front = np.moveaxis(values, [da.dims.index(d) for d in picked], range(len(picked)))
    # one axis per picked dim, so a sample's picks along several dims combine as an outer product
    k = len(picked)
    grids = tuple(index[d].reshape(len(index[d]), *[1] * i, -1, *[1] * (k - 1 - i))
                  for i, d in enumerate(picked))
    taken = front[grids]  # (B, m_0, .., m_k-1, *other dims)
    layout = picked + [d for d in da.dims if d not in index]
    return taken.transpose([0] + [1 + layout.index(d) for d in da.dims])
