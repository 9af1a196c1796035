"""What the fit loop trains on: mini-batches cut from arrays, or any iterable of batches.

A :class:`TrainingBatch` holds host arrays: ``inputs`` (B, N, F) tokens (or (B, N) integer ids),
``targets`` of the task's shape (NaN where a target is missing), an optional
``key_padding_mask`` (B, N) (True = padded), per-token ``coords``, name -> (B, N) float64
(passed to models that take ``coords``, and read by latitude-weighted losses), and the tokens'
pairwise ``structure`` (a :class:`seqattn.nn.Structure`: atoms' positions, graphs' pair codes),
passed to models as ``structure=``.

Items an iterable may yield: TrainingBatch objects, tuples (inputs, targets[, key_padding_mask]),
dicts with those keys (and ``coords``, ``structure``), adapter batches that carry their targets
(a target that is False in ``target_valid`` becomes NaN, which NaN-aware losses skip), and
(adapter batch, targets) pairs (for batches without targets of their own). Adapter batches
are recognised by their ``tokens``, ``key_padding_mask``, ``coords`` and ``targets``: the
adapters sit above this layer and are not imported.

Where the batches of epoch e come from (:class:`IterableBatches`):

* ``data.epoch(e)`` when ``data`` has that method (the adapters' shuffled iterators, whose order
  depends on (seed, e) only), so a resumed run sees the same batches as an uninterrupted one;
* a new pass over ``data`` when it can be iterated again (a list, an iterator object);
* ``data()`` when ``data`` is a callable that returns a fresh iterable (a generator function);
* a one-shot iterator (a generator object) serves one epoch; asking it for another is an error
  that says to pass the callable instead.
"""
from dataclasses import dataclass, field

import numpy as np

from .distributed import rank_share


@dataclass
class TrainingBatch:
    """One mini-batch of host arrays, as the fit loop trains on it (see the module docstring).

    Parameters
    ----------
    inputs : numpy.ndarray, shape (B, N, F), or (B, N) of int
        Token features, or token ids.
    targets : numpy.ndarray
        Targets of the task's shape, e.g. (B, N, F_out), (B, F_out) or (B,) class ids; NaN
        where a target is missing.
    key_padding_mask : numpy.ndarray of bool, shape (B, N), default None
        True at padded tokens; None: no padding.
    coords : dict of str to numpy.ndarray, default {}
        Per-token coordinates, name -> (B, N) float64, passed to models that take ``coords``
        and read by latitude-weighted losses.
    structure : seqattn.nn.Structure, default None
        The tokens' pairwise structure (atoms' positions, graphs' pair codes), passed to
        models as ``structure=``.
    """

    inputs: np.ndarray
    targets: np.ndarray
    key_padding_mask: np.ndarray = None
    coords: dict = field(default_factory=dict)
    structure: object = None

    def __len__(self):
        return len(self.inputs)


def _is_adapter_batch(item):
    return all(hasattr(item, name) for name in ("tokens", "key_padding_mask", "coords",
                                                "targets"))


def _targets_with_gaps(batch):
    """An adapter batch's targets with the missing ones (False in ``target_valid``) as NaN."""
    valid = getattr(batch, "target_valid", None)
    if valid is None:
        return batch.targets
    targets = np.asarray(batch.targets)
    return np.where(valid, targets, np.asarray(np.nan, dtype=targets.dtype))


def as_training_batch(item):
    """A TrainingBatch from one item of a user's iterable (see the module docstring)."""
    if isinstance(item, TrainingBatch):
        return item
    if isinstance(item, dict):
        unknown = set(item) - {"inputs", "targets", "key_padding_mask", "coords", "structure"}
        if unknown or not {"inputs", "targets"} <= set(item):
            raise ValueError(f"a batch dict needs 'inputs' and 'targets' (optionally "
                             f"'key_padding_mask', 'coords', 'structure'); got keys "
                             f"{sorted(item)}")
        return TrainingBatch(**item)
    if _is_adapter_batch(item):
        if item.targets is None:
            raise ValueError("an adapter batch without targets (give the iterator its "
                             "targets: BatchIterator(..., targets='label') for one per sample; "
                             "ForecastWindows' batches carry theirs), or yield (batch, "
                             "targets) pairs")
        return TrainingBatch(item.tokens, _targets_with_gaps(item), item.key_padding_mask,
                             dict(item.coords), getattr(item, "structure", None))
    if isinstance(item, (tuple, list)) and len(item) == 2 and _is_adapter_batch(item[0]):
        batch, targets = item
        return TrainingBatch(batch.tokens, targets, batch.key_padding_mask, dict(batch.coords),
                             getattr(batch, "structure", None))
    if isinstance(item, (tuple, list)) and len(item) in (2, 3):
        return TrainingBatch(*item)
    raise TypeError(f"a batch must be a TrainingBatch, a tuple (inputs, targets[, "
                    f"key_padding_mask]), a dict, an adapter batch with targets or an (adapter "
                    f"batch, targets) pair; got {type(item).__name__}")


def length_of(obj):
    """len(obj), or None when it has none (a generator; an object whose __len__ says None)."""
    try:
        return len(obj)
    except TypeError:
        return None


class Epoch:
    """One epoch's batches: iterating gives TrainingBatch objects; ``total`` is their number,
    or None when the source cannot tell (a generator)."""

    def __init__(self, items, total):
        self.items, self.total = items, total

    def __iter__(self):
        for item in self.items:
            yield None if item is None else as_training_batch(item)


