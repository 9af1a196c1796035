"""GridAdapter: gridded fields (weather, climate, ocean; images are a special case) as tokens.

Every dim of the adapter's variables plays one of three roles:

* **token dims** (the keys of ``patch``): cut into patches of the given sizes; each patch is one
  token. ``patch={"lat": 4, "lon": 4}`` makes 4 x 4 patches; ``patch={"level": 1, ...}`` makes each
  pressure level a separate token.
* **channel dims** (``channel_dims``): folded into each token's features (pressure levels as
  channels, a history of time steps as channels).
* **sample dims**: every other dim; each index along them is one sample (one time step).

A variable that lacks a sample dim (a land-sea mask, orography) is a static field: it is repeated
in every sample. Features of a token are ``[var0 patch cells x channels, var1 ..., validity]`` with
``variables_as="channels"``; with ``variables_as="tokens"`` each variable makes its own tokens
(then all variables need the same number of features) and ``coords["variable"]`` says which.

A grid not divisible by the patch is padded (NaN, or wrapped for ``periodic`` dims such as
longitude) and the padding is masked; ``strict=True`` refuses it instead. NaNs become masks: a
token without any valid value is padded out in ``key_padding_mask``; with ``validity_channel`` each
token also carries, per variable, the fraction of its cells that are valid.

With ``calendar=True`` each token also gets sin/cos of the hour of day and of the day of year of
its time (the sample's time when ``time_dim`` is a sample dim, the patch centre when it is a patch
dim), after the validity channels; ``time_dim`` must then have a coordinate of times: datetime64,
or cftime datetimes (noleap, 360_day, ...), whose day of year counts in their calendar's year.
"""
import math

import numpy as np
import xarray as xr

from ..data.batch import Batch
from ..data.checks import (require_dims, require_monotonic, require_positive_sizes,
                           require_samples, require_variables)
from ..data.coords import (as_float, calendar_features, canonical_names, is_time, patch_centres,
                           time_calendar, to_utc, with_year_fraction, year_calendar)
from ..data.normalize import Normalizer
from ..data.stitch import PutBack
from .windowed import IDENTITY, WindowedAdapter, _finite, removed_arguments

VARIABLES_AS = ("channels", "tokens")
N_CALENDAR = 4  # sin/cos of hour of day and of day of year


