"""SignalAdapter: audio, station time series and time courses as sequences of frames.

A frame of ``window`` steps, taken every ``hop`` steps along ``time_dim``, is one token; its
features are ``[var0 window x channels, var1 ..., validity, calendar]``. Window and hop are given
in steps (int) or in the coordinate's units: a float for numeric coordinates (0.025 and 0.01 on a
time axis in seconds make the 25 ms frames every 10 ms, 100 tokens per second, of speech models),
a string or timedelta ("1h") for datetime coordinates. ``channel_dims`` fold into the features;
every other dim (station, recording) is a sample dim. The last frame is padded and masked.

With ``calendar=True`` each token gets sin/cos of the hour of day and of the day of year of its
first step (a time coordinate only: datetime64, or cftime datetimes whose day of year counts in
their calendar's year). Series of different lengths go in one batch with
``encode([ds_a, ds_b])``: shorter ones are padded out in ``key_padding_mask``; decoding such a
batch gives back the list. Overlapping frames are blended when put back.

Frame features. With ``frame_features`` each frame's steps (per variable and channel) become
features computed inside the adapter: ``"log_mel"`` (or a :class:`~.frame_features.LogMel` with
its options: 25 ms windows every 10 ms of audio become log-mel vectors) or a function of the
frames (..., window) -> (..., K). A token is then ``[var0 K x channels, var1 ..., validity,
calendar]``; a frame with a missing step (the last, partial one; padding past a recording's end)
is missing as a whole. The normalization statistics are those of the features (per feature, and
per index of ``per_dims``, which may then name channel dims only), and decoding gives the
features back per frame: each variable on (sample dims, time = the frames' centres, the
features' dim, channel dims), the ``mel`` dim labelled by the bands' centre frequencies in Hz. A
numeric time coordinate is read as seconds for the sample rate.

Each token's ``coords["steps"]`` counts the series' own steps its frame starts: `hop` (the
steps from its first to the next frame's), fewer in the frame where the series ends and 0 past
it. A series ends at its last step where any variable has a value; the missing steps after it
(NaN padding to the longest series, or the padding of the last frame) are not its steps, while
a missing step before it is one (its values 0 in the tokens, as the model reads them). Frames of
raw steps read back as the series' own steps with them:
:class:`seqattn.baselines.WarpingNeighbour` with ``steps=`` and the model's warping path do.
"""
import dataclasses

import numpy as np
import pandas as pd
import xarray as xr
from numpy.lib.stride_tricks import sliding_window_view

from ..data.batch import Batch, Template
from ..data.blend import Blender, taper
from ..data.checks import require_dims, require_monotonic, require_samples, require_variables
from ..data.coords import (as_float, calendar_features, canonical_names, even_step, is_time,
                           times_from_seconds, to_utc, whole_steps, with_year_fraction,
                           year_calendar)
from .frame_features import frame_features as as_frame_features
from ..data.normalize import STATS, Normalizer
from ..data.stitch import PutBack
from .windowed import IDENTITY, WindowedAdapter, _finite, removed_arguments

N_CALENDAR = 4
# the per-token coordinate of the series' own steps that each frame starts
STEPS = "steps"


