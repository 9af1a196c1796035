"""What every baseline shares: the interface, the task a batch describes, and reading batches.

A baseline is fitted on training batches and has its penalty (or its one other choice) picked on
validation batches, both exactly as the adapter gives them to the model::

    baseline = TokenFeatures().fit(train_batches, validation_batches)
    outputs = baseline.predict(batch)      # in the model's output layout
    adapter.decode(batch, outputs)         # back on the source's coordinates, physical units

``predict`` returns what a model reading the same batch returns: values (B, N, Ft) per token or
(B, Ft) per sample, in the targets' normalized units; class logits (B, N, C) or (B, C). What was
chosen on validation, with the validation score of every candidate, is kept in ``chosen``.

The task is read off the targets (:func:`layout_of`): integer targets are class indices
(:data:`~seqattn.data.targets.MISSING_CLASS` marks a missing label), float targets are values
(NaN, or False in ``target_valid``, marks a missing one); class targets (B, N) and value targets
(B, N, Ft) are per token, class targets (B,) and value targets (B,) or (B, Ft) per sample.
"""
from dataclasses import dataclass

import numpy as np

from ..data.targets import MISSING_CLASS


@dataclass(frozen=True)
class Layout:
    """The task of a batch: ``per_token`` (N -> N) or not (N -> 1), ``classes`` or values, and
    ``n_outputs`` (target features, or classes)."""

    per_token: bool
    classes: bool
    n_outputs: int


def layout_of(batch, n_classes=None):
    """The :class:`Layout` of `batch`'s targets; `n_classes` (default: the largest label seen
    plus one) sizes the logits of a classification."""
    targets = batch.targets
    if targets is None:
        raise ValueError("the batch has no targets; baselines are fitted on batches made with "
                         "targets (adapter.batches(ds, targets=..., where=train))")
    targets = np.asarray(targets)
    if targets.dtype.kind in "biu":
        if targets.ndim not in (1, 2):
            raise ValueError(f"class targets have shape {targets.shape}; expected (B,) per "
                             "sample or (B, N) per token")
        n = n_classes if n_classes is not None else int(max(targets.max(initial=0), 1)) + 1
        return Layout(per_token=targets.ndim == 2, classes=True, n_outputs=int(n))
    if targets.ndim not in (1, 2, 3):
        raise ValueError(f"value targets have shape {targets.shape}; expected (B,) or (B, Ft) "
                         "per sample or (B, N, Ft) per token")
    return Layout(per_token=targets.ndim == 3, classes=False,
                  n_outputs=1 if targets.ndim == 1 else targets.shape[-1])


def as_list(batches, name):
    """Every batch of `batches` (epoch 0 of a Batches: the same order each time), as a list."""
    if batches is None:
        raise ValueError(f"{name} is None; baselines are fitted on training batches and choose "
                         "their penalty on validation batches: give both, e.g. "
                         "adapter.batches(ds, where=valid)")
    found = list(batches.epoch(0) if hasattr(batches, "epoch") else batches)
    if not found:
        raise ValueError(f"{name} holds no batch; expected at least one batch with targets")
    return found


def target_matrix(batch, layout):
    """Targets and their mask as rows: per sample (B, Ft) / (B,), per token the tokens that are
    not padding (R, Ft) / (R,), with the (B, N) mask of those tokens (None per sample)."""
    targets = np.asarray(batch.targets)
    if layout.classes:
        known = targets != MISSING_CLASS
    else:
        known = np.isfinite(targets)
        if batch.target_valid is not None:
            known &= np.asarray(batch.target_valid).reshape(targets.shape)
        targets = np.where(known, targets, 0.0)
        if targets.ndim == 1:
            targets, known = targets[:, None], known[:, None]
    if not layout.per_token:
        return targets, known, None
    tokens = ~np.asarray(batch.key_padding_mask)
    return targets[tokens], known[tokens], tokens


class Baseline:
    """Base of every baseline: ``fit(train, validation)`` then ``predict(batch)`` (see the
    module docstring). ``name`` labels it in evaluation tables."""

    name = "baseline"
    chosen = None  # what fit chose on validation, with every candidate's validation score
    layout = None  # the task fit read off the training batches

    def fit(self, train, validation, *, n_classes=None):
        train, validation = as_list(train, "train"), as_list(validation, "validation")
        self.layout = layout_of(train[0], n_classes)
        self.chosen = self._fit(train, validation)
        return self

    def _fit(self, train, validation):
        raise NotImplementedError(f"{type(self).__name__} must define _fit(train, validation)")

    def predict(self, batch):
        if self.chosen is None:
            raise ValueError(f"{type(self).__name__}.predict needs fit(train, validation) first")
        return self._predict(batch)

    def _predict(self, batch):
        raise NotImplementedError(f"{type(self).__name__} must define _predict(batch)")

    def __repr__(self):
        return f"{type(self).__name__}({self.name!r}, chosen={self.chosen})"
