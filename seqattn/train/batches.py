"""What the fit loop trains on: mini-batches cut from arrays, or any iterable of batches.

A :class:`TrainingBatch` holds host arrays: ``inputs`` (B, N, F) tokens (or (B, N) integer ids),
``targets`` of the task's shape, an optional ``key_padding_mask`` (B, N) (True = padded) and
optional per-token ``coords`` (what latitude-weighted losses read). An iterable may yield
TrainingBatch objects, tuples (inputs, targets[, key_padding_mask]), dicts with those keys, or
(adapter Batch, targets) pairs, so the xarray adapters plug in directly (recognised by their
``tokens`` and ``key_padding_mask``: the adapters sit above this layer and are not imported).
"""
from dataclasses import dataclass, field

import numpy as np


@dataclass
class TrainingBatch:
    inputs: np.ndarray
    targets: np.ndarray
    key_padding_mask: np.ndarray = None
    coords: dict = field(default_factory=dict)

    def __len__(self):
        return len(self.inputs)


def as_training_batch(item):
    """A TrainingBatch from one item of a user's iterable (see the module docstring)."""
    if isinstance(item, TrainingBatch):
        return item
    if isinstance(item, dict):
        unknown = set(item) - {"inputs", "targets", "key_padding_mask", "coords"}
        if unknown or not {"inputs", "targets"} <= set(item):
            raise ValueError(f"a batch dict needs 'inputs' and 'targets' (optionally "
                             f"'key_padding_mask', 'coords'); got keys {sorted(item)}")
        return TrainingBatch(**item)
    if (isinstance(item, (tuple, list)) and len(item) == 2 and hasattr(item[0], "tokens")
            and hasattr(item[0], "key_padding_mask")):
        batch, targets = item
        return TrainingBatch(batch.tokens, targets, batch.key_padding_mask, dict(batch.coords))
    if isinstance(item, (tuple, list)) and len(item) in (2, 3):
        return TrainingBatch(*item)
    raise TypeError(f"a batch must be a TrainingBatch, a tuple (inputs, targets[, "
                    f"key_padding_mask]), a dict or an (adapter Batch, targets) pair; got "
                    f"{type(item).__name__}")


class ArrayBatches:
    """Mini-batches of ``batch_size`` samples from whole arrays, in a new order each epoch when
    ``shuffle``; the order of epoch e depends on (seed, e) only, so training is reproducible
    and a resumed run sees the same batches as an uninterrupted one."""

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
    """A re-iterable of batches (a list, a BatchIterator, a generator function's result for one
    epoch only) seen as the same interface as :class:`ArrayBatches`."""

    def __init__(self, iterable):
        self.iterable = iterable

    def __len__(self):
        return len(self.iterable) if hasattr(self.iterable, "__len__") else None

    def epoch(self, epoch):
        for item in self.iterable:
            yield as_training_batch(item)


def as_batches(data, batch_size=32, shuffle=True, seed=0):
    """ArrayBatches for a tuple of arrays (inputs, targets[, key_padding_mask]), else
    IterableBatches over ``data``."""
    if isinstance(data, (ArrayBatches, IterableBatches)):
        return data
    if isinstance(data, tuple) and len(data) in (2, 3) and all(
            isinstance(a, np.ndarray) or a is None for a in data):
        return ArrayBatches(*data, batch_size=batch_size, shuffle=shuffle, seed=seed)
    if not hasattr(data, "__iter__"):
        raise TypeError(f"data must be a tuple of arrays (inputs, targets[, key_padding_mask]) "
                        f"or an iterable of batches, got {type(data).__name__}")
    return IterableBatches(data)