class SignalAdapter(WindowedAdapter):
    """Signals on a time dim <-> (B, N, F) frame tokens. See the module docstring.

    Parameters
    ----------
    variables : list of str
        The input variables (each has ``time_dim``).
    window : int, float, str or timedelta
        A frame's length: steps (int) or the time coordinate's units ("25ms", 0.025 s, "6h").
    hop : int, float, str or timedelta, optional
        The step between frames' starts (default: `window`, frames side by side).
    time_dim : str, default "time"
        The dim the frames are cut along.
    channel_dims : sequence of str, default ()
        Dims folded into each frame's features (microphones, sensors).
    calendar : bool, default False
        Add sin/cos of the hour of day and day of year of each frame's first step.
    per_dims : sequence of str, default ()
        Dims with a statistic per index (with frame features: channel dims only).
    validity_channel : bool, default True
        Add per variable the fraction of a frame's steps that are valid.
    dtype : str, default "float32"
        The tokens' dtype.
    frame_features : None, "log_mel", LogMel or callable, default None
        Features computed from each frame's steps (see the module docstring); None: the
        frame's raw steps.
    normalize : bool, default True
        Standardize values (or features) by the statistics fit computes (False: as they are).
    **removed
        Arguments earlier releases took (``normalizer=``): refused with a TypeError that says
        what replaces them (statistics come from ``fit``).
    """

    def __init__(self, variables, window, *, hop=None, time_dim="time", channel_dims=(),
                 calendar=False, per_dims=(), validity_channel=True, dtype="float32",
                 frame_features=None, normalize=True, **removed):
        removed_arguments(type(self), removed)
        if isinstance(variables, str) or not variables:
            raise TypeError("variables must be a non-empty list of variable names, "
                            f"got {variables!r}")
        if time_dim in channel_dims:
            raise ValueError(f"time_dim {time_dim!r} is also in channel_dims; it holds the frames")
        self.variables = list(variables)
        self.window = window
        self.hop = window if hop is None else hop
        self.time_dim = time_dim
        self.channel_dims = tuple(channel_dims)
        self.calendar = bool(calendar)
        self.per_dims = tuple(per_dims)
        self.validity_channel = bool(validity_channel)
        self.dtype = np.dtype(dtype)
        self.frame_features = as_frame_features(frame_features)
        self.normalize = bool(normalize)
        self.normalizer = None
        # fitted state: (window, hop) in steps and the time coordinate's steps per second, as
        # fit resolved them against the data; features per frame and channel; value widths
        self.frame = None
        self.rate = None
        self.n_features = getattr(self.frame_features, "n_mels", None)
        self.value_widths = None

    @property
    def token_dims(self):
        return (self.time_dim,)

    def config(self):
        as_duration = lambda x: x if isinstance(x, (int, float, str)) else str(pd.Timedelta(x))
        return {**super().config(), "window": as_duration(self.window),
                "hop": as_duration(self.hop),
                "frame_features": None if self.frame_features is None
                else {"log_mel": self.frame_features.config()}}

    def get_state(self):
        return {**super().get_state(), "frame": None if self.frame is None else list(self.frame),
                "rate": self.rate, "n_features": self.n_features,
                "value_widths": self.value_widths}

    def set_state(self, state):
        super().set_state(state)
        self.frame = None if state.get("frame") is None else tuple(state["frame"])
        self.rate = state.get("rate")
        self.n_features = state.get("n_features", self.n_features)
        self.value_widths = state.get("value_widths")

    @property
    def normalizes_frames(self):
        """True when the statistics are those of frame features, applied after computing them
        (iterators then hand over the data unnormalized)."""
        return self.frame_features is not None

    # ---- fitting and checking ------------------------------------------------------------------

    def fit(self, ds, *, targets=None, where=None):
        """Learn the statistics (lazily on dask data) and the targets from the samples `where`
        selects; `ds` may be a list of Datasets (series of different lengths). Returns self."""
        if isinstance(ds, (list, tuple)):
            if where is not None or targets is not None:
                raise ValueError("fit on a list of Datasets takes neither where nor targets; "
                                 "select the series by the list itself")
            self._fit(ds, None)
            return self
        return super().fit(ds, targets=targets, where=where)

    def _fit_inputs(self, ds):
        datasets = [to_utc(d) for d in (ds if isinstance(ds, (list, tuple)) else [ds])]
        self.normalizer, self.frame = None, None
        self.check(datasets[0])
        self.frame = self.resolve_frame(datasets[0])
        for d in datasets[1:]:
            self.check(d)
        self.rate = self._steps_per_second(datasets[0])
        if not self.normalize:
            self.normalizer = IDENTITY
            if self.frame_features is not None:
                self.encode(ds)  # the number of features per frame
        elif self.frame_features is not None:
            # a fitted adapter without statistics yet: the features' own come from encoding
            self.normalizer = IDENTITY
            self.normalizer = self._feature_statistics(self.encode(ds), datasets[0])
        else:
            merged = xr.concat([d[self.variables] for d in datasets], dim="__series__")
            self.normalizer = Normalizer.fit(_finite(merged), self.variables, self.per_dims)
        per_frame = self.frame[0] if self.frame_features is None else self.n_features
        self.value_widths = {name: per_frame * int(np.prod(
            [datasets[0].sizes[d] for d in self.channel_dims if d in datasets[0][name].dims],
            dtype=np.int64)) for name in self.variables}

    def value_width(self):
        """Value features per frame: the outputs per token of a model that predicts the inputs."""
        self.require_fitted("value_width")
        return sum(self.value_widths.values())

    def step_features(self):
        """(hop, K) int array: the token features that hold each of the first `hop` steps of a
        frame, every variable's channels of that step (K of them). Taken from consecutive
        tokens they are the series' own steps again, one per row: what
        :class:`seqattn.baselines.WarpingNeighbour` compares with ``steps=`` (warping the
        steps, not the frames). Raw frames only."""
        self.require_fitted("step_features")
        if self.frame_features is not None:
            raise ValueError("step_features: this adapter computes features of each frame "
                             "(frame_features), so its tokens do not hold the steps")
        window, hop = self.frame
        if hop > window:
            raise ValueError(f"step_features: frames of {window} steps every {hop} leave steps "
                             "out; the steps are in the tokens only where hop <= window")
        rows, offset = [], 0
        for name in self.variables:
            channels = self.value_widths[name] // window
            rows.append(offset + np.arange(hop)[:, None] * channels + np.arange(channels))
            offset += self.value_widths[name]
        return np.concatenate(rows, axis=1)

    def token_width(self):
        """Features per frame: values, then validity and calendar channels."""
        return (self.value_width() + (len(self.variables) if self.validity_channel else 0)
                + (N_CALENDAR if self.calendar else 0))

    def encode(self, ds, *, where=None):
        """The samples `where` selects as one Batch; a list of Datasets (series of different
        lengths) gives one Batch of them all, padded and masked."""
        if isinstance(ds, (list, tuple)):
            return Batch.concat([self.encode(d, where=where) for d in ds])
        return super().encode(ds, where=where)

    def _feature_statistics(self, batch, ds):
        """Mean and std of each variable's features over every valid frame (per feature, and per
        index of the channel dims in per_dims), as a Normalizer on the decoded layout."""
        k = self.n_features
        stats, offset = {}, 0
        for name in self.variables:
            channels = [d for d in self.channel_dims if d in ds[name].dims]
            shape = [ds.sizes[d] for d in channels]
            width = k * int(np.prod(shape, dtype=np.int64))
            values = batch.values[..., offset:offset + width].astype(np.float64)
            valid = batch.valid[..., offset:offset + width]
            offset += width
            rows = np.where(valid, values, np.nan).reshape(-1, k, *shape)  # (frames, K, *channels)
            over = tuple(2 + i for i, d in enumerate(channels) if d not in self.per_dims)
            mean = np.nanmean(rows, axis=(0, *over))
            std = np.nanstd(rows, axis=(0, *over))
            if not np.isfinite(mean).any():
                raise ValueError(f"variable {name!r} has no whole frame without missing steps, "
                                 "so its features have no statistics")
            kept = [d for d in channels if d in self.per_dims]
            dims = ("stat", self.frame_features.dim, *kept)
            coords = {d: ds[d] for d in kept if d in ds.coords}
            band = self.frame_features.coordinate(k, self.rate)
            if band is not None:
                coords[self.frame_features.dim] = band
            stats[name] = xr.DataArray(np.stack([mean, np.where(std > 0, std, 1.0)]), dims=dims,
                                       coords={"stat": list(STATS), **coords})
        return Normalizer(xr.Dataset(stats))

    def check(self, ds):
        """Raise a clear error if `ds` cannot be encoded (`ds` and the adapter are left as they are)."""
        if not isinstance(ds, xr.Dataset):
            raise TypeError(f"expected an xarray.Dataset, got {type(ds).__name__}")
        ds = to_utc(ds)
        require_variables(ds, self.variables)
        require_dims(ds, (self.time_dim,), "time")
        require_dims(ds, self.channel_dims, "channel")
        require_monotonic(ds, self.time_dim)
        if self.normalizer is not None and self.normalize and self.frame_features is None:
            extra = sorted(set(self.variables) - set(self.normalizer.variables))
            if extra:
                raise ValueError(f"variables {extra} have no normalization statistics; "
                                 "refit the adapter on data that has them")
            self.normalizer.check(ds)
        for name in self.variables:
            if self.time_dim not in ds[name].dims:
                raise ValueError(f"variable {name!r} lacks the time dim {self.time_dim!r}")
        if ds.sizes[self.time_dim] == 0:
            raise ValueError(f"the dataset has 0 steps along time_dim {self.time_dim!r}; "
                             "expected at least one frame's worth (window="
                             f"{self.window!r})")
        require_samples(ds, self.sample_dims(ds))
        frame = self.resolve_frame(ds)
        if self.frame is not None and self.frame != frame:
            raise ValueError(f"window/hop are {frame} steps on this data but were "
                             f"{self.frame} steps on the data fit saw; resample to one rate")
        if self.calendar and (self.time_dim not in ds.coords
                              or not is_time(ds[self.time_dim].values)):
            got = (f"dtype {ds[self.time_dim].dtype}" if self.time_dim in ds.coords
                   else "no such coordinate")
            raise ValueError(f"calendar=True needs a datetime coordinate time_dim="
                             f"{self.time_dim!r} (datetime64 or cftime times), got {got}")
        if self.frame_features is not None:
            extra = [d for d in self.per_dims if d not in self.channel_dims]
            if extra:
                raise ValueError(f"per_dims {extra} are not channel dims; with frame_features the "
                                 "statistics are per feature and per channel only")

    def resolve_frame(self, ds):
        """(window, hop) in steps of `ds`'s time coordinate."""
        return (whole_steps(self.window, ds, self.time_dim, "window"),
                whole_steps(self.hop, ds, self.time_dim, "hop"))

    def _steps_per_second(self, ds):
        """The time coordinate's rate (a numeric coordinate is read as seconds), or None."""
        if self.time_dim not in ds.coords or ds.sizes[self.time_dim] < 2:
            return None
        values = ds[self.time_dim].values
        if not (np.issubdtype(values.dtype, np.number) or is_time(values)):
            return None
        step = even_step(values)
        return None if step is None else 1.0 / float(as_float(step))

    def check_window(self, dim, size):
        """A window of `size` steps along the time dim must hold at least one whole frame."""
        window = self.frame[0]
        if window > size:
            raise ValueError(f"a frame is {window} steps of {dim!r} (window={self.window!r}), "
                             f"more than the {size} steps it is cut from; give a shorter window= "
                             f"or more steps (in ForecastWindows: history >= {window - 1})")

    def sample_dims(self, ds):
        """Dims of the adapter's variables other than the time and channel dims, in ds order."""
        used = {d for name in self.variables for d in ds[name].dims}
        role = {self.time_dim, *self.channel_dims}
        return tuple(d for d in ds.dims if d in used and d not in role)

    # ---- whole-dataset decode ------------------------------------------------------------------

    def token_decode(self, batch, values=None, variables=None, mask_missing=True):
        """Put a batch (its inputs, or `values` (B, N, F) predictions for `variables`) back on
        the time coordinate; a list of Datasets for a batch of several series."""
        if batch.parts:
            return [self.token_decode(part, None if values is None else values[rows, :n],
                                      variables, mask_missing)
                    for part, (rows, n) in zip(batch.split(), batch.parts)]
        put_back = self.put_back(batch.placement.template, variables, mask_missing)
        put_back.add(batch, values)
        return put_back.result()

    def put_back(self, template, variables=None, mask_missing=True):
        """A PutBack for batches of the source `template`: back on its time steps, or with
        frame features on the frames' times (see the module docstring)."""
        if self.frame_features is None:
            return PutBack(self, template, variables, mask_missing)
        return FeaturePutBack(self, template, variables, mask_missing)

    def decoded_template(self, template):
        """The Template of what decoding gives with frame features: each variable on (sample
        dims, time = frame centres, the features' dim, channel dims), as floats."""
        window, hop = self.frame
        length = template.sizes[self.time_dim]
        n = self._n_frames(length)
        fdim = self.frame_features.dim
        coords = template.coords.drop_vars([c for c, v in template.coords.coords.items()
                                            if self.time_dim in v.dims])
        if self.time_dim in template.coords.coords:
            t = template.coords[self.time_dim].values
            seconds = as_float(t)
            step = seconds[1] - seconds[0] if len(t) > 1 else 1.0
            centres = times_from_seconds(
                seconds[0] + step * (np.arange(n) * hop + (window - 1) / 2), t)
            coords = coords.assign_coords({self.time_dim: (self.time_dim, centres,
                                                           {"long_name": "frame centre"})})
        band = self.frame_features.coordinate(self.n_features, self.rate)
        if band is not None:
            coords = coords.assign_coords({fdim: (fdim, band, {"units": "Hz"})})
        var_dims = {}
        for name, dims in template.var_dims.items():
            at = dims.index(self.time_dim) + 1
            var_dims[name] = dims[:at] + (fdim,) + dims[at:]
        return Template(coords=coords, var_dims=var_dims,
                        var_attrs={v: {k: a for k, a in attrs.items() if k != "units"}
                                   for v, attrs in template.var_attrs.items()},
                        var_dtypes={v: self.dtype for v in template.var_dims},
                        dim_sizes={**template.sizes, self.time_dim: n, fdim: self.n_features})

    def denormalize(self, ds):
        return ds if self.normalizer is None else self.normalizer.invert(ds)

    # ---- the core: stacked sample arrays <-> frame tokens --------------------------------------

    def _n_frames(self, length):
        window, hop = self.frame
        return 1 + -(-max(length - window, 0) // hop)

    def _var_layout(self, name, dims, sizes):
        channels = [d for d in self.channel_dims if d in dims]
        samples = [d for d in dims if d != self.time_dim and d not in channels]
        for d in samples:
            if sizes[d] != 1:
                raise ValueError(f"variable {name!r}: sample dim {d!r} has size {sizes[d]} in a "
                                 "window; each sample takes one index of it")
        return [self.time_dim] + channels, samples, channels

    def encode_samples(self, arrays, var_dims, sizes, coords, placement):
        """Frame tokens of stacked sample windows (see GridAdapter.encode_samples)."""
        self.require_fitted("encode_samples")
        window, hop = self.frame
        length = sizes[self.time_dim]
        n = self._n_frames(length)
        padded = (n - 1) * hop + window
        pieces, has_value = [], False
        for name in self.variables:
            dims = var_dims[name]
            order, samples, _ = self._var_layout(name, dims, sizes)
            a = arrays[name]
            b = a.shape[0]
            a = a.transpose([0] + [1 + dims.index(d) for d in order + samples])
            # features are computed in float64 from the data's own values
            dtype = self.dtype if self.frame_features is None else np.float64
            a = np.asarray(a.reshape(b, length, -1), dtype=dtype)
            has_value = has_value | np.isfinite(a).any(axis=2)
            a = np.pad(a, [(0, 0), (0, padded - length), (0, 0)], constant_values=np.nan)
            # (B, T, C) -> (B, n, C, window) -> (B, n, window, C) -> (B, n, window * C)
            frames = sliding_window_view(a, window, axis=1)[:, ::hop]
            if self.frame_features is None:
                pieces.append(frames.transpose(0, 1, 3, 2).reshape(b, n, -1))
            else:
                channels = self._var_layout(name, dims, sizes)[2]
                pieces.append(self._features(name, frames, channels, sizes).reshape(b, n, -1))
        values = np.concatenate(pieces, axis=2)
        valid = np.isfinite(values)  # inf is missing, as at fit
        channels = [np.where(valid, values, 0).astype(self.dtype)]
        if self.validity_channel:
            channels += [np.isfinite(p).mean(axis=-1, keepdims=True).astype(self.dtype)
                         for p in pieces]
        starts, centres, calendar = self._frame_times(coords, n, padded)
        if self.calendar:
            channels.append(calendar_features(starts, calendar=calendar).astype(self.dtype))
        coords = {**self._token_coords(coords, centres, calendar, n, b),
                  STEPS: self._own_steps(has_value, n)}
        return Batch(tokens=np.concatenate(channels, axis=-1), key_padding_mask=~valid.any(-1),
                     valid=valid, coords=coords, placement=placement)

    def _own_steps(self, has_value, n):
        """(B, n) float64: how many of the series' steps each of its `n` frames starts, from
        the frame's first step to the next frame's (`hop`; fewer in the frame where the series
        ends, 0 past it). A series ends at its last step where any variable has a value
        (`has_value`, (B, T)): the missing steps after it are padding."""
        hop = self.frame[1]
        ends = np.where(has_value.any(axis=1),
                        has_value.shape[1] - np.argmax(has_value[:, ::-1], axis=1), 0)
        return np.clip(ends[:, None] - hop * np.arange(n), 0, hop).astype(np.float64)

    def _features(self, name, frames, channels, sizes):
        """(B, n, K, C) features of (B, n, C, window) frames, normalized by the features'
        statistics; NaN for a frame with a missing step."""
        missing = ~np.isfinite(frames).all(axis=-1)
        features = self.frame_features(np.where(missing[..., None], 0.0, frames), self.rate)
        if features.ndim != frames.ndim or features.shape[:-1] != frames.shape[:-1]:
            raise ValueError(f"frame_features returned shape {features.shape} for frames of shape "
                             f"{frames.shape}; expected (..., K) with the frames' leading dims")
        if self.n_features is None:
            self.n_features = features.shape[-1]
        elif features.shape[-1] != self.n_features:
            raise ValueError(f"frame_features returned {features.shape[-1]} features per frame, "
                             f"{self.n_features} before; a frame's features must keep their number")
        features = np.where(missing[..., None], np.nan, features).transpose(0, 1, 3, 2)
        if self.normalizer is not None and name in self.normalizer.variables:
            stats = self.normalizer.stats[name]
            stats = stats.expand_dims({d: sizes[d] for d in channels if d not in stats.dims})
            mean, std = stats.transpose("stat", self.frame_features.dim, *channels).values.reshape(
                2, self.n_features, -1)
            features = (features - mean) / std
        return features

    def _frame_times(self, coords, n, padded):
        """(first step, centre) of every frame as float64 (seconds since 1970-01-01 for
        times, counted in their calendar), and the calendar of their years (None: numbers)."""
        window, hop = self.frame
        t = coords.get(self.time_dim)
        if t is None:
            return None, None, None
        f = as_float(t)
        if padded > f.shape[1]:
            # extend the coordinate at its own step so padded frames still get times; a series
            # of one step has none, so it takes the step of the rate fit saw (or 1)
            step = (f[:, -1:] - f[:, -2:-1] if f.shape[1] > 1
                    else np.full((f.shape[0], 1), 1.0 / self.rate if self.rate else 1.0))
            f = np.concatenate([f, f[:, -1:] + step * np.arange(1, padded - f.shape[1] + 1)],
                               axis=1)
        starts = f[:, : (n - 1) * hop + 1: hop]
        centres = sliding_window_view(f, window, axis=1)[:, ::hop].mean(axis=-1)
        return starts, centres, year_calendar(t)

    def _token_coords(self, coords, centres, calendar, n, batch):
        """(B, N) float64: the frame centres along the time dim (and the part of their year
        they have passed, for cftime times of `calendar`), the sample's coordinate along sample
        dims, `position` the frame's index in the sequence."""
        out = {} if centres is None else {self.time_dim: centres}
        for d, v in coords.items():
            if d != self.time_dim and np.ndim(v) == 1:
                out[d] = np.repeat(as_float(v)[:, None], n, axis=1)
        out["position"] = np.tile(np.arange(n, dtype=np.float64), (batch, 1))
        return with_year_fraction(canonical_names(out, {self.time_dim: "time"}), centres, calendar)

    def decode_samples(self, batch, values=None, variables=None, mask_missing=True):
        """Inverse of :meth:`encode_samples`: ``{variable: (B, *window sizes of its dims)}``;
        with frame features the dims of :meth:`decoded_template`."""
        if self.frame_features is not None:
            return self._decode_features(batch, values, variables, mask_missing)
        window, hop = self.frame
        sizes = batch.placement.window_sizes()
        var_dims = batch.placement.template.var_dims
        length = sizes[self.time_dim]
        n = self._n_frames(length)
        padded = (n - 1) * hop + window
        variables = list(variables or self.variables)
        widths = {}
        for name in self.variables:
            _, _, channels = self._var_layout(name, var_dims[name], sizes)
            widths[name] = window * int(np.prod([sizes[d] for d in channels], dtype=np.int64))
        starts = {}
        offset = 0
        for name in self.variables:
            starts[name] = offset
            offset += widths[name]
        if values is None:
            values, variables, mask_missing = batch.values, self.variables, True
        else:
            values = np.asarray(values)
            want = (len(batch), n, sum(widths[v] for v in variables))
            if values.shape != want:
                raise ValueError(f"values have shape {values.shape}; expected {want} = (B, N, F) "
                                 f"for variables {variables}")
        weights = taper(window, window - hop)[None, :, None]
        out = {}
        offset = 0
        for name in variables:
            dims = var_dims[name]
            order, samples, _ = self._var_layout(name, dims, sizes)
            a = values[:, :, offset: offset + widths[name]]
            offset += widths[name]
            if mask_missing:
                source = slice(starts[name], starts[name] + widths[name])
                a = np.where(batch.valid[:, :, source], a, np.nan)
            a = np.where(batch.key_padding_mask[..., None], np.nan, a)
            b = a.shape[0]
            frames = a.reshape(b, n, window, -1)
            blender = Blender((b, padded, frames.shape[-1]))
            for f in range(n):
                blender.add((slice(None), slice(f * hop, f * hop + window)), frames[:, f], weights)
            a = blender.result()[:, :length]
            a = a.reshape(b, *[sizes[d] for d in order], *[1] * len(samples))
            layout = order + samples
            out[name] = a.transpose([0] + [1 + layout.index(d) for d in dims])
        return out

    def _decode_features(self, batch, values, variables, mask_missing):
        """{variable: (B, 1.., n, K, *channel sizes, in its decoded dims' order)}."""
        sizes = batch.placement.window_sizes()
        var_dims = batch.placement.template.var_dims
        if self.time_dim in batch.placement.dims:
            raise ValueError(f"batches cut into windows along {self.time_dim!r} cannot be put "
                             "back with frame_features (a frame's features have no time step to "
                             "go to); encode whole series")
        n, k = self._n_frames(sizes[self.time_dim]), self.n_features
        fdim = self.frame_features.dim
        layouts, starts, widths, offset = {}, {}, {}, 0
        for name in self.variables:
            _, samples, channels = self._var_layout(name, var_dims[name], sizes)
            shape = [sizes[d] for d in channels]
            layouts[name] = ([self.time_dim, fdim, *channels, *samples], shape, len(samples))
            starts[name], widths[name] = offset, k * int(np.prod(shape, dtype=np.int64))
            offset += widths[name]
        if values is None:
            values, variables, mask_missing = batch.values, self.variables, True
        else:
            values = np.asarray(values)
            variables = list(variables or self.variables)
            want = (len(batch), n, sum(widths[v] for v in variables))
            if values.shape != want:
                raise ValueError(f"values have shape {values.shape}; expected {want} = (B, N, F) "
                                 f"for variables {variables} (K = {k} features x channels each)")
        out, offset = {}, 0
        for name in variables:
            layout, shape, n_samples = layouts[name]
            a = values[:, :, offset: offset + widths[name]].astype(np.float64)
            offset += widths[name]
            if mask_missing:
                present = batch.valid[:, :, starts[name]: starts[name] + widths[name]]
                a = np.where(present, a, np.nan)
            a = np.where(batch.key_padding_mask[..., None], np.nan, a)
            a = a.reshape(len(a), n, k, *shape, *[1] * n_samples)
            dims = var_dims[name]
            at = dims.index(self.time_dim) + 1
            decoded = dims[:at] + (fdim,) + dims[at:]
            out[name] = a.transpose([0] + [1 + layout.index(d) for d in decoded])
        return out


class FeaturePutBack(PutBack):
    """PutBack of frame features: batches of whole series go on the frames' times (the
    adapter's :meth:`SignalAdapter.decoded_template` of the source), in physical units."""

    def __init__(self, adapter, template, variables=None, mask_missing=True):
        super().__init__(adapter, adapter.decoded_template(template), variables, mask_missing)
        self.template = self._stitcher.template

    def add(self, batch, values=None):
        variables = None if values is None else self.variables
        arrays = self.adapter.decode_samples(batch, values, variables, self.mask_missing)
        self._stitcher.add(arrays, dataclasses.replace(batch.placement, template=self.template))
