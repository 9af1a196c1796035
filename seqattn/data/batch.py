"""The batch container that adapters produce and models consume.

A :class:`Batch` is what crosses the boundary between xarray and the models: plain NumPy arrays
in the shape legend of docs/DESIGN.md, plus a :class:`Placement` that says where every sample came
from, so that the adapter can put values (the inputs themselves, or a model's predictions) back
on the source's coordinates.

Shapes (B samples, N tokens, F features per token):

* ``tokens`` (B, N, F) float: values after normalization; a missing element (NaN in the data, or
  padding past the edge of the grid) is 0 here and False in ``valid``. When the adapter adds
  validity or calendar channels they come after the value features, so
  ``tokens[..., :valid.shape[-1]]`` are always the values.
* ``key_padding_mask`` (B, N) bool, True = padded token to ignore (the convention of
  ``seqattn.attention``): the token holds no valid value at all.
* ``valid`` (B, N, Fv) bool: which value features were present in the data.
* ``coords``: name -> (B, N) float64 per-token coordinates; models' positional encodings read
  them by these names:

  - ``"position"``: the token's index in its sequence, 0 .. N-1 (NaN for ragged padding);
  - ``"time"`` (or the adapter's time dim's name): seconds since 1970-01-01 UTC on a datetime
    axis (tz-aware times are converted to UTC), the coordinate's own units on a numeric one; a
    frame's or patch's centre, or the sample's time (for forecasts: the initial time);
  - ``"year_fraction"`` (a time coordinate of datetime64 or cftime times): the part of its
    year the token's ``time`` has passed, in [0, 1), counted in the calendar's own years (360
    days in 360_day, each year's length where there are leap years); models read their
    day-of-year position from it;
  - ``"lead"`` (forecasts): the lead time in seconds (the time coordinate's units when numeric);
  - ``"lat"`` / ``"lon"``: the patch centre in degrees (``lon`` by the mean angle, in [0, 360));
  - ``"level"`` and any other dim with a numeric coordinate: the patch centre or sample's value;
  - ``"variable"`` (``variables_as="tokens"``): the index of the token's variable;
  - ``"steps"`` (SignalAdapter): how many of the series' own steps the token's frame starts
    (hop; fewer in the frame where the series ends, at its last step with a value; 0 past it);
    WarpingNeighbour's steps view and the model's warping path read it;
  - a dim labelled by strings (``station``, ``variable`` ids) gets the label's index along it.

  A coordinate is present only when the dataset has it (a dim without a coordinate has none).
  A dim named otherwise (``valid_time``, ``latitude``) is there under its own name and under
  the name above that the adapter gives it (``time_dim``, ``lat``, ``lon`` options).

Forecasting batches (:class:`ForecastWindows`) also carry what the model is asked to predict;
a :class:`BatchIterator` with ``targets=`` carries one target per sample, ``targets`` (B, ...),
and the molecule and graph adapters their per-structure (B, ...) or per-token (B, N, ...)
targets; other batches leave these None:

* ``targets`` (B, N, Ft): target values at the valid time, in the same tokens (patches, frames)
  as the inputs and normalized like them; with ``increments=True`` the change from the same cells
  ``lead`` earlier, ``(y - x) / std``. A missing target is 0 here and False in
  ``target_valid``: weight a loss by ``target_valid`` so that missing targets count for nothing.
* ``target_valid`` (B, N, Ft) bool: which targets were present in the data.
* ``target_base`` (B, N, Ft) (forecasts with ``increments=True``): the source values in physical
  units that the increments are changes from, NaN where missing; decoding adds predictions to them.
* ``lead`` (B,): each sample's lead time in the time coordinate's units (timedelta64 for datetime
  coordinates; a number, e.g. hours, for numeric ones).

Adapters whose tokens have pairwise structure (atoms, graph nodes) also fill ``structure``, a
:class:`seqattn.nn.Structure` of host arrays (positions, types, cell, pair codes) that the models'
structured attention biases read; ``fit`` and ``predict`` pass it on as ``structure=``.

The ``placement`` of a forecasting batch places its targets (at their valid times), since those
are what predictions stand for.

A batch of series of different lengths (:meth:`Batch.concat`) pads every part to the longest N;
its ``placement`` is then a tuple with one Placement per part and ``parts`` says which rows and
how many tokens belong to each, so that decoding gives one Dataset per part.
"""
from dataclasses import dataclass

import numpy as np
import xarray as xr


@dataclass(frozen=True)
class Template:
    """The parts of a Dataset that decoding needs to rebuild it: coordinates, attrs, and each
    variable's dims, attrs and dtype. It holds no data values, so it is cheap to keep.

    Built with ``Template.of(ds)`` from a Dataset rather than field by field.

    Parameters
    ----------
    coords : xarray.Dataset
        The source Dataset with its data variables dropped: coordinates and attrs only.
    var_dims : dict
        Variable name -> tuple of its dim names.
    var_attrs : dict
        Variable name -> dict of its attrs.
    var_dtypes : dict
        Variable name -> its NumPy dtype.
    dim_sizes : dict
        Dim name -> its length in the source.
    """

    coords: xr.Dataset
    var_dims: dict
    var_attrs: dict
    var_dtypes: dict
    dim_sizes: dict

    @classmethod
    def of(cls, ds):
        names = list(ds.data_vars)
        return cls(
            coords=ds.drop_vars(names),
            var_dims={v: tuple(ds[v].dims) for v in names},
            var_attrs={v: dict(ds[v].attrs) for v in names},
            var_dtypes={v: ds[v].dtype for v in names},
            dim_sizes=dict(ds.sizes),
        )

    @property
    def sizes(self):
        return dict(self.dim_sizes)