class GridAdapter(WindowedAdapter):
    """Gridded Dataset <-> (B, N, F) tokens. See the module docstring for the roles of dims.

    Parameters
    ----------
    variables : list of str
        The input variables (each has every patch dim; a variable without a sample dim is a
        static field, repeated in every sample).
    patch : dict of {str: int}
        Token dims and the patch size along each, e.g. ``{"lat": 4, "lon": 4}``.
    channel_dims : sequence of str, default ()
        Dims folded into each token's features (pressure levels, a history of steps).
    variables_as : {"channels", "tokens"}, default "channels"
        Variables side by side in a token's features, or each in its own tokens.
    per_dims : sequence of str, default ()
        Dims with a statistic per index (a mean per pressure level).
    periodic : sequence of str, default ()
        Patch dims that wrap around (longitude): padding wraps instead of masking.
    lon, lat : str, default "lon", "lat"
        The names of the longitude and latitude coordinates (they reach models as lon, lat).
    validity_channel : bool, default True
        Add per variable the fraction of a token's cells that are valid.
    strict : bool, default False
        Refuse a grid not divisible by the patch instead of padding and masking it.
    dtype : str, default "float32"
        The tokens' dtype.
    calendar : bool, default False
        Add sin/cos of the hour of day and day of year of each token's time (``time_dim``).
    time_dim : str, default "time"
        The time dim (its coordinate must be datetime64 or cftime times for ``calendar``).
    normalize : bool, default True
        Standardize each variable by the mean and std that fit computes (False: the values as
        they are, for data already on a common scale).
    **removed
        Arguments earlier releases took (``normalizer=``): refused with a TypeError that says
        what replaces them (statistics come from ``fit``).
    """

    def __init__(self, variables, patch, *, channel_dims=(), variables_as="channels",
                 per_dims=(), periodic=(), lon="lon", lat="lat", validity_channel=True,
                 strict=False, dtype="float32", calendar=False, time_dim="time", normalize=True,
                 **removed):
        removed_arguments(type(self), removed)
        if isinstance(variables, str) or not variables:
            raise TypeError("variables must be a non-empty list of variable names, "
                            f"got {variables!r}")
        if not isinstance(patch, dict):
            raise TypeError(f"patch must be a dict like {{'lat': 4, 'lon': 4}}, got {patch!r}")
        if not patch:
            raise ValueError("patch={} names no dim to cut into tokens, so every sample would be "
                             "a single token holding all its cells; name the token dims and their "
                             "patch sizes, e.g. patch={'lat': 4, 'lon': 4} (a size of 1 makes "
                             "each index its own token, e.g. patch={'station': 1})")
        require_positive_sizes(patch, "patch")
        if variables_as not in VARIABLES_AS:
            raise ValueError(f"variables_as={variables_as!r}; expected one of {VARIABLES_AS}")
        both = set(patch) & set(channel_dims)
        if both:
            raise ValueError(f"dims {sorted(both)} are both patch (token) dims and channel dims; "
                             "each dim plays one role")
        self.variables = list(variables)
        self.patch = {d: int(s) for d, s in patch.items()}
        self.channel_dims = tuple(channel_dims)
        self.variables_as = variables_as
        self.per_dims = tuple(per_dims)
        self.periodic = tuple(periodic)
        self.lon = lon
        self.lat = lat
        self.validity_channel = bool(validity_channel)
        self.strict = bool(strict)
        self.dtype = np.dtype(dtype)
        self.calendar = bool(calendar)
        self.time_dim = time_dim
        self.normalize = bool(normalize)
        self.normalizer = None
        self.value_widths = None  # value features per token of each variable, set by fit

    @property
    def token_dims(self):
        return tuple(self.patch)

    # ---- fitting and checking ------------------------------------------------------------------

    def _fit_inputs(self, ds):
        """The normalization statistics (lazily on dask data, one pass; inf counts as missing)
        and each variable's features per token."""
        ds = to_utc(ds)
        self.normalizer = None
        self.check(ds)
        self.normalizer = Normalizer.fit(_finite(ds[self.variables]), self.variables,
                                         self.per_dims) if self.normalize else IDENTITY
        cells = int(np.prod(list(self.patch.values())))
        self.value_widths = {name: cells * int(np.prod(
            [ds.sizes[d] for d in self.channel_dims if d in ds[name].dims], dtype=np.int64))
            for name in self.variables}

    def get_state(self):
        return {**super().get_state(), "value_widths": self.value_widths}

    def set_state(self, state):
        super().set_state(state)
        self.value_widths = state.get("value_widths")

    def value_width(self):
        """Value features per token: the outputs per token of a model that predicts the inputs."""
        self.require_fitted("value_width")
        widths = list(self.value_widths.values())
        return widths[0] if self.variables_as == "tokens" else sum(widths)

    def token_width(self):
        """Features per token: values, then validity and calendar channels."""
        validity = (1 if self.variables_as == "tokens" else len(self.variables)) \
            if self.validity_channel else 0
        return self.value_width() + validity + (N_CALENDAR if self.calendar else 0)

    def check(self, ds):
        """Raise a clear error if `ds` cannot be encoded by this adapter."""
        if not isinstance(ds, xr.Dataset):
            raise TypeError(f"expected an xarray.Dataset, got {type(ds).__name__}")
        ds = to_utc(ds)
        require_variables(ds, self.variables)
        require_dims(ds, self.token_dims, "patch")
        require_dims(ds, self.channel_dims, "channel")
        for d in self.token_dims:
            if ds.sizes[d] == 0:
                raise ValueError(f"patch dim {d!r} has 0 cells in the dataset; expected at least "
                                 f"patch[{d!r}] = {self.patch[d]}")
        if self.normalizer is not None and self.normalize:
            extra = sorted(set(self.variables) - set(self.normalizer.variables))
            if extra:
                raise ValueError(f"variables {extra} have no normalization statistics; "
                                 "refit the adapter on data that has them")
            self.normalizer.check(ds)
        for name in self.variables:
            lacking = [d for d in self.token_dims if d not in ds[name].dims]
            if lacking:
                raise ValueError(f"variable {name!r} lacks patch dim(s) {lacking}; make them "
                                 "channel dims or select variables that have them")
        require_samples(ds, self.sample_dims(ds))
        for d in self.token_dims:
            require_monotonic(ds, d)
            self.check_window(d, ds.sizes[d])
        if self.calendar:
            self._check_calendar(ds)

    def _check_calendar(self, ds):
        time = self.time_dim
        if time not in ds.coords or not is_time(ds[time].values):
            got = f"dtype {ds[time].dtype}" if time in ds.coords else "no such coordinate"
            raise ValueError(f"calendar=True needs a datetime coordinate time_dim={time!r} "
                             f"(datetime64 or cftime times), got {got}; pass time_dim='...' "
                             "naming the time coordinate")
        if time in self.channel_dims:
            raise ValueError(f"calendar=True: time_dim {time!r} is a channel dim, so a token "
                             "holds several times; make it a sample or patch dim")

    def check_window(self, dim, size):
        """A window of `size` cells along patch dim `dim` must hold at least one patch."""
        p = self.patch[dim]
        if p > size:
            raise ValueError(f"patch[{dim!r}] = {p} is larger than the grid/window along {dim!r} "
                             f"({size} cells); use a smaller patch")
        if self.strict and size % p:
            raise ValueError(f"{dim!r} has {size} cells, not divisible by patch[{dim!r}] = {p} "
                             "(strict=True); crop the grid or pass strict=False to pad and mask")

    def sample_dims(self, ds):
        """Dims of the adapter's variables that are neither patch nor channel dims, in ds order."""
        used = {d for name in self.variables for d in ds[name].dims}
        role = set(self.token_dims) | set(self.channel_dims)
        return tuple(d for d in ds.dims if d in used and d not in role)

    # ---- whole-dataset decode ------------------------------------------------------------------

    def token_decode(self, batch, values=None, variables=None, mask_missing=True):
        """A batch's inputs (`values` None: the exact inverse of encoding, up to the token dtype
        and the normalization round trip) or `values` (B, N, F) in the token layout of
        `variables` (default all the adapter's) on the source's coordinates; `mask_missing`
        makes them NaN where the input was missing. Cells no sample covered are NaN;
        overlapping windows are blended."""
        put_back = PutBack(self, batch.placement.template, variables, mask_missing)
        put_back.add(batch, values)
        return put_back.result()

    def denormalize(self, ds):
        return ds if self.normalizer is None else self.normalizer.invert(ds)

    # ---- the core: stacked sample arrays <-> tokens --------------------------------------------

    def _var_layout(self, name, dims, sizes):
        """Axes order and sizes of variable `name` (dims `dims`) in token layout."""
        channels = [d for d in self.channel_dims if d in dims]
        samples = [d for d in dims if d not in self.patch and d not in channels]
        order = list(self.token_dims) + channels
        for d in samples:
            if sizes[d] != 1:
                raise ValueError(f"variable {name!r}: sample dim {d!r} has size {sizes[d]} in a "
                                 "window; each sample takes one index of it")
        return order, samples, channels

    def _grid_shape(self, sizes):
        """Tokens along each patch dim, and the padded size."""
        n = [math.ceil(sizes[d] / self.patch[d]) for d in self.token_dims]
        return n, [k * self.patch[d] for k, d in zip(n, self.token_dims)]

    def encode_samples(self, arrays, var_dims, sizes, coords, placement):
        """Tokens of stacked sample windows.

        ``arrays[v]`` is ``(B, *window sizes of v's dims, in v's order)``; `sizes` are the window
        sizes per dim; ``coords[d]`` ``(B, sizes[d])`` the coordinate values of each sample along
        window dim d (patch dims) or ``(B,)`` for sample dims.
        """
        for d in self.token_dims:
            self.check_window(d, sizes[d])
        n, padded = self._grid_shape(sizes)
        k = len(self.token_dims)
        ntok = int(np.prod(n))
        patches = []  # per variable: (B, n0, n1, .., p0, p1, .., C) views of the data
        for name in self.variables:
            dims = var_dims[name]
            order, samples, channels = self._var_layout(name, dims, sizes)
            a = arrays[name]
            batch = a.shape[0]
            # (B, *dims) -> (B, *token dims, *channel dims); size-1 sample axes go to the end.
            perm = [0] + [1 + dims.index(d) for d in order + samples]
            a = self._pad(a.transpose(perm).reshape(batch, *[sizes[d] for d in order]), padded)
            c = int(np.prod([sizes[d] for d in channels], dtype=np.int64))
            # (B, n0*p0, n1*p1, .., C) -> (B, n0, p0, n1, p1, .., C) -> (B, n0, n1, .., p0, p1, .., C)
            split = [x for nd, d in zip(n, self.token_dims) for x in (nd, self.patch[d])]
            perm = [0] + [1 + 2 * i for i in range(k)] + [2 + 2 * i for i in range(k)] + [1 + 2 * k]
            patches.append(a.reshape(batch, *split, c).transpose(perm))
        widths = [int(np.prod(p.shape[1 + k:])) for p in patches]
        by_tokens = self.variables_as == "tokens"
        if by_tokens and len(set(widths)) > 1:
            raise ValueError(f"variables_as='tokens' needs the same number of features per "
                             f"variable, got {dict(zip(self.variables, widths))}; use "
                             "variables_as='channels'")
        nvar = len(self.variables)
        n_values = widths[0] if by_tokens else sum(widths)
        n_total = ntok * nvar if by_tokens else ntok
        n_validity = (1 if by_tokens else nvar) if self.validity_channel else 0
        n_calendar = N_CALENDAR if self.calendar else 0
        tokens = np.empty((batch, n_total, n_values + n_validity + n_calendar), dtype=self.dtype)
        # Copy each variable's patches straight into its place in `tokens`: one pass per variable.
        for j, (p, w) in enumerate(zip(patches, widths)):
            rows, cols = ((slice(j * ntok, (j + 1) * ntok), slice(0, w)) if by_tokens else
                          (slice(None), slice(sum(widths[:j]), sum(widths[:j]) + w)))
            place = tokens[:, rows, cols].reshape(batch, *n, *p.shape[1 + k:], copy=False)
            np.copyto(place, p, casting="unsafe")
        values = tokens[..., :n_values]
        missing = ~np.isfinite(values)  # inf is missing, as at fit: it never spreads to a sample
        any_missing = missing.any()
        if any_missing:
            np.copyto(values, 0, where=missing)
        valid = ~missing
        if self.validity_channel:
            for j, w in enumerate(widths):
                rows, cols = ((slice(j * ntok, (j + 1) * ntok), slice(0, w)) if by_tokens else
                              (slice(None), slice(sum(widths[:j]), sum(widths[:j]) + w)))
                column = n_values if by_tokens else n_values + j
                tokens[:, rows, column] = valid[:, rows, cols].mean(axis=-1) if any_missing else 1
        token_coords = self._token_coords(coords, sizes, n, padded, batch, placement.template)
        if self.calendar:
            # a token of padding only has no time (NaN): it is masked, its calendar is 0
            features = calendar_features(token_coords[self.time_dim],
                                         calendar=time_calendar(coords.get(self.time_dim)))
            tokens[..., n_values + n_validity:] = np.nan_to_num(features, nan=0.0)
        return Batch(tokens=tokens, key_padding_mask=~valid.any(axis=-1), valid=valid,
                     coords=token_coords, placement=placement)

    def _pad(self, a, padded):
        widths = [(0, 0)] + [(0, p - s) for p, s in zip(padded, a.shape[1:])]
        widths += [(0, 0)] * (a.ndim - len(widths))
        if not any(w for _, w in widths):
            return a
        for i, d in enumerate(self.token_dims):
            if widths[1 + i][1] and d in self.periodic:
                one = [(0, 0)] * a.ndim
                one[1 + i] = widths[1 + i]
                a = np.pad(a, one, mode="wrap")
                widths[1 + i] = (0, 0)
        return np.pad(a, widths, constant_values=np.nan)

    def _token_coords(self, coords, sizes, n, padded, batch, template):
        """(B, N) float64 coordinates per token: patch centres along patch dims (of the dim's
        coordinate and of the numbers on it: a station's lat, lon), the sample's coordinates
        along sample dims; `variable` index when variables are separate tokens; `position` the
        token's index in the sequence."""
        out = {}
        k = len(self.token_dims)
        for name, values in coords.items():
            d = name if name in self.patch else _dim_of(template, name)
            if d not in self.patch:
                continue
            i = self.token_dims.index(d)
            c = as_float(values)
            extra = padded[i] - sizes[d]
            if extra:
                fill = c[:, :extra] if d in self.periodic else np.full((c.shape[0], extra), np.nan)
                c = np.concatenate([c, fill], axis=1)
            centre = patch_centres(c, self.patch[d], circular=(name == self.lon))
            shape = [1] * k
            shape[i] = n[i]
            out[name] = centre.reshape(c.shape[0], *shape)
        grid = (batch, *n)
        out = {d: np.broadcast_to(v, grid).reshape(batch, -1) for d, v in out.items()}
        for d, v in coords.items():
            if d not in out and np.ndim(v) == 1:
                out[d] = np.repeat(as_float(v)[:, None], int(np.prod(n)), axis=1)
        if self.variables_as == "tokens":
            out = {d: np.tile(v, (1, len(self.variables))) for d, v in out.items()}
            out["variable"] = np.repeat(np.arange(len(self.variables), dtype=np.float64),
                                        int(np.prod(n)))[None].repeat(batch, axis=0)
        n_tokens = int(np.prod(n)) * (len(self.variables) if self.variables_as == "tokens" else 1)
        out["position"] = np.tile(np.arange(n_tokens, dtype=np.float64), (batch, 1))
        out = canonical_names(out, {self.time_dim: "time", self.lat: "lat", self.lon: "lon"})
        return with_year_fraction(out, out.get(self.time_dim),
                                  year_calendar(coords.get(self.time_dim)))

    def decode_samples(self, batch, values=None, variables=None, mask_missing=True):
        """Inverse of :meth:`encode_samples`: ``{variable: (B, *window sizes of its dims)}``.

        `values` default to the batch's own value features (missing ones NaN again)."""
        placement = batch.placement
        sizes = placement.window_sizes()
        var_dims = placement.template.var_dims
        variables = list(variables or self.variables)
        unknown = [v for v in variables if v not in self.variables]
        if unknown:
            raise ValueError(f"variables {unknown} are not among the adapter's {self.variables}")
        n, padded = self._grid_shape(sizes)
        k = len(self.token_dims)
        ntok = int(np.prod(n))
        patch_cells = int(np.prod([self.patch[d] for d in self.token_dims]))
        widths = {name: patch_cells * int(np.prod(
            [sizes[d] for d in self._var_layout(name, var_dims[name], sizes)[2]], dtype=np.int64))
            for name in self.variables}
        if values is None:
            values, variables, mask_missing = batch.values, self.variables, True
        else:
            values = self._check_values(values, batch, variables, widths, ntok)
        out = {}
        for name in variables:
            dims = var_dims[name]
            order, samples, _ = self._var_layout(name, dims, sizes)
            a = values[self._features_of(name, variables, widths, ntok)]
            at_source = self._features_of(name, self.variables, widths, ntok)
            if mask_missing:
                a = np.where(batch.valid[at_source], a, np.nan)
            padded_out = batch.key_padding_mask[at_source[:2]]
            a = np.where(padded_out[..., None], np.nan, a)
            b = a.shape[0]
            # (B, N, P*C) -> (B, n0, n1, .., p0, p1, .., C) -> (B, n0, p0, n1, p1, .., C)
            a = a.reshape(b, *n, *[self.patch[d] for d in self.token_dims], -1)
            perm = [0] + [x for i in range(k) for x in (1 + i, 1 + k + i)] + [1 + 2 * k]
            a = a.transpose(perm).reshape(b, *padded, -1)
            a = a[(slice(None),) + tuple(slice(0, sizes[d]) for d in self.token_dims)]
            a = a.reshape(b, *[sizes[d] for d in order], *[1] * len(samples))
            layout = order + samples
            out[name] = a.transpose([0] + [1 + layout.index(d) for d in dims])
        return out

    def _features_of(self, name, names, widths, ntok):
        """Index of variable `name`'s tokens/features in a layout holding variables `names`."""
        i = names.index(name)
        if self.variables_as == "channels":
            start = sum(widths[v] for v in names[:i])
            return slice(None), slice(None), slice(start, start + widths[name])
        return slice(None), slice(i * ntok, (i + 1) * ntok), slice(None)

    def _check_values(self, values, batch, variables, widths, ntok):
        values = np.asarray(values)
        b = len(batch)
        if self.variables_as == "channels":
            want = (b, ntok, sum(widths[v] for v in variables))
        else:
            want = (b, ntok * len(variables), widths[variables[0]])
        if values.shape != want:
            raise ValueError(f"values have shape {values.shape}; expected {want} = (B, N, F) for "
                             f"variables {variables} with {[widths[v] for v in variables]} "
                             "features each (pass variables=[...] to decode a subset)")
        return values


def _dim_of(template, name):
    """The dim of coordinate `name` in the source, None when it has none there."""
    coords = template.coords.coords
    return coords[name].dims[0] if name in coords and coords[name].ndim == 1 else None
