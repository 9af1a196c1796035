"""The adapter protocol: the same calls, with the same argument names, for every domain.

::

    adapter = XAdapter(...).fit(ds, targets="y", where=train)  # statistics from train only
    batches = adapter.batches(ds, where=train, batch_size=32, shuffle=True, seed=0)
    model = TaskModel(adapter.model_config(task="regression", d_model=64))
    fit(model, loss, optimizer, batches, validation=adapter.batches(ds, where=valid))
    out = seqattn.predict(model, ds, adapter)  # a Dataset on ds's coordinates

* ``fit(ds, *, targets=None, where=None)`` computes what the adapter learns from data (input
  statistics; the targets' kind, classes and widths) on the samples ``where`` selects, and returns
  the adapter. Hyperparameters go to ``__init__``; state comes from ``fit`` only.
* ``batches(ds, *, targets=None, where=None, batch_size=32, shuffle=False, seed=0,
  drop_last=False)`` is a :class:`Batches`: iterating it runs epoch 0, then 1, ...;
  ``epoch(e)`` replays epoch e (its order depends on (seed, e) only). ``targets`` default to
  those given to ``fit``.
* ``encode(ds, *, where=None)`` is every selected sample as one :class:`~seqattn.data.Batch`;
  ``decode(batch, values)`` puts values (a model's outputs, in the batch's layout) back on the
  source's coordinates as a Dataset, in physical units.
* ``model_config(task=..., **options)`` is the config of the task model that reads these
  batches, its sizes taken from the fitted adapter (never read off a batch).
* ``predict(model, ds, *, where=None, batch_size=64)`` is what ``seqattn.predict(model, ds,
  adapter)`` and ``ds.seqattn.predict(model, adapter)`` call.

Targets (:mod:`seqattn.data.targets`): float values, or classes (integer, bool or text labels,
or classes declared in attrs), per sample or per token. Predictions come back under the target's
name: values in physical units with the target's attrs; classes as the predicted label plus
``<target>_probability`` on (..., ``class``). Samples without any valid token predict NaN.

``where`` selects samples along the adapter's sample dims: a boolean DataArray (or array) on one
sample dim (``ds.time.dt.year < 2020``), a dict ``{dim: labels, slice or boolean array}``, or an
integer index array when the adapter has exactly one sample dim. Calls that need statistics raise
:class:`NotFittedError` before ``fit``.
"""
import numpy as np
import xarray as xr

from ..train.distributed import rank_share
from .epochs import check_epoch


class NotFittedError(ValueError):
    """An adapter call needs statistics that only ``fit`` computes."""


def check_batch_size(batch_size, allow_none=True):
    """`batch_size` as an int (or None, meaning all samples at once, where allowed)."""
    if batch_size is None and allow_none:
        return None
    if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) \
            or batch_size < 1:
        expected = "a positive integer" + (" or None (all samples in one batch)"
                                           if allow_none else "")
        raise ValueError(f"batch_size = {batch_size!r}; expected {expected}")
    return int(batch_size)


def epoch_order(n_samples, shuffle, seed, epoch, blocks=None):
    """Sample indices in the order epoch `epoch` visits them.

    Without `shuffle` the natural order. With it, an order drawn from (`seed`, `epoch`) only, so
    any epoch can be replayed; ``seed=None`` draws fresh randomness (not reproducible). `blocks`
    (one integer per sample) keeps samples of a block together: the blocks are permuted and the
    samples inside each, so a lazy reader touches one block's region at a time.
    """
    epoch = check_epoch(epoch)
    index = np.arange(n_samples)
    if blocks is None:
        if not shuffle:
            return index
        rng = np.random.default_rng(None if seed is None else [seed, epoch])
        return rng.permutation(n_samples)
    blocks = np.asarray(blocks)
    if not shuffle:
        return index[np.argsort(blocks, kind="stable")]
    rng = np.random.default_rng(None if seed is None else [seed, epoch])
    unique = np.unique(blocks)
    rank = np.empty(blocks.max() + 1, dtype=np.int64)
    rank[rng.permutation(unique)] = np.arange(len(unique))
    within = rng.permutation(n_samples)
    return within[np.lexsort((np.arange(n_samples), rank[blocks[within]]))]