@dataclass(frozen=True)
class Placement:
    """Where each sample of a batch sits in its source.

    ``dims`` are the windowed dims; sample b covers ``starts[b, i] : starts[b, i] + sizes[i]``
    along ``dims[i]`` and the whole extent of every other dim. ``overlap`` (per windowed dim) says
    how far neighbouring windows overlap, which decides how values are blended when they are put
    back.

    Parameters
    ----------
    template : Template
        The source Dataset's coordinates and variable layout.
    dims : tuple of str
        The windowed dims, in the order of the columns of ``starts``.
    sizes : tuple of int
        The window's length along each of ``dims``.
    overlap : tuple of int
        How many positions neighbouring windows share along each of ``dims``.
    starts : numpy.ndarray
        (B, len(dims)) int64: each sample's first index along each windowed dim.
    """

    template: Template
    dims: tuple
    sizes: tuple
    overlap: tuple
    starts: np.ndarray  # (B, len(dims)) int64

    def window_sizes(self):
        """Size of one sample window along every dim of the source."""
        sizes = self.template.sizes
        sizes.update(zip(self.dims, self.sizes))
        return sizes


@dataclass(frozen=True)
class Batch:
    """Encoded samples: see the module docstring for the meaning and shape of every field.

    Parameters
    ----------
    tokens : numpy.ndarray
        (B, N, F) float: normalized values (0 where missing), then any validity or calendar
        channels.
    key_padding_mask : numpy.ndarray
        (B, N) bool, True for a padded token that attention ignores.
    valid : numpy.ndarray
        (B, N, Fv) bool: which value features were present in the data.
    coords : dict
        Coordinate name -> (B, N) float64 per-token coordinate (``"position"``, ``"time"``,
        ``"lat"``, ...).
    placement : Placement or tuple of Placement
        Where each sample came from; a tuple with one Placement per part after
        ``Batch.concat``.
    targets : numpy.ndarray, optional
        (B, N, Ft) normalized targets (forecasts), or (B, ...) / (B, N, ...) per-sample or
        per-token targets; default None (no targets).
    target_valid : numpy.ndarray, optional
        Bool, the shape of ``targets``: which targets were present; default None.
    target_base : numpy.ndarray, optional
        (B, N, Ft): the source values, in physical units, that increments are changes from
        (forecasts with ``increments=True``); default None.
    lead : numpy.ndarray, optional
        (B,): each sample's lead time (forecasts); default None.
    structure : seqattn.nn.Structure, optional
        Pairwise structure of the tokens (positions, types, cell, pair codes) for structured
        attention biases; default None.
    parts : tuple, default ()
        ``((rows, n_tokens), ...)``, one entry per part of a ``Batch.concat``: the slice
        of rows and the number of tokens of each; empty for a batch of one source.
    """

    tokens: np.ndarray
    key_padding_mask: np.ndarray
    valid: np.ndarray
    coords: dict
    placement: Placement
    targets: np.ndarray = None
    target_valid: np.ndarray = None
    target_base: np.ndarray = None
    lead: np.ndarray = None
    structure: object = None
    parts: tuple = ()  # ((rows slice, n_tokens), ...) for a concatenation of ragged batches

    def __len__(self):
        return self.tokens.shape[0]

    @property
    def values(self):
        """The value features of ``tokens`` (without validity or calendar channels)."""
        return self.tokens[..., : self.valid.shape[-1]]

    @classmethod
    def concat(cls, batches):
        """Stack batches whose samples have different numbers of tokens: tokens are padded to the
        longest (0, masked out in key_padding_mask), coordinates with NaN."""
        if any(b.parts for b in batches):
            raise ValueError("Batch.concat takes batches of one source each, not concatenations")
        if any(b.targets is not None for b in batches):
            # forecast batches of one grid share N, so they never need this padding
            raise ValueError("Batch.concat is for ragged batches without targets; forecast "
                             "batches of one grid already share N: iterate with a larger "
                             "batch_size instead")
        n = max(b.tokens.shape[1] for b in batches)

        def pad(a, fill):
            extra = np.full((a.shape[0], n - a.shape[1], *a.shape[2:]), fill, dtype=a.dtype)
            return np.concatenate([a, extra], axis=1)

        shared = set.intersection(*(set(b.coords) for b in batches))
        rows, parts = 0, []
        for b in batches:
            parts.append((slice(rows, rows + len(b)), b.tokens.shape[1]))
            rows += len(b)
        return cls(tokens=np.concatenate([pad(b.tokens, 0) for b in batches]),
                   key_padding_mask=np.concatenate([pad(b.key_padding_mask, True) for b in batches]),
                   valid=np.concatenate([pad(b.valid, False) for b in batches]),
                   coords={k: np.concatenate([pad(b.coords[k], np.nan) for b in batches])
                           for k in sorted(shared)},
                   placement=tuple(b.placement for b in batches), parts=tuple(parts))

    def split(self):
        """The batches :meth:`concat` was given (padding removed)."""
        return [Batch(tokens=self.tokens[rows, :n], key_padding_mask=self.key_padding_mask[rows, :n],
                      valid=self.valid[rows, :n],
                      coords={k: v[rows, :n] for k, v in self.coords.items()}, placement=p)
                for p, (rows, n) in zip(self.placement, self.parts)]
