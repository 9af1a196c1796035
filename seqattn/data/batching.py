"""BatchIterator: lazy batches of encoded samples over a Dataset, and the way back.

It covers what xbatcher's BatchGenerator does and adds what its users ask for:

* ``input_dims``: window size per dim (a sample's extent), ``input_overlap``: how much
  neighbouring windows share. Windows cover the whole dim: when the stride does not land on the
  end, one last window is aligned to the end (xbatcher leaves the remainder out).
* ``batch_dims``: dims whose every index is a separate sample (one time step); the number given
  is how many consecutive indices are read together (the read block). Sample dims of the adapter
  that are not named get blocks of the dask chunk size along them, or of 16 batches' samples on
  in-memory data.
* ``shuffle`` with a ``seed``: a new order every epoch that depends only on (seed, epoch), so
  ``epoch(e)`` gives the batches of epoch e again (exact resume); ``drop_last``.
* Outputs go back on the original coordinates: :meth:`BatchIterator.put_back`.
* ``targets``: variables of the Dataset with one value per sample (N -> 1: a speaker's label, a
  recording's word) that the adapter's ``fit`` saw become every batch's ``targets`` as
  :mod:`seqattn.data.sample_targets` lays them out (values normalized, classes as indices), so
  ``fit`` takes the iterator itself; a DataArray (or a variable fit did not see) is passed as it
  is, ``(B, *its other dims)``.

Memory stays bounded by the read block, not the dataset: samples are grouped in blocks (the read
block along batch dims, the dask chunk along input dims, else the whole dim) and only the region
covering the samples of one block is read at a time. Shuffling permutes the blocks and the
samples inside each block, which keeps that bound; larger blocks mix more. Data already in
memory (not dask) is the exception that makes epochs cheaper: each region an iterator reads is
normalized once and kept for its later epochs, up to :data:`REGION_CACHE_BYTES` in all (a small
training or validation set is then normalized once per fit, not once per epoch; larger data is
read as above).
"""
import dataclasses

import numpy as np
import xarray as xr
from numpy.lib.stride_tricks import sliding_window_view

from .batch import Placement, Template
from .checks import require_dims, require_positive_sizes
from .coords import to_utc, token_coordinates
from .epochs import check_epoch  # noqa: F401  (where callers have imported it from)
from .protocol import Batches
from .sample_targets import check_sample_specs, per_sample_values
from .stitch import PutBack


BLOCK_BATCHES = 16  # in-memory data is read (and shuffled) this many batches' samples at a time
# in-memory data: normalized regions up to this many bytes in all are kept for later epochs
REGION_CACHE_BYTES = 64 * 2 ** 20


def window_starts(size, window, overlap, dim):
    """Starts of windows of `window` cells overlapping by `overlap` along a dim of `size` cells,
    the last one aligned to the end so every cell is covered."""
    if window > size:
        raise ValueError(f"input_dims[{dim!r}] = {window} is larger than the dataset along {dim!r} "
                         f"({size}); use a smaller window")
    if not 0 <= overlap < window:
        raise ValueError(f"input_overlap[{dim!r}] = {overlap}; expected 0 <= overlap < "
                         f"input_dims[{dim!r}] = {window}")
    starts = np.arange(0, size - window + 1, window - overlap)
    if starts[-1] + window < size:
        starts = np.append(starts, size - window)
    return starts


def chunk_size(ds, dim):
    """The largest dask chunk of `ds` along `dim`, or None when it is not dask-backed there."""
    chunks = ds.chunksizes.get(dim)
    return max(chunks) if chunks else None


