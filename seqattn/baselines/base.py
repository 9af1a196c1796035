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

Targets in groups (a dict, as a :class:`~seqattn.adapters.MoleculeAdapter`'s batches carry them:
``{"structure": (B, S), "structure_classes": (B, 1), "forces": (B, N, 3), ...}``) are read
through the one group that holds a known target (:func:`target_group`; ask the adapter for the
targets of one group, ``adapter.batches(ds, targets="solubility")``, where several do), and a
baseline's ``predict`` then returns that group's output the way the model names it:
``{"structure": (B, S)}``, a class group ``"<x>_classes"`` (one class target) as
``{"<x>_logits": (B, C)}`` (:func:`output_key`).
"""
from dataclasses import dataclass, replace

import numpy as np

from ..data.targets import MISSING_CLASS


@dataclass(frozen=True)
class Layout:
    """The task of a batch, as :func:`layout_of` reads it off the batch's targets.

    Parameters
    ----------
    per_token : bool
        True for a target per token (N -> N: targets (B, N) classes or (B, N, Ft) values),
        False for one per sample (N -> 1: targets (B,) classes, (B,) or (B, Ft) values).
    classes : bool
        True for class targets (integer indices), False for values (floats).
    n_outputs : int
        The number of outputs per token or sample: the target features Ft for values, the
        number of classes C for classes.
    """

    per_token: bool
    classes: bool
    n_outputs: int


CLASS_GROUP, LOGITS = "_classes", "_logits"


def output_key(group):
    """The model's output key of target group `group`: ``"<x>_classes"`` -> ``"<x>_logits"``,
    any other group its own name."""
    return group[:-len(CLASS_GROUP)] + LOGITS if group.endswith(CLASS_GROUP) else group


def _known(targets, target_valid=None):
    targets = np.asarray(targets)
    if targets.dtype.kind in "biu":
        return targets != MISSING_CLASS
    known = np.isfinite(targets)
    if target_valid is not None:
        known &= np.asarray(target_valid).reshape(targets.shape)
    return known


def target_group(batches):
    """The key of the one target group (dict targets, see the module docstring) holding a
    known target in `batches`; None when their targets are arrays (or absent)."""
    batches = list(batches)
    if not batches or not all(isinstance(b.targets, dict) for b in batches):
        if any(isinstance(b.targets, dict) for b in batches):
            raise ValueError("some batches carry their targets as a dict of groups and some "
                             "as an array; expected batches of one adapter")
        return None
    keys = list(dict.fromkeys(k for b in batches for k in b.targets))
    found = [k for k in keys if any(b.targets.get(k) is not None
                                    and _known(b.targets[k]).any() for b in batches)]
    if len(found) != 1:
        raise ValueError(f"the batches' targets are groups {keys}, and {found or 'none'} of "
                         "them hold a known target; a baseline (and seqattn.evaluate) reads "
                         "one group: make the batches with the targets of one group, e.g. "
                         "adapter.batches(ds, targets='<name>', ...) (evaluate(..., "
                         "targets='<name>'))")
    return found[0]


def group_view(batch, group):
    """`batch` with group `group`'s targets as its array targets (a class group holding one
    class target: its class indices (B,) or (B, N)); `batch` itself when `group` is None."""
    if group is None or batch.targets is None:
        return batch
    if group not in batch.targets or batch.targets[group] is None:
        raise ValueError(f"the batch has no target group {group!r} (its groups: "
                         f"{sorted(batch.targets)})")
    targets = np.asarray(batch.targets[group])
    if targets.dtype.kind in "biu":
        if targets.shape[-1] != 1:
            raise ValueError(f"target group {group!r} holds {targets.shape[-1]} class targets "
                             "(its last axis); baselines and seqattn.evaluate read a group "
                             "with one class target")
        targets = targets[..., 0]
    return replace(batch, targets=targets, target_valid=None)


def layout_of(batch, n_classes=None):
    """The :class:`Layout` of `batch`'s targets (of its one group holding known targets, when
    they are a dict).

    Parameters
    ----------
    batch : seqattn.data.Batch
        A batch made with targets: class indices (B,) or (B, N), or values (B,), (B, Ft) or
        (B, N, Ft); B samples, N tokens, Ft target features.
    n_classes : int, optional
        The number of classes of a classification, which sizes its logits. Default: the
        largest label in `batch` plus one (at least 2).

    Returns
    -------
    Layout
        Whether the targets are per token, classes or values, and how many outputs.
    """
    batch = group_view(batch, target_group([batch]))
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
    known = _known(targets, None if layout.classes else batch.target_valid)
    if not layout.classes:
        targets = np.where(known, targets, 0.0)
        if targets.ndim == 1:
            targets, known = targets[:, None], known[:, None]
    if not layout.per_token:
        return targets, known, None
    tokens = ~np.asarray(batch.key_padding_mask)
    return targets[tokens], known[tokens], tokens


class Baseline:
    """Base of every baseline: ``fit(train, validation)`` then ``predict(batch)`` (see the
    module docstring). ``name`` labels it in evaluation tables.

    A subclass defines ``_fit(train, validation)``, which fits on the training batches,
    makes its choice on the validation batches and returns what it chose, and
    ``_predict(batch)``, which returns outputs in the model's layout. After ``fit``,
    ``chosen`` holds that choice with every candidate's validation score, ``layout`` the
    task (:class:`Layout`) and ``group`` the target group read (None for array targets).
    """

    name = "baseline"
    chosen = None  # what fit chose on validation, with every candidate's validation score
    layout = None  # the task fit read off the training batches
    group = None  # the target group fit read (dict targets), else None

    def fit(self, train, validation, *, n_classes=None):
        """Fit on the training batches, choosing the penalty (or other choice) on the
        validation batches.

        Parameters
        ----------
        train : iterable of seqattn.data.Batch
            The training batches with targets, as the adapter gives them to the model (a
            ``Batches`` is read at epoch 0).
        validation : iterable of seqattn.data.Batch
            The validation batches with targets, on which the choice is made.
        n_classes : int, optional
            The number of classes of a classification (default: the largest training label
            plus one).

        Returns
        -------
        Baseline
            The baseline itself, fitted.
        """
        train, validation = as_list(train, "train"), as_list(validation, "validation")
        self.group = target_group(train)
        train = [group_view(b, self.group) for b in train]
        validation = [group_view(b, self.group) for b in validation]
        self.layout = layout_of(train[0], n_classes)
        if n_classes is None and self.layout.classes:
            # every training batch's labels, not the first batch's: it may lack the last class
            self.layout = layout_of(train[0], max(layout_of(b).n_outputs for b in train))
        self.chosen = self._fit(train, validation)
        return self

    def _fit(self, train, validation):
        raise NotImplementedError(f"{type(self).__name__} must define _fit(train, validation)")

    def predict(self, batch):
        """The outputs a model reading `batch` would give.

        Parameters
        ----------
        batch : seqattn.data.Batch
            A batch of the same adapter as the training batches (its targets are not read).

        Returns
        -------
        numpy.ndarray or dict
            Values (B, N, Ft) per token or (B, Ft) per sample, in the targets' normalized
            units, or class logits (B, N, C) or (B, C); for targets in groups, a dict of the
            group's output key (``"<x>_logits"`` for a class group ``"<x>_classes"``) to
            that array.
        """
        if self.chosen is None:
            raise ValueError(f"{type(self).__name__}.predict needs fit(train, validation) first")
        out = self._predict(batch)
        return out if self.group is None else {output_key(self.group): out}

    def _predict(self, batch):
        raise NotImplementedError(f"{type(self).__name__} must define _predict(batch)")

    def __repr__(self):
        return f"{type(self).__name__}({self.name!r}, chosen={self.chosen})"