class Batches:
    """Batches of a set of samples, epoch by epoch: the one batch producer of every adapter.

    A subclass gives ``n_samples`` and ``collate(indices)`` (the Batch of those samples, in that
    order); lazy readers that group samples in blocks give ``blocks`` and may override
    ``_batches(order)``. Iterating runs epoch 0, then 1, ... on each new ``for`` loop;
    ``epoch(e)`` gives the batches of epoch e again.
    """

    def __init__(self, batch_size=32, shuffle=False, seed=0, drop_last=False):
        self.batch_size = check_batch_size(batch_size)
        self.shuffle = bool(shuffle)
        self.seed = seed
        self.drop_last = bool(drop_last)
        self._next_epoch = 0

    n_samples = 0
    blocks = None  # one integer per sample: samples of a block are read together

    def collate(self, indices):
        raise NotImplementedError(f"{type(self).__name__} must define collate(indices)")

    def __len__(self):
        if self.batch_size is None:
            return 1
        whole, rest = divmod(self.n_samples, self.batch_size)
        return whole if self.drop_last or not rest else whole + 1

    def __iter__(self):
        epoch = self._next_epoch
        self._next_epoch += 1
        return self.epoch(epoch)

    def order(self, epoch):
        """Sample indices in the order epoch `epoch` emits them."""
        return epoch_order(self.n_samples, self.shuffle, self.seed, epoch, self.blocks)

    def epoch(self, epoch):
        """The batches of epoch `epoch` (an int >= 0, 0 the first), lazily."""
        return self._batches(self.order(epoch))

    def _batches(self, order):
        size = self.batch_size or max(len(order), 1)
        for start in range(0, len(order), size):
            indices = order[start:start + size]
            if len(indices) < size and self.drop_last:
                return
            yield self.collate(indices)

    def steps(self, epoch, rank, size):
        """Rank `rank` of `size`'s share of epoch `epoch` in data-parallel training
        (:mod:`seqattn.train.distributed`): per step, its batch or None, where step k takes
        batches k * size .. k * size + size - 1 of the epoch. Only this rank's batches are
        collated (read), when the batches are the plain cuts of the order."""
        if type(self)._batches is not Batches._batches:  # a lazy reader's own grouping
            yield from rank_share(self.epoch(epoch), rank, size)
            return
        order = self.order(epoch)
        batch = self.batch_size or max(len(order), 1)
        count = len(self)
        for step in range(-(-count // size)):
            index = step * size + rank
            indices = order[index * batch:(index + 1) * batch]
            yield self.collate(indices) if index < count and len(indices) else None


def sample_selection(ds, where, sample_dims, name="where"):
    """{dim: integer indices} that `where` selects along `sample_dims` of `ds` (see the module
    docstring for what `where` may be); {} when `where` is None (every sample)."""
    if where is None:
        return {}
    sample_dims = tuple(sample_dims)
    if isinstance(where, xr.DataArray):
        if where.ndim != 1 or where.dims[0] not in sample_dims:
            raise ValueError(f"{name} is a DataArray on {where.dims}; expected a 1-D boolean "
                             f"mask on one sample dim, one of {sample_dims}")
        where = {where.dims[0]: where}
    elif not isinstance(where, dict):
        if len(sample_dims) != 1:
            raise ValueError(f"{name} is a {type(where).__name__}, but the samples run along "
                             f"{sample_dims}; give a dict {{dim: selection}} or a boolean "
                             "DataArray on one of those dims")
        where = {sample_dims[0]: where}
    selection = {}
    for dim, chosen in where.items():
        if dim not in sample_dims:
            raise ValueError(f"{name} selects along {dim!r}, which is not a sample dim of the "
                             f"adapter (its sample dims: {sample_dims})")
        selection[dim] = _indices(ds, dim, chosen, name)
    return selection


def _indices(ds, dim, chosen, name):
    size = ds.sizes[dim]
    if isinstance(chosen, slice):
        if dim in ds.indexes and not all(isinstance(x, (int, np.integer, type(None)))
                                         for x in (chosen.start, chosen.stop)):
            return np.asarray(ds.indexes[dim].slice_indexer(chosen.start, chosen.stop,
                                                            chosen.step).indices(size))
        return np.arange(size)[chosen]
    if isinstance(chosen, xr.DataArray):
        if chosen.dims != (dim,):
            raise ValueError(f"{name}[{dim!r}] has dims {chosen.dims}; expected ({dim!r},)")
        if chosen.dtype == bool and dim in chosen.indexes and dim in ds.indexes \
                and not chosen.indexes[dim].equals(ds.indexes[dim]):
            chosen = chosen.reindex({dim: ds.indexes[dim]}, fill_value=False)
        chosen = chosen.values
    chosen = np.asarray(chosen)
    if chosen.dtype == bool:
        if chosen.shape != (size,):
            raise ValueError(f"{name}[{dim!r}] is a boolean mask of shape {chosen.shape}; "
                             f"expected ({size},), one value per sample along {dim!r}")
        return np.flatnonzero(chosen)
    if np.issubdtype(chosen.dtype, np.integer):
        if chosen.size and (chosen.min() < -size or chosen.max() >= size):
            raise IndexError(f"{name}[{dim!r}] holds indices outside 0 .. {size - 1}")
        return np.arange(size)[chosen.ravel()]
    if dim in ds.indexes:
        return np.asarray(ds.indexes[dim].get_indexer_for(chosen.ravel()))
    raise TypeError(f"{name}[{dim!r}] has dtype {chosen.dtype}; expected a boolean mask, integer "
                    f"indices, or labels of {dim!r}'s coordinate")


def select_samples(ds, where, sample_dims, name="where"):
    """`ds` restricted to the samples `where` selects (``ds`` itself when it is None)."""
    selection = sample_selection(ds, where, sample_dims, name)
    for dim, index in selection.items():
        if (index < 0).any():
            raise KeyError(f"{name}[{dim!r}] names labels that {dim!r} does not have")
        if index.size == 0:
            raise ValueError(f"{name} selects no sample along {dim!r}")
    return ds.isel(selection) if selection else ds


class Adapter:
    """Base of every adapter: the protocol's shared calls (see the module docstring).

    A subclass defines ``sample_dims(ds)``, ``check(ds)``, ``_fit(ds, targets)`` (fitted state on
    already selected samples), ``batches``, ``decode``, ``model_config`` and ``predict``, and
    ``fitted`` (whether ``fit`` has run). ``select`` can be overridden where selecting samples
    cuts more than the sample dims (a graph's nodes and edges).
    """

    fitted = False

    def select(self, ds, where, name="where"):
        """`ds` restricted to the samples that `where` selects."""
        return select_samples(ds, where, self.sample_dims(ds), name)

    def fit(self, ds, *, targets=None, where=None):
        """Learn the adapter's statistics (and the targets' kind) from the samples `where`
        selects; returns self."""
        self._fit(self.select(ds, where), targets)
        return self

    def require_fitted(self, call):
        """Raise NotFittedError for `call` (e.g. "encode") when ``fit`` has not run."""
        if not self.fitted:
            name = type(self).__name__
            raise NotFittedError(f"{name}.{call} needs the statistics that fit computes; call "
                                 f"adapter.fit(ds, where=train) first (a {name} loaded with "
                                 "seqattn.load is fitted already)")

    def encode(self, ds, *, where=None):
        """Every sample `where` selects as one Batch."""
        self.require_fitted("encode")
        batches = self.batches(ds, where=where, batch_size=None)
        return next(iter(batches))