class BatchIterator(Batches):
    """Iterate over `ds` in batches of `batch_size` samples encoded by `adapter`.

    What an adapter's ``batches(...)`` returns (a :class:`~seqattn.data.protocol.Batches`).
    `batch_size=None` puts all samples in one batch. Iterating reads the data lazily.
    ``epoch(e)`` yields the batches of epoch e (0, 1, ...): with ``shuffle=True`` in an order
    drawn from (`seed`, e) only, so a resumed training run can replay any epoch exactly
    (``seed=None`` draws fresh randomness instead, not reproducible). Iterating the object itself
    runs epoch 0, then 1, ... on each new ``for`` loop.
    Tz-aware time coordinates are encoded in UTC; putting back keeps `ds`'s own coordinates.

    Parameters
    ----------
    ds : xarray.Dataset
        The data; only the adapter's ``variables`` are read, lazily.
    adapter : object
        A fitted adapter (grid, signal, ...) that encodes sample windows into a
        :class:`seqattn.data.Batch`.
    input_dims : dict, optional
        Dim name -> window length: each sample's extent along that dim; default None (every
        dim that is not a sample dim whole).
    input_overlap : dict, optional
        Dim name (one of `input_dims`) -> how many positions neighbouring windows share, from
        0 to the window length - 1; default None (no overlap).
    batch_dims : dict, optional
        Sample dim name -> read block: how many consecutive indices (one sample each) are read
        together; default None (the dask chunk, or 16 batches' samples in memory).
    batch_size : int or None, default 32
        Samples per batch; None puts all samples in one batch.
    shuffle : bool, default False
        Whether each epoch draws a new order of blocks and of the samples in each block.
    seed : int, optional
        Seed of the shuffled order, which depends only on (seed, epoch); default None (fresh
        randomness, not reproducible).
    drop_last : bool, default False
        Whether to leave out the last batch when it has fewer than `batch_size` samples.
    targets : str, list of str or xarray.DataArray, optional
        One value per sample: names of variables the adapter's ``fit`` saw (normalized, classes
        as indices), or a DataArray along the sample dims passed as it is, ``(B, *its other
        dims)``; default None (batches without targets).
    """

    def __init__(self, ds, adapter, input_dims=None, input_overlap=None, batch_dims=None,
                 batch_size=32, shuffle=False, seed=None, drop_last=False, targets=None):
        super().__init__(batch_size, shuffle, seed, drop_last)
        batch_size = self.batch_size
        require_fitted = getattr(adapter, "require_fitted", None)
        if require_fitted is not None:
            require_fitted("batches")
        source = ds
        ds = to_utc(ds)
        adapter.check(ds)
        input_dims = dict(input_dims or {})
        input_overlap = dict(input_overlap or {})
        batch_dims = dict(batch_dims or {})
        require_dims(ds, input_dims, "input_dims")
        require_dims(ds, batch_dims, "batch_dims")
        require_positive_sizes(input_dims, "input_dims")
        require_positive_sizes(batch_dims, "batch_dims")
        for d in input_overlap:
            if d not in input_dims:
                raise ValueError(f"input_overlap names {d!r}, which is not in input_dims "
                                 f"{sorted(input_dims)}")
        sample_dims = adapter.sample_dims(ds)
        for d in batch_dims:
            if d in input_dims or d not in sample_dims:
                raise ValueError(f"batch_dims[{d!r}]: {d!r} is not a sample dim of the adapter "
                                 f"(sample dims: {sample_dims}); give windows over patch or "
                                 "channel dims in input_dims")
        for d in input_dims:
            if d in sample_dims and input_dims[d] != 1:
                raise ValueError(f"input_dims[{d!r}] = {input_dims[d]}, but {d!r} is a sample dim "
                                 "of the adapter (each index is one sample); put it in batch_dims "
                                 "or make it a channel dim of the adapter")
        for d in sample_dims:
            if d not in batch_dims and d not in input_dims:
                batch_dims[d] = chunk_size(ds, d) or min(
                    ds.sizes[d], BLOCK_BATCHES * (batch_size or ds.sizes[d]))

        self.ds = ds[adapter.variables]
        self.adapter = adapter
        self.template = Template.of(source[adapter.variables])

        self.dims = tuple(input_dims) + tuple(batch_dims)
        self.sizes = tuple(input_dims.values()) + (1,) * len(batch_dims)
        self.overlap = tuple(input_overlap.get(d, 0) for d in input_dims) + (0,) * len(batch_dims)
        per_dim = [window_starts(ds.sizes[d], w, o, d)
                   for d, w, o in zip(self.dims, self.sizes, self.overlap)]
        grid = np.meshgrid(*per_dim, indexing="ij") if per_dim else []
        self.starts = (np.stack([g.ravel() for g in grid], axis=1) if per_dim
                       else np.zeros((1, 0), dtype=np.int64)).astype(np.int64)
        extent = [batch_dims[d] if d in batch_dims
                  else max(chunk_size(ds, d) or ds.sizes[d], w)
                  for d, w in zip(self.dims, self.sizes)]
        blocks = self.starts // np.asarray(extent, dtype=np.int64)
        # One integer per block, so samples can be grouped (and sorted) by block.
        self.block = (np.ravel_multi_index(blocks.T, blocks.max(axis=0) + 1)
                      if per_dim else np.zeros(1, dtype=np.int64))
        self._coords = token_coordinates(ds)
        self._targets = None if targets is None else self._per_sample(ds, targets, sample_dims)
        # normalized regions of in-memory data, by their (first, end) indices along self.dims
        self._regions = {} if all(v.chunks is None for v in self.ds.data_vars.values()) else None
        self._region_bytes = 0

    def _per_sample(self, ds, targets, sample_dims):
        """(columns of `starts` that index the targets, their values with those dims first,
        their validity or None)."""
        specs = {s.name: s for s in getattr(self.adapter, "target_specs", ())}
        names = [targets] if isinstance(targets, str) else targets
        if isinstance(names, list) and names and \
                names == getattr(self.adapter, "token_targets", None):
            return "tokens", names, None
        if isinstance(names, (list, tuple)) and all(isinstance(n, str) for n in names):
            for name in names:
                if name not in ds.data_vars:
                    raise ValueError(f"targets={name!r} is not a variable of the dataset (it has "
                                     f"{sorted(map(str, ds.data_vars))})")
            unfitted = [n for n in names if n not in specs]
            if not unfitted:
                dims, values, valid = per_sample_values(
                    ds, check_sample_specs([specs[n] for n in names]), self.adapter.normalizer,
                    sample_dims)
                return [self.dims.index(d) for d in dims], values, valid
            if len(names) != 1:
                raise ValueError(f"targets {unfitted} were not given to fit, which learns what "
                                 "they are (values or classes); fit(ds, targets=...) first")
            targets = ds[names[0]]
        elif not isinstance(targets, xr.DataArray):
            raise TypeError(f"targets must be a variable name or a DataArray with one value per "
                            f"sample, got {type(targets).__name__}")
        da = targets
        spanned = [d for d in da.dims if d not in sample_dims and (
            d in self.dims or any(d in self.ds[v].dims for v in self.adapter.variables))]
        if spanned:
            raise ValueError(f"targets vary along {spanned}, which a sample spans (its tokens, "
                             f"channels or windows); targets here are per sample, along the sample "
                             f"dims {sample_dims} (for a value per token use ForecastWindows or "
                             "predict per token)")
        per = [d for d in da.dims if d in sample_dims]
        for d in per:
            if da.sizes[d] != ds.sizes[d]:
                raise ValueError(f"targets have {da.sizes[d]} values along {d!r}, the dataset "
                                 f"{ds.sizes[d]}; give one per sample")
        values = np.asarray(da.transpose(*per, ...).values)
        return [self.dims.index(d) for d in per], values, None

    @property
    def n_samples(self):
        return len(self.starts)

    @property
    def blocks(self):
        return self.block

    def _batches(self, order):
        size = self.batch_size or self.n_samples
        pending = []  # (arrays, coords, starts) of samples read but not yet emitted
        count = 0
        for run in np.split(order, np.flatnonzero(np.diff(self.block[order])) + 1):
            pending.append(self._read(run))
            count += len(run)
            while count >= size:
                batch, pending = _take(pending, size)
                count -= size
                yield self._encode(*batch)
        if count and not self.drop_last:
            batch, _ = _take(pending, count)
            yield self._encode(*batch)

    def _read(self, samples):
        """Load the region covering `samples` (one block) and cut out their windows."""
        starts = self.starts[samples]
        lo = starts.min(axis=0)
        hi = (starts + np.asarray(self.sizes)).max(axis=0)
        region = self._region(lo, hi)
        rel = starts - lo
        arrays = {name: self._windows(region[name], rel) for name in self.adapter.variables}
        coords = {}
        for name, (d, values) in self._coords.items():
            if d in self.dims:
                i = self.dims.index(d)
                offsets = np.arange(self.sizes[i])
                taken = values[starts[:, i, None] + offsets]
                coords[name] = taken[:, 0] if self.sizes[i] == 1 and \
                    d not in self.adapter.token_dims else taken
            else:
                coords[name] = np.broadcast_to(values, (len(samples), len(values)))
        return arrays, coords, starts

    def _region(self, lo, hi):
        """The data from `lo` to `hi` along self.dims, normalized as the adapter encodes it;
        kept for later epochs where the data is in memory and the cache has room."""
        key = (tuple(lo.tolist()), tuple(hi.tolist()))
        if self._regions is not None and key in self._regions:
            return self._regions[key]
        region = normalized(self.adapter, self.ds.isel(
            {d: slice(a, b) for d, a, b in zip(self.dims, lo, hi)}).compute())
        if self._regions is not None and \
                self._region_bytes + region.nbytes <= REGION_CACHE_BYTES:
            self._regions[key] = region
            self._region_bytes += region.nbytes
        return region

    def _windows(self, da, rel):
        """(B, *window sizes of da's dims) gathered at window starts `rel`, in one indexing."""
        values = np.asarray(da.values)
        axes = [(da.dims.index(d), i) for i, d in enumerate(self.dims) if d in da.dims]
        if not axes:  # a static field: the same array for every sample, so no copy
            return np.broadcast_to(values, (len(rel), *values.shape))
        front = np.moveaxis(values, [a for a, _ in axes], range(len(axes)))
        views = sliding_window_view(front, [self.sizes[i] for _, i in axes],
                                    axis=list(range(len(axes))))
        taken = views[tuple(rel[:, i] for _, i in axes)]  # (B, *other dims, *window dims)
        other = [a for a in range(values.ndim) if a not in {a for a, _ in axes}]
        layout = other + [a for a, _ in axes]
        return taken.transpose([0] + [1 + layout.index(a) for a in range(values.ndim)])

    def _encode(self, arrays, coords, starts):
        placement = Placement(self.template, self.dims, self.sizes, self.overlap, starts)
        batch = self.adapter.encode_samples(arrays, self.template.var_dims,
                                            placement.window_sizes(), coords, placement)
        if self._targets is None:
            return batch
        columns, values, valid = self._targets
        if columns == "tokens":  # input variables, per token: cut from the batch's own values
            return self.adapter.with_token_targets(batch, values)
        at = tuple(starts[:, i] for i in columns)
        return dataclasses.replace(batch, targets=values[at],
                                   target_valid=None if valid is None else valid[at])

    def put_back(self, variables=None, mask_missing=True):
        """A :class:`PutBack` for this iterator's batches: ``add(batch, predictions)`` for each
        batch, then ``result()`` is a Dataset on the source's coordinates."""
        put_back = getattr(self.adapter, "put_back", None)  # an adapter's own layout of outputs
        if put_back is not None:
            return put_back(self.template, variables, mask_missing)
        return PutBack(self.adapter, self.template, variables, mask_missing)


def normalized(adapter, region):
    """`region` as the adapter encodes it: normalized by its statistics, unless they are those
    of features it computes from the values (a SignalAdapter's frame features)."""
    if adapter.normalizer is None or getattr(adapter, "normalizes_frames", False):
        return region
    return adapter.normalizer.apply(region)


def _take(pending, size):
    """Split `size` samples off the front of the pending reads; return them and the rest.
    Views when the first read holds them all (the usual case), one concatenation otherwise."""
    if len(pending[0][2]) < size:
        merged = ({k: np.concatenate([p[0][k] for p in pending]) for k in pending[0][0]},
                  {k: np.concatenate([p[1][k] for p in pending]) for k in pending[0][1]},
                  np.concatenate([p[2] for p in pending]))
        pending = [merged]
    arrays, coords, starts = pending[0]
    head = ({k: v[:size] for k, v in arrays.items()}, {k: v[:size] for k, v in coords.items()},
            starts[:size])
    rest = ({k: v[size:] for k, v in arrays.items()}, {k: v[size:] for k, v in coords.items()},
            starts[size:])
    return head, ([rest] if len(rest[2]) else []) + pending[1:]
