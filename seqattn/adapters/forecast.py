"""ForecastWindows: forecasting samples over a gridded Dataset, and predictions back on valid times.

A sample is one (initial time t, lead) pair. Its inputs are the adapter's variables at the
``history + 1`` steps t - history .. t; its targets are the ``targets`` variables at the valid time
t + lead. Several leads give several samples per initial time, each carrying its own lead (in
``Batch.lead`` and as the per-token coordinate ``coords["lead"]``): the way a lead-conditioned
model learns every lead from one dataset. Samples are ordered by initial time, then lead, then the
adapter's other sample dims (ensemble members, ...).

Leads are given like SignalAdapter's window: an int is a number of steps of the time dim; a float,
a timedelta or a string like ``"6h"`` is in the time coordinate's units and must be a whole number
(>= 1) of its steps. ``Batch.lead`` is in the coordinate's units (timedelta64 on a datetime axis, a
number on a numeric one, steps when the dim has no coordinate); ``coords["lead"]`` is the same in
float64 (seconds for timedeltas, like ``coords["time"]``).

Token layout. Inputs are the adapter's tokens with the history as the innermost channel: per
variable, patch cells x channel dims x history steps (oldest first), then the validity channels;
a static field has no history. Targets are the same patches of the target variables (patch cells
x channel dims per variable, no validity channel), so ``targets[:, i]`` belongs to ``tokens[:, i]``.
A missing target is 0 in ``targets`` and False in ``target_valid``, never a silent value.

Edges of the time axis. Only samples whose whole history and valid time lie on the axis are made:
the first ``history`` steps are never initial times, and a t whose t + lead falls past the end is
dropped for that lead (no sample is ever filled with zeros). To forecast past the end of the data,
append the future times as NaN and put predictions back with ``mask_missing=False``.

Putting back. ``put_back()`` / ``decode()`` give a Dataset of the target variables with a leading
``lead`` dim (the leads in the coordinate's units) and otherwise the source's coordinates, where
``time`` is the valid time (the initial time is time - lead); a (lead, time) no sample reaches is
NaN. Each batch reads only the time steps and sample indices its samples need, so a dask or zarr
dataset is never loaded whole; shuffled batches read scattered steps, which is slower on disk.
"""
import numpy as np

from .batch import Batch, Placement, Template
from .checks import require_dims, require_variables
from .coords import as_float, even_step, whole_steps
from .grid import GridAdapter
from .stitch import PutBack

HISTORY = "history"  # the channel dim that the input steps t - history .. t become
LEAD = "lead"        # the dim that put-back predictions gain, one index per lead


