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
training samples (one number per lead, fitted by ``fit(ds, where=train)`` and saved with the
windows, so validation and test batches use the training data's), which weighs every lead
alike; putting back multiplies them again. A list gives the numbers directly.

A missing target is 0 in ``targets`` and False in ``target_valid``, never a silent value.

Edges of the time axis. Only samples whose whole history and valid time lie on the axis are made:
the first ``history`` steps are never initial times, and a t whose t + lead falls past the end is
dropped for that lead (no sample is ever filled with zeros). To forecast past the end of the data,
append the future times as NaN and put predictions back with ``mask_missing=False``.

Putting back. ``seqattn.predict(model, ds, windows)`` (one call: batches, model, put-back,
lazily on dask data, see :mod:`seqattn.adapters.forecast_predict`) and ``decode()`` give a
Dataset of the
target variables with a leading ``lead`` dim (the leads in the coordinate's units) and otherwise
the source's coordinates, where ``time`` is the valid time (the initial time is time - lead); a
(lead, time) no sample reaches is NaN. Overlapping frames of a signal's samples are averaged.
Each batch reads only the time steps and sample indices its samples need, so a dask or zarr
dataset is never loaded whole; shuffled batches read scattered steps, which is slower on disk.

In memory. With ``in_memory=True`` every sample is encoded in one pass over the Dataset, the first
time a batch is asked for, and batches are cut from that: much faster per batch when the samples
fit in memory (an hourly station year: a few tens of MB), and the same batches as without it.

The protocol (:mod:`seqattn.data.protocol`)::

    windows = ForecastWindows(GridAdapter(["t"], {"lat": 4, "lon": 4}), leads=["6h", "12h"],
                              history=1, increments=True, lead_scales="rms")
    windows.fit(ds, where=ds.time.dt.year < 2020)     # the adapter and the lead scales
    batches = windows.batches(ds, where=train, batch_size=16, shuffle=True, seed=0)
    model = build(windows.model_config(d_model=64, coordinates=["latlon", "lead"]))
    forecast = seqattn.predict(model, ds, windows, where=test)

``where`` selects initial and valid times (and other sample dims): a sample is made only when
every step it reads or predicts is selected and they are consecutive in ``ds``, so a gap in the
selection is never bridged and a test period is forecast from test data only. ``batches(...)``
returns a :class:`ForecastBatches`; ``epoch(e)`` replays epoch e. ``seqattn.save(windows)``
keeps the set-up with the adapter's statistics and the lead scales (not the data).
"""
import dataclasses

import numpy as np
import pandas as pd
import xarray as xr

from ..data.batch import Batch, Placement, Template
from ..data.batching import normalized
from ..data.checks import require_dims, require_increasing, require_variables
from ..data.coords import as_float, even_step, require_numeric_axis, to_utc, token_coordinates, \
    whole_steps
from ..data.persistence import Persistable
from ..data.protocol import Adapter, Batches, select_samples
from ..data.stitch import PutBack, Stitcher
from .forecast_predict import LEAD, predict_forecast
from .grid import GridAdapter
from .signal import SignalAdapter

HISTORY = "history"  # the channel dim that the input steps t - history .. t become


class ForecastWindows(Adapter, Persistable):
    """Forecasting samples over a Dataset through `adapter`; see the module docstring.

    Parameters
    ----------
    adapter : GridAdapter or SignalAdapter
        A GridAdapter whose sample dims include `time_dim`, or a SignalAdapter whose time dim is
        `time_dim`; ``fit`` fits it on the training times.
    *args
        Refused: the former ``ForecastWindows(ds, adapter, ...)`` form took the data first; a
        TypeError says how to build, fit and batch instead.
    leads : int, str, timedelta or a list of them
        How far ahead each target lies: steps (int) or the time coordinate's units ("6h").
    history : int, default 0
        Input steps before the initial time (the inputs are t - history .. t).
    targets : list of str, optional
        The variables to forecast (default: the adapter's variables that have `time_dim`).
    time_dim : str, default "time"
        The time dim the forecasts step along.
    increments : bool, default False
        Targets as changes from the source cells (see the module docstring).
    lead_scales : None, "rms" or list of float, default None
        With increments, one scale per lead ("rms": fitted on the training samples).
    in_memory : bool, default False
        Encode every sample once per batches(...) and cut batches from that.
    **removed
        Arguments earlier releases took (``batch_size``, ``shuffle``, ``seed``, ``drop_last``,
        now given to ``batches``): refused with a TypeError.
    """

    def __init__(self, adapter, *args, leads=None, history=0, targets=None, time_dim="time",
                 increments=False, lead_scales=None, in_memory=False, **removed):
        if isinstance(adapter, xr.Dataset) or args:
            raise TypeError("ForecastWindows(ds, adapter, leads=...) is gone: build the set-up "
                            "without data, ForecastWindows(adapter, leads=..., history=...), fit "
                            "it with windows.fit(ds, where=train) and take windows.batches(ds, "
                            "where=..., batch_size=..., shuffle=..., seed=...)")
        moved = sorted(set(removed) & {"batch_size", "shuffle", "seed", "drop_last"})
        if moved:
            raise TypeError(f"ForecastWindows({moved[0]}=...) is gone: give {moved} to "
                            "windows.batches(ds, ...)")
        if removed:
            raise TypeError(f"ForecastWindows() got unexpected keyword arguments {sorted(removed)}")
        if not isinstance(adapter, (GridAdapter, SignalAdapter)):
            raise TypeError(f"adapter must be a GridAdapter or a SignalAdapter, got "
                            f"{type(adapter).__name__}")
        if leads is None:
            raise TypeError("ForecastWindows needs leads=..., e.g. leads=['6h', '12h']")
        if isinstance(adapter, SignalAdapter):
            if adapter.frame_features is not None:
                raise ValueError("a SignalAdapter with frame_features cannot be forecast: a "
                                 "target must be values on the time steps; forecast with "
                                 "frame_features=None")
            if time_dim != adapter.time_dim:
                raise ValueError(f"time_dim {time_dim!r} is not the SignalAdapter's time dim "
                                 f"{adapter.time_dim!r}; a signal is forecast along its own "
                                 "time dim")
        if isinstance(history, bool) or not isinstance(history, (int, np.integer)) or history < 0:
            raise ValueError(f"history = {history!r}; expected a whole number of steps >= 0 "
                             "(the inputs are t - history .. t)")
        if lead_scales is not None and not increments:
            raise ValueError("lead_scales scale increments; give increments=True as well")
        if isinstance(lead_scales, str) and lead_scales != "rms":
            raise ValueError(f"lead_scales={lead_scales!r}; expected 'rms' or one number per lead")
        leads_list = list(leads) if isinstance(leads, (list, tuple, np.ndarray)) else [leads]
        if not leads_list:
            raise ValueError("leads is empty; give at least one lead, e.g. leads=['6h']")
        self.adapter = adapter
        self.given_leads = leads_list  # as given, for the messages
        self.leads = [_json_lead(lead) for lead in leads_list]
        self.history = int(history)
        self.targets = None if targets is None else list(targets)
        self.time_dim = time_dim
        self.increments = bool(increments)
        self.lead_scales = lead_scales if isinstance(lead_scales, str) or lead_scales is None \
            else [float(x) for x in lead_scales]
        self.in_memory = bool(in_memory)
        self.along_tokens = isinstance(adapter, SignalAdapter)
        # fitted state: the leads in steps and in the coordinate's units, the scales, the
        # variables that have the time dim
        self.steps = None
        self.lead_values = None
        self.scales = None
        self.timed = None

    # ---- the protocol --------------------------------------------------------------------------

    @property
    def fitted(self):
        return self.steps is not None and self.adapter.fitted

    def sample_dims(self, ds):
        """The initial time and the adapter's other sample dims."""
        return (self.time_dim,) + self._other_dims(ds)

    def _other_dims(self, ds):
        return tuple(d for d in self.adapter.sample_dims(ds) if d != self.time_dim)

    def fit(self, ds, *, targets=None, where=None):
        """Fit the adapter's statistics and the lead scales on the samples `where` selects
        (training times); `targets` the variables to forecast (default the constructor's, else
        the adapter's variables with the time dim). Returns self."""
        if targets is not None:
            self.targets = [targets] if isinstance(targets, str) else list(targets)
        ds = to_utc(ds)
        selected = self.select(ds, where)
        self.adapter.fit(selected)
        self._check(ds)
        # leads are steps of ds's own axis; the training times must hold a whole sample
        self.steps, self.lead_values = self._leads(ds, selected.sizes[self.time_dim])
        self.timed = [v for v in self.adapter.variables if self.time_dim in ds[v].dims]
        self.scales = None
        if self.lead_scales == "rms":
            self.scales = self._rms(ds, where)
        elif self.lead_scales is not None:
            scales = np.asarray(self.lead_scales, dtype=np.float64)
            if scales.shape != (len(self.steps),) or not (np.isfinite(scales).all()
                                                           and (scales > 0).all()):
                raise ValueError(f"lead_scales={self.lead_scales!r}; expected 'rms' or "
                                 f"{len(self.steps)} positive numbers, one per lead")
            self.scales = scales
        return self

    def _rms(self, ds, where):
        """One scale per lead: the root mean square of its increments over the samples `where`
        selects."""
        whole = self.batches(ds, where=where, batch_size=None).encode_all()
        squares = np.where(whole.target_valid, whole.targets, 0).astype(np.float64) ** 2
        counts = whole.target_valid.reshape(len(whole), -1).sum(axis=1)
        lead = whole.placement.starts[:, 0]
        scales = []
        for i in range(len(self.steps)):
            n = counts[lead == i].sum()
            if n == 0:
                raise ValueError(f"leads[{i}] has no valid target in the training samples, so "
                                 "lead_scales='rms' has nothing to measure")
            scales.append(np.sqrt(squares[lead == i].sum() / n))
        return np.where(np.asarray(scales) > 0, scales, 1.0)

    def get_state(self):
        return {"adapter": self.adapter.get_state(),
                "steps": None if self.steps is None else self.steps.tolist(),
                "scales": None if self.scales is None else self.scales.tolist(),
                "timed": self.timed, "targets": self.targets}

    def set_state(self, state):
        self.adapter.set_state(state.get("adapter", {}))
        self.steps = None if state.get("steps") is None else np.asarray(state["steps"], np.int64)
        self.scales = None if state.get("scales") is None else np.asarray(state["scales"])
        self.timed = state.get("timed")
        self.targets = state.get("targets", self.targets)

    def config(self):
        return {"adapter": self.adapter.to_dict(), "leads": self.leads, "history": self.history,
                "targets": self.targets, "time_dim": self.time_dim,
                "increments": self.increments, "lead_scales": self.lead_scales,
                "in_memory": self.in_memory}

    @classmethod
    def from_dict(cls, d):
        if d.get("adapter") != cls.__name__:
            raise ValueError(f"this file describes a {d.get('adapter')!r}, not a {cls.__name__}")
        config = dict(d["config"])
        config["adapter"] = Persistable.from_dict(config["adapter"])
        windows = cls(**config)
        windows.set_state(d.get("state", {}))
        return windows

    def batches(self, ds, *, targets=None, where=None, batch_size=32, shuffle=False, seed=0,
                drop_last=False):
        """The forecasting samples `where` selects (see the module docstring) as
        :class:`ForecastBatches` of `batch_size` samples (None: all at once).

        Returns
        -------
        ForecastBatches
            ``epoch(e)`` replays epoch e; every batch carries ``targets`` (B, N, Ft),
            ``target_valid`` and ``lead`` (B,).
        """
        self.require_fitted("batches")
        if targets is not None and list(np.atleast_1d(targets)) != self._targets(ds):
            raise ValueError(f"targets={targets!r}, but these windows were fitted for "
                             f"{self._targets(ds)}; fit(ds, targets=...) to change them")
        return ForecastBatches(self, ds, where, batch_size, shuffle, seed, drop_last)

    def decode(self, batch, values=None, *, variables=None, mask_missing=True):
        """One batch's targets (or `values`, predictions (B, N, Ft) in the layout of the targets
        or of the subset `variables`) on valid times, with a leading lead dim, in physical
        units; `mask_missing` makes a prediction NaN where its target is missing."""
        put_back = self.put_back(batch.placement.template, variables, mask_missing)
        put_back.add(batch, values)
        return put_back.result()

    def put_back(self, template, variables=None, mask_missing=True):
        """A :class:`TargetPutBack` for batches of the source `template` (``add(batch,
        values)`` per batch, then ``result()``)."""
        targets = [v for v in template.var_dims if v in (self.targets or template.var_dims)]
        variables = list(variables or targets)
        unknown = [v for v in variables if v not in targets]
        if unknown:
            raise ValueError(f"variables {unknown} are not among the targets {targets}")
        return TargetPutBack(self.target_adapter(targets), template, variables, mask_missing,
                             self.increments, self.scales)

    def model_config(self, task="regression", **options):
        """The config of a TokenModel that reads these batches: ``in_features`` (inputs with
        their history) and ``out_features`` (the targets per token) from the fitted set-up;
        `options` are the config's other fields (``coordinates=["latlon", "lead"]``,
        ``causal=True``, ...).

        Returns
        -------
        TokenModelConfig
        """
        from ..models import TokenModelConfig

        self.require_fitted("model_config")
        if task != "regression":
            raise ValueError(f"task={task!r}; forecasts are regression of values")
        for name in ("in_features", "out_features"):
            if name in options:
                raise TypeError(f"model_config infers {name} from the fitted windows; drop "
                                f"{name}={options[name]!r}")
        targets = self.targets or self.timed
        return TokenModelConfig(in_features=self.input_adapter().token_width(),
                                out_features=self.target_adapter(targets).value_width(),
                                **options)

    def predict(self, model, ds, *, where=None, batch_size=64, variables=None,
                mask_missing=True, store=None, **options):
        """`model`'s forecasts for the samples `where` selects, as one Dataset (lead, ...,
        time = valid time) in physical units; lazy and chunk-parallel on dask data; with
        `store` written to zarr and opened from there (see
        :mod:`seqattn.adapters.forecast_predict`)."""
        if options:
            raise ValueError(f"{sorted(options)} do not apply to forecasts: ForecastWindows "
                             "already fixes what a sample is; drop them")
        self.require_fitted("predict")
        return predict_forecast(model, self, ds, where=where, variables=variables,
                                mask_missing=mask_missing, store=store, batch_size=batch_size)

    # ---- the set-up ----------------------------------------------------------------------------

    def _targets(self, ds):
        return self.targets or [v for v in self.adapter.variables if self.time_dim in ds[v].dims]

    def _check(self, ds):
        require_dims(ds, [self.time_dim], "time_dim")
        sample_dims = self.adapter.sample_dims(ds)
        if not self.along_tokens and self.time_dim not in sample_dims:
            raise ValueError(f"time_dim {self.time_dim!r} is a patch or channel dim of the "
                             f"adapter (its sample dims are {sample_dims}); forecasts step along "
                             "a sample dim")
        require_increasing(ds, self.time_dim, "forecasts")
        taken = [d for d in (HISTORY, LEAD) if d in ds.dims]
        if taken:
            raise ValueError(f"the dataset has dim(s) {taken}, names ForecastWindows gives to the "
                             "input steps and the leads; rename them")
        targets = self._targets(ds)
        require_variables(ds, targets, "target")
        static = [v for v in targets if self.time_dim not in ds[v].dims]
        if static or not targets:
            raise ValueError(f"targets {static or targets} have no {self.time_dim!r} dim, so no "
                             "valid time; name time-varying variables in targets=[...]")
        if getattr(self.adapter, "variables_as", "channels") == "tokens":
            _check_token_variables(ds, self.adapter, targets, self.history, self.time_dim)
        if self.increments:
            lacking = [v for v in targets if v not in self.adapter.variables]
            if lacking:
                raise ValueError(f"increments=True: targets {lacking} are not inputs of the "
                                 "adapter, so there is no earlier value to take the change from; "
                                 "add them to the adapter's variables")
        if self.along_tokens:
            self.adapter.check_window(self.time_dim, self.history + 1)

    def _leads(self, ds, size):
        """Leads in steps, and in the time coordinate's units; errors name the lead. `size`:
        the steps of the training times, which must hold a whole sample of every lead."""
        time_dim, leads, history = self.time_dim, self.given_leads, self.history
        steps = np.array([whole_steps(lead, ds, time_dim, f"leads[{i}]")
                          for i, lead in enumerate(leads)], dtype=np.int64)
        for i, s in enumerate(steps):
            if history + s >= size:
                raise ValueError(f"leads[{i}]={leads[i]!r} is {s} steps; with history = {history} "
                                 f"a sample spans {history + s + 1} steps of {time_dim!r}, which "
                                 f"has {size}; use a shorter lead or less history")
        if len(set(steps.tolist())) < len(steps):
            raise ValueError(f"leads {leads} repeat a lead ({steps.tolist()} steps); "
                             "give each once")
        return steps, self._lead_values(ds, steps)

    def _lead_values(self, ds, steps):
        """The leads in the time coordinate's units (steps without a coordinate)."""
        if self.time_dim not in ds.coords:
            return steps
        require_numeric_axis(ds, self.time_dim, "a lead")
        step = even_step(ds[self.time_dim].values)
        if step is None:
            raise ValueError(f"coordinate {self.time_dim!r} is not evenly spaced, so a lead is "
                             "not one duration; resample it to a regular step")
        return steps * step

    def input_adapter(self):
        """The adapter the inputs go through: a grid's history steps become a channel dim."""
        if self.along_tokens:
            return self.adapter
        inputs = GridAdapter(**{**self.adapter.config(),
                                "channel_dims": [*self.adapter.channel_dims, HISTORY]})
        inputs.set_state(self.adapter.get_state())
        if inputs.value_widths is not None:
            inputs.value_widths = {name: width * ((self.history + 1) if name in self.timed else 1)
                                   for name, width in inputs.value_widths.items()}
        return inputs

    def target_adapter(self, targets, dtype=None):
        """The adapter the targets go through: values only, no validity or calendar channels
        (in `dtype`, default the adapter's)."""
        by_tokens = getattr(self.adapter, "variables_as", "channels") == "tokens"
        variables = self.adapter.variables if by_tokens else list(targets)
        config = {**self.adapter.config(), "calendar": False, "validity_channel": False,
                  "variables": variables, "dtype": dtype or self.adapter.dtype.name}
        adapter = type(self.adapter)(**config)
        adapter.set_state(self.adapter.get_state())
        if adapter.value_widths is not None:
            widths = self.adapter.value_widths
            adapter.value_widths = {v: widths[v] for v in variables if v in widths}
        return adapter


class ForecastBatches(Batches):
    """The batches of a fitted :class:`ForecastWindows` over a Dataset (what
    ``windows.batches(ds, ...)`` returns). Samples: rows ``(initial time, lead index, *other
    sample dims)``, ordered by initial time first.

    Parameters
    ----------
    windows : ForecastWindows
        The fitted set-up: adapter, leads, history, targets.
    ds : xarray.Dataset
        The data the samples are read from.
    where : dict, array-like or xarray.DataArray or None
        Which samples to make: ``{dim: selection}``, a bare selection (along the time dim) or a
        1-d boolean DataArray along a sample dim; a sample is made only where every step it
        reads or predicts is selected. None: every sample.
    batch_size : int or None
        Samples per batch; None puts all samples in one batch.
    shuffle : bool
        Whether each epoch draws a new sample order.
    seed : int or None
        Seed of the shuffled order, which depends only on (seed, epoch).
    drop_last : bool
        Whether to leave out the last batch when it has fewer than `batch_size` samples.
    """

    def __init__(self, windows, ds, where, batch_size, shuffle, seed, drop_last):
        super().__init__(batch_size, shuffle, seed, drop_last)
        source = ds
        ds = to_utc(ds)
        time = windows.time_dim
        windows.adapter.check(ds)
        windows._check(ds)
        selection = _as_dict(where, time)
        allowed = np.ones(ds.sizes[time], dtype=bool)
        if time in selection:
            index = select_samples(ds.assign_coords({"__step__": (time, np.arange(
                ds.sizes[time]))}), {time: selection[time]}, (time,))["__step__"].values
            allowed[:] = False
            allowed[index] = True
        others = {d: w for d, w in selection.items() if d != time}
        if others:
            source = select_samples(source, others, windows.sample_dims(ds))
            ds = to_utc(source)
        self.windows = windows
        targets = windows._targets(ds)
        self.targets = targets
        self.inputs = windows.input_adapter()
        self.target_adapter = windows.target_adapter(targets)
        # the increments' base in float64, so zero changes give the data's values exactly
        self.base_adapter = windows.target_adapter(targets, "float64")
        self.other_dims = windows._other_dims(ds)
        needed = list(dict.fromkeys(windows.adapter.variables + targets))
        self.ds = ds[needed]
        self.template = Template.of(source[self.target_adapter.variables].expand_dims(
            {LEAD: np.asarray(windows._lead_values(ds, windows.steps))}))
        self.leads = windows._lead_values(ds, windows.steps)
        self._coords = token_coordinates(ds)
        steps, history = windows.steps, windows.history
        grid = np.meshgrid(np.arange(history, ds.sizes[time]), np.arange(len(steps)),
                           *[np.arange(ds.sizes[d]) for d in self.other_dims], indexing="ij")
        rows = np.stack([g.ravel() for g in grid], axis=1).astype(np.int64)
        rows = rows[rows[:, 0] + steps[rows[:, 1]] < ds.sizes[time]]
        # every step a sample reads or predicts is selected (so no gap is bridged)
        span = np.concatenate([[0], np.cumsum(~allowed)])
        first, last = rows[:, 0] - history, rows[:, 0] + steps[rows[:, 1]]
        self.samples = rows[span[last + 1] - span[first] == 0]
        if not len(self.samples):
            raise ValueError(f"no forecasting sample fits the selection: each needs history + "
                             f"lead + 1 consecutive selected steps of {time!r} (history = "
                             f"{history}, leads {windows.leads})")
        self._encoded = None  # with in_memory: every sample, in self.samples' order

    @property
    def n_samples(self):
        return len(self.samples)

    def collate(self, indices):
        if self.windows.in_memory:
            return self._cut(indices)
        return self._encode(self.samples[indices])

    def encode_all(self):
        """Every sample, in order, as one Batch."""
        return self._encode(self.samples)

    def put_back(self, variables=None, mask_missing=True):
        """A :class:`TargetPutBack` for these batches."""
        return self.windows.put_back(self.template, variables, mask_missing)

    def _cut(self, rows):
        """Samples `rows` of the batch of every sample, encoded once."""
        if self._encoded is None:
            self._encoded = self.encode_all()
        whole = self._encoded
        return dataclasses.replace(
            whole, tokens=whole.tokens[rows], key_padding_mask=whole.key_padding_mask[rows],
            valid=whole.valid[rows], coords={k: v[rows] for k, v in whole.coords.items()},
            placement=dataclasses.replace(whole.placement, starts=whole.placement.starts[rows]),
            targets=whole.targets[rows], target_valid=whole.target_valid[rows],
            target_base=None if whole.target_base is None else whole.target_base[rows],
            lead=whole.lead[rows])

    def _encode(self, rows):
        windows = self.windows
        time, history = windows.time_dim, windows.history
        t, lead = rows[:, 0], rows[:, 1]
        other = {d: rows[:, 2 + i] for i, d in enumerate(self.other_dims)}
        steps = windows.steps[lead]
        window = t[:, None] + np.arange(-history, 1)  # (B, history + 1), oldest first
        # the cells a token stands for, and the same cells `lead` later
        source = window if windows.along_tokens else t[:, None]
        target = source + steps[:, None]
        need = {time: np.union1d(window, target), **{d: np.unique(i) for d, i in other.items()}}
        raw = self.ds.isel(need).compute()
        region = normalized(windows.adapter, raw)
        # positions inside the region, one (B, m) array per sample dim
        spot = {d: np.searchsorted(need[d], i)[:, None] for d, i in other.items()}
        at = lambda positions: {time: np.searchsorted(need[time], positions), **spot}

        b = len(rows)
        sizes = {**self.ds.sizes, **{d: 1 for d in other}}
        sizes.update({time: history + 1} if windows.along_tokens
                     else {time: 1, HISTORY: history + 1})
        coords = {}
        for name, (d, values) in self._coords.items():
            if d == time and (windows.along_tokens or name != time):
                if windows.along_tokens:
                    coords[name] = values[window]
            elif d in other:
                coords[name] = values[other[d]]
            elif d in windows.adapter.token_dims:
                coords[name] = np.broadcast_to(values, (b, len(values)))
        if not windows.along_tokens and time in self._coords:
            coords[time] = self._coords[time][1][t]
        placement = Placement(self.template, (LEAD, time, *other),
                              (1, target.shape[1], *[1] * len(other)), (0,) * (2 + len(other)),
                              np.stack([lead, target[:, 0], *other.values()], axis=1))

        arrays, var_dims = {}, {}
        for name in windows.adapter.variables:
            da = region[name]
            arrays[name], var_dims[name] = take(da, at(window)), da.dims
            if time in da.dims and not windows.along_tokens:
                # its steps become the history channel; time is the sample's
                var_dims[name] = tuple(HISTORY if d == time else d for d in da.dims) + (time,)
                arrays[name] = arrays[name][..., None]
        encoded = self.inputs.encode_samples(arrays, var_dims, sizes, coords, placement)
        expected = self._encode_targets(region, at(target), sizes, coords, placement)
        targets, target_valid, base = expected.tokens, expected.valid, None
        if windows.increments:
            source_values = self._encode_targets(region, at(source), sizes, coords, placement)
            target_valid = target_valid & source_values.valid
            physical = self._encode_targets(raw, at(source), sizes, coords, placement,
                                            self.base_adapter)
            base = np.where(physical.valid, physical.tokens, np.nan)
            targets = np.where(target_valid, targets - source_values.tokens, 0).astype(
                targets.dtype)
            if windows.scales is not None:
                targets = (targets / windows.scales[lead][:, None, None]).astype(targets.dtype)
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
                     target_base=base, lead=leads)

    def _encode_targets(self, region, positions, sizes, coords, placement, adapter=None):
        adapter = adapter or self.target_adapter
        names = adapter.variables
        return adapter.encode_samples(
            {v: take(region[v], positions) for v in names}, {v: region[v].dims for v in names},
            sizes, coords, placement)


def _as_dict(where, time_dim):
    """`where` as {dim: selection} (a bare selection is along the time dim)."""
    if where is None:
        return {}
    if isinstance(where, xr.DataArray):
        return {where.dims[0]: where} if where.ndim == 1 else {"__bad__": where}
    return dict(where) if isinstance(where, dict) else {time_dim: where}


def _check_token_variables(ds, adapter, targets, history, time_dim):
    """With variables as tokens a target sits in its own variable's tokens, and every variable
    needs the same number of input features."""
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


class TargetPutBack(PutBack):
    """PutBack for forecast batches: what is put back stands for the targets, so the batch's
    targets (and their validity) take the place of its inputs. A token is left out (NaN) only
    when it has neither a valid input nor a valid target: its targets decode exactly, and
    predictions past the data's end (all targets NaN) survive ``mask_missing=False``. Values
    given for a sample without any valid input token are NaN: it had nothing to predict from.

    With `increments` the values are changes from the batch's ``target_base`` (the source
    cells in physical units; NaN where missing): the result is ``values * scale * std + base``,
    ``scale`` being the lead's (`lead_scales`, one per lead) or 1, so zero changes give the
    source values exactly (persistence).

    Parameters
    ----------
    adapter : GridAdapter or SignalAdapter
        The adapter that decodes the target tokens (the windows' target adapter).
    template : Template
        Coordinates and variable layout of the targets, with a lead dim.
    variables : list of str, optional
        The variables the values stand for; default None, the adapter's ``variables``.
    mask_missing : bool, default True
        Whether values where a token has neither a valid input nor a valid target become NaN.
    increments : bool, default False
        Whether values are changes from the batch's ``target_base`` (in units of the target's
        std, times the lead's scale) rather than normalized values.
    lead_scales : numpy.ndarray, optional
        (n_leads,) scale of each lead's increments; default None (1 for every lead).
    """

    def __init__(self, adapter, template, variables=None, mask_missing=True, increments=False,
                 lead_scales=None):
        super().__init__(adapter, template, variables, mask_missing)
        self.increments = increments
        self.lead_scales = lead_scales
        self._base = Stitcher(template, self.variables) if increments else None

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
            # a sample without a valid input token had nothing to predict from
            blind = batch.key_padding_mask.all(axis=1)
            if blind.any():
                values = np.where(blind[:, None, None], np.nan, values)
        if self.lead_scales is not None:  # starts[:, 0] is each sample's lead index
            values = values * self.lead_scales[batch.placement.starts[:, 0]][:, None, None]
        arrays = self.adapter.decode_samples(as_targets, values, names, mask)
        self._stitcher.add(arrays, batch.placement)
        if self.increments:
            base = self.adapter.decode_samples(as_targets, batch.target_base,
                                               self.adapter.variables, False)
            self._base.add({name: base[name] for name in self.variables}, batch.placement)

    def _token_rows(self, n, names):
        """Rows of variables `names` among all variables' tokens (variables as tokens)."""
        everyone = self.adapter.variables
        per_variable = n // len(everyone)
        return np.concatenate([np.arange(per_variable) + everyone.index(v) * per_variable
                               for v in names])

    def result(self):
        if not self.increments:
            return super().result()
        increments = self._stitcher.result()
        if self.adapter.normalizer is not None:
            increments = self.adapter.normalizer.invert_scale(increments)
        base = self._base.result()
        out = increments.copy()
        for name in self.variables:
            total = increments[name] + base[name]
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