def _steps(total, size):
    return None if total is None else -(-total // size)


class ArrayBatches:
    """Mini-batches of ``batch_size`` samples from whole arrays, in a new order each epoch when
    ``shuffle``; the order of epoch e depends on (seed, e) only, so training is reproducible
    and a resumed run sees the same batches as an uninterrupted one.

    Parameters
    ----------
    inputs : array_like, shape (S, N, F), or (S, N) of int
        All S samples' tokens (memory-mapped arrays are read a batch at a time).
    targets : array_like, shape (S, ...)
        The samples' targets, NaN where missing.
    key_padding_mask : array_like of bool, shape (S, N), default None
        True at padded tokens; None: no padding.
    coords : dict of str to array_like, default None
        Per-token coordinates, name -> (S, N); None: none.
    batch_size : int, default 32
        Samples per batch (the last batch may be smaller).
    shuffle : bool, default True
        Draw a new order of the samples each epoch.
    seed : int, default 0
        Seed of the epochs' orders.
    """

    def __init__(self, inputs, targets, key_padding_mask=None, coords=None, batch_size=32,
                 shuffle=True, seed=0):
        inputs, targets = np.asarray(inputs), np.asarray(targets)
        if len(inputs) == 0:
            raise ValueError("the training data is empty (0 samples)")
        if len(targets) != len(inputs):
            raise ValueError(f"inputs has {len(inputs)} samples but targets has {len(targets)}")
        if key_padding_mask is not None and np.shape(key_padding_mask) != inputs.shape[:2]:
            raise ValueError(f"key_padding_mask has shape {np.shape(key_padding_mask)}; "
                             f"expected (B, N) = {inputs.shape[:2]}")
        if not isinstance(batch_size, (int, np.integer)) or batch_size < 1:
            raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
        self.inputs, self.targets, self.key_padding_mask = inputs, targets, key_padding_mask
        self.coords = dict(coords or {})
        self.batch_size, self.shuffle, self.seed = batch_size, shuffle, seed

    def __len__(self):
        return -(-len(self.inputs) // self.batch_size)

    def epoch(self, epoch):
        return Epoch(self._batches(epoch), len(self))

    def shard(self, epoch, rank, size):
        """Rank `rank` of `size`'s batch (or None) per step of epoch `epoch` in data-parallel
        training (:func:`seqattn.train.distributed.rank_share`)."""
        return Epoch(rank_share(self._batches(epoch), rank, size), _steps(len(self), size))

    def _batches(self, epoch):
        order = np.arange(len(self.inputs))
        if self.shuffle:
            order = np.random.default_rng([self.seed, epoch]).permutation(order)
        for start in range(0, len(order), self.batch_size):
            # sorted: the same samples, gathered in memory order (cheaper on memory-mapped data)
            rows = np.sort(order[start:start + self.batch_size])
            yield TrainingBatch(
                self.inputs[rows], self.targets[rows],
                None if self.key_padding_mask is None else np.asarray(self.key_padding_mask)[rows],
                {k: np.asarray(v)[rows] for k, v in self.coords.items()})


class IterableBatches:
    """A user's iterable (or callable returning one) seen through the interface of
    :class:`ArrayBatches`; ``name`` ("data", "validation") names it in errors.

    Parameters
    ----------
    source : iterable, or callable returning an iterable
        Yields the batches of an epoch, in any form the module docstring lists; an object with
        an ``epoch(e)`` method gives epoch e's batches from it.
    name : str, default "data"
        What the error messages call the source.
    """

    def __init__(self, source, name="data"):
        self.source, self.name = source, name
        self.one_shot = hasattr(source, "__next__") and iter(source) is source
        self.epochs_served = 0

    def epoch(self, epoch):
        source = self.source
        if callable(getattr(source, "epoch", None)):
            items = source.epoch(epoch)
            total = length_of(items)
            return Epoch(items, length_of(source) if total is None else total)
        if self.one_shot and self.epochs_served:
            raise ValueError(f"{self.name} is an iterator (a generator, say), which one epoch used "
                             f"up; for several epochs pass a callable that returns a fresh one "
                             f"(the generator function itself, or lambda: make_batches()), or a "
                             f"list")
        self.epochs_served += 1
        items = source() if callable(source) and not hasattr(source, "__iter__") else source
        if not hasattr(items, "__iter__"):
            raise TypeError(f"{self.name} is a callable, so it should return an iterable of "
                            f"batches; it returned a {type(items).__name__}")
        return Epoch(items, length_of(items))


    def shard(self, epoch, rank, size):
        """Rank `rank` of `size`'s batch (or None) per step of epoch `epoch` in data-parallel
        training; a batch producer with ``steps(epoch, rank, size)`` (the adapters') collates
        only this rank's batches."""
        steps = getattr(self.source, "steps", None)
        whole = None if callable(steps) else self.epoch(epoch)
        total = length_of(self.source) if whole is None else whole.total
        items = steps(epoch, rank, size) if whole is None else rank_share(whole.items, rank, size)
        return Epoch(items, _steps(total, size))


def as_batches(data, batch_size=32, shuffle=True, seed=0, name="data"):
    """ArrayBatches for a tuple of arrays (inputs, targets[, key_padding_mask]), else
    IterableBatches over ``data`` (an iterable of batches or a callable returning one)."""
    if isinstance(data, (ArrayBatches, IterableBatches)):
        return data
    if isinstance(data, tuple) and len(data) in (2, 3) and all(
            isinstance(a, np.ndarray) or a is None for a in data):
        return ArrayBatches(*data, batch_size=batch_size, shuffle=shuffle, seed=seed)
    if not (hasattr(data, "__iter__") or callable(data)):
        raise TypeError(f"{name} must be a tuple of arrays (inputs, targets[, "
                        f"key_padding_mask]), an iterable of batches or a callable returning one; "
                        f"got {type(data).__name__}")
    return IterableBatches(data, name)