class ForecastWindows:
    """Iterate over forecasting samples of `ds` in batches; see the module docstring.

    `adapter` is a GridAdapter with ``variables_as="channels"`` whose sample dims include
    `time_dim`; `targets` default to its variables that have `time_dim`. `batch_size=None` puts
    all samples in one batch; ``shuffle`` draws a new order every epoch from `seed`.
    """

    def __init__(self, ds, adapter, leads, history=0, targets=None, time_dim="time",
                 batch_size=32, shuffle=False, seed=None, drop_last=False):
        if not isinstance(adapter, GridAdapter):
            raise TypeError(f"adapter must be a GridAdapter, got {type(adapter).__name__}")
        if adapter.variables_as != "channels":
            raise ValueError("the adapter has variables_as='tokens'; forecasting needs "
                             "variables_as='channels' so that every target sits in its input token")
        adapter.check(ds)
        require_dims(ds, [time_dim], "time_dim")
        sample_dims = adapter.sample_dims(ds)
        if time_dim not in sample_dims:
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
        config = adapter.config()
        self.inputs = GridAdapter(**{**config, "channel_dims": [*adapter.channel_dims, HISTORY]},
                                  normalizer=adapter.normalizer)
        self.target_adapter = GridAdapter(**{**config, "variables": targets,
                                             "validity_channel": False},
                                          normalizer=adapter.normalizer)
        self.target_adapter.check(ds)

        self.steps, self.leads = self._leads(ds, leads, history, time_dim)
        self.adapter = adapter
        self.history = int(history)
        self.time_dim = time_dim
        self.other_dims = tuple(d for d in sample_dims if d != time_dim)
        self.ds = ds[list(dict.fromkeys(adapter.variables + targets))]
        self.template = Template.of(ds[targets].expand_dims({LEAD: self.leads}))
        self.batch_size = batch_size
        self.shuffle = shuffle
        self.seed = seed
        self.drop_last = drop_last
        self._epoch = 0
        self._coords = {d: np.asarray(ds[d].values) for d in ds.dims
                        if d in ds.coords and ds[d].ndim == 1}
        # columns (initial time, lead index, *other sample dims), by initial time first
        grid = np.meshgrid(np.arange(self.history, ds.sizes[time_dim]), np.arange(len(self.steps)),
                           *[np.arange(ds.sizes[d]) for d in self.other_dims], indexing="ij")
        rows = np.stack([g.ravel() for g in grid], axis=1).astype(np.int64)
        self.samples = rows[rows[:, 0] + self.steps[rows[:, 1]] < ds.sizes[time_dim]]

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
        step = even_step(ds[time_dim].values)
        if step is None:
            raise ValueError(f"coordinate {time_dim!r} is not evenly spaced, so a lead is not one "
                             "duration; resample it to a regular step")
        return steps, steps * step

    @property
    def n_samples(self):
        return len(self.samples)

    def __len__(self):
        if self.batch_size is None:
            return 1
        whole, rest = divmod(self.n_samples, self.batch_size)
        return whole if self.drop_last or not rest else whole + 1

    def __iter__(self):
        order = np.arange(self.n_samples)
        if self.shuffle:
            rng = np.random.default_rng(None if self.seed is None else [self.seed, self._epoch])
            order = rng.permutation(self.n_samples)
        self._epoch += 1
        size = self.batch_size or self.n_samples
        end = self.n_samples - self.n_samples % size if self.drop_last else self.n_samples
        for start in range(0, end, size):
            yield self._encode(self.samples[order[start:start + size]])

    def _encode(self, rows):
        time = self.time_dim
        t, lead = rows[:, 0], rows[:, 1]
        other = {d: rows[:, 2 + i] for i, d in enumerate(self.other_dims)}
        valid_time = t + self.steps[lead]
        window = t[:, None] + np.arange(-self.history, 1)  # (B, history + 1), oldest first
        need = {time: np.union1d(window, valid_time), **{d: np.unique(i) for d, i in other.items()}}
        region = self.ds.isel(need).compute()
        if self.adapter.normalizer is not None:
            region = self.adapter.normalizer.apply(region)
        # positions inside the region, one (B, m) array per sample dim
        spot = {d: np.searchsorted(need[d], i)[:, None] for d, i in other.items()}
        input_at = {time: np.searchsorted(need[time], window), **spot}
        target_at = {time: np.searchsorted(need[time], valid_time)[:, None], **spot}

        sizes = {**self.ds.sizes, time: 1, HISTORY: self.history + 1, **{d: 1 for d in other}}
        coords = {d: np.broadcast_to(self._coords[d], (len(rows), sizes[d]))
                  for d in self.adapter.token_dims if d in self._coords}
        coords.update({d: self._coords[d][i] for d, i in {time: t, **other}.items()
                       if d in self._coords})
        placement = Placement(self.template, (LEAD, time, *other), (1,) * (2 + len(other)),
                              (0,) * (2 + len(other)),
                              np.stack([lead, valid_time, *other.values()], axis=1))

        arrays, var_dims = {}, {}
        for name in self.adapter.variables:
            da = region[name]
            arrays[name], var_dims[name] = take(da, input_at), da.dims
            if time in da.dims:  # its steps become the history channel; time is the sample's
                var_dims[name] = tuple(HISTORY if d == time else d for d in da.dims) + (time,)
                arrays[name] = arrays[name][..., None]
        encoded = self.inputs.encode_samples(arrays, var_dims, sizes, coords, placement)
        expected = self.target_adapter.encode_samples(
            {v: take(region[v], target_at) for v in self.target_adapter.variables},
            {v: region[v].dims for v in self.target_adapter.variables}, sizes, coords, placement)
        leads = self.leads[lead]
        n = encoded.tokens.shape[1]
        return Batch(tokens=encoded.tokens, key_padding_mask=encoded.key_padding_mask,
                     valid=encoded.valid,
                     coords={**encoded.coords, LEAD: np.repeat(as_float(leads)[:, None], n, 1)},
                     placement=placement, targets=expected.tokens, target_valid=expected.valid,
                     lead=leads)

    def put_back(self, variables=None, mask_missing=True):
        """A :class:`TargetPutBack` for this iterator's batches: ``add(batch, predictions)`` for
        each batch, then ``result()`` is the targets' Dataset with a lead dim, on valid times."""
        return TargetPutBack(self.target_adapter, self.template, variables, mask_missing)

    def decode(self, batch, values=None, variables=None, mask_missing=True):
        """One batch's targets (or `values`, predictions (B, N, Ft) in the layout of `targets`
        or of the subset `variables`) on valid times; `mask_missing` makes a prediction NaN where
        its target is missing. See the module docstring for the Dataset's layout."""
        put_back = TargetPutBack(self.target_adapter, batch.placement.template, variables,
                                 mask_missing)
        put_back.add(batch, values)
        return put_back.result()


class TargetPutBack(PutBack):
    """PutBack for forecast batches: what is put back stands for the targets, so the batch's
    targets (and their validity) take the place of its inputs. A token is left out (NaN) only
    when it has neither a valid input nor a valid target: its targets decode exactly, and
    predictions past the data's end (all targets NaN) survive ``mask_missing=False``."""

    def add(self, batch, values=None):
        empty = batch.key_padding_mask & ~batch.target_valid.any(axis=-1)
        as_targets = Batch(tokens=batch.targets, key_padding_mask=empty, valid=batch.target_valid,
                           coords=batch.coords, placement=batch.placement)
        super().add(as_targets, values)


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
