"""evaluate: a model and the strong baselines scored on the same samples, in physical units.

::

    scores = seqattn.evaluate(model, ds, adapter, where=test, train=train, validation=valid)
    print(seqattn.evaluation.table(scores))

Every predictor (the model, then each baseline) reads the same batches of the samples ``where``
selects, the batches the adapter gives the model. Baselines (:mod:`seqattn.baselines`) are
fitted on the ``train`` samples' batches with their choices made on the ``validation`` samples'
(``baselines=True``: the families that fit the task; or a list of baselines, fitted ones used as
they are). The scores are taken over the whole set at once, not averaged over batches:

* values: each predictor's outputs and the targets go back through ``adapter.decode`` (physical
  units, on the source's coordinates); a value counts where the target is known and every
  predictor gave one, so all are scored on the same values. Metrics ``rmse``, ``mae``, ``bias``
  (mean of prediction - target), ``r2`` (1 - squared error over the targets' variance), and
  ``rmse_skill`` (1 - rmse / the best baseline's rmse, per lead), each per ``by`` dim the
  decoded targets have (default: ``lead``). ``weights`` (a DataArray on some of the decoded
  targets' dims, e.g. ``np.cos(np.deg2rad(ds.lat))`` for the area of a lat/lon cell) weights
  each value in ``rmse``, ``mae``, ``bias`` and ``r2``; the ``metrics`` you add get the values
  unweighted. Several target variables get a ``target`` dim.
  A value that two batches both put back (overlapping windows in different batches) counts
  once for each.
* classes: scored on the class indices of the labelled samples (tokens), the class names being
  the ``class`` coordinate: ``accuracy``, ``balanced_accuracy``, ``log_loss``, ``auroc`` (the
  positive class's probability for two classes, else the mean one-vs-rest AUROC over the
  classes present), and ``recall`` per class.

Targets in groups (a :class:`~seqattn.adapters.MoleculeAdapter`'s batches carry a dict,
``{"structure": ..., "forces": ...}``, and its model returns a dict of outputs) are scored one
group at a time: the group holding known targets (:func:`seqattn.baselines.base.target_group`;
``targets="solubility"`` picks it where several would, e.g. energies beside their forces),
against the model's output of that group (``"structure"``; ``"<x>_logits"`` for the classes
``"<x>_classes"``, one class target per group). Decoding fills the model's other outputs with
NaN, so only the evaluated targets come back.

The result is a Dataset with a ``predictor`` dim (``"model"`` first) and ``n``, the number of
values or samples scored; ``chosen`` holds what each baseline chose on validation. The
evaluated samples' batches and every predictor's outputs are held in memory until scored.
"""
import json

import numpy as np
import xarray as xr

from .baselines import Baseline, for_batch, layout_of
from .baselines.base import as_list, group_view, output_key, target_group
from .baselines.estimators import log_loss
from .data.model_call import ModelCall
from .data.targets import CLASS_DIM, MISSING_CLASS, softmax

__all__ = ["evaluate", "table", "strongest_baseline"]

VALUE_METRICS = ("rmse", "mae", "bias", "r2")
CLASS_METRICS = ("accuracy", "balanced_accuracy", "log_loss", "auroc")
HIGHER_IS_BETTER = {"accuracy", "balanced_accuracy", "auroc", "r2", "rmse_skill", "recall"}
MODEL = "model"


def evaluate(model, ds, adapter, *, where=None, targets=None, metrics=None, baselines=True,
             train=None, validation=None, by=("lead",), weights=None, batch_size=64):
    """Scores of `model` and the baselines on the samples `where` selects (see the module
    docstring), as a Dataset.

    Parameters
    ----------
    model : seqattn.nn.Module
        The trained model, called on the adapter's batches (built from
        ``adapter.model_config(...)``).
    ds : xarray.Dataset
        The source data, holding the evaluated samples and, for baselines to fit, the
        training and validation samples.
    adapter : object
        The fitted adapter that made the model's batches (its ``batches`` and ``decode``).
    where : selection, optional
        The samples to score, as ``adapter.batches(ds, where=...)`` takes them (a boolean
        DataArray, a dict, labels or indices: :mod:`seqattn.data.protocol`); default all.
    targets : str, optional
        The target group to score where the adapter's batches carry several (a
        MoleculeAdapter's, e.g. ``"solubility"``); passed to ``adapter.batches``.
    metrics : dict, optional
        More metrics, name -> ``f(target, prediction)`` returning a float: for values, 1-D
        arrays of the scored values in physical units; for classes, the class indices (R,)
        and the probabilities (R, C) of the R labelled samples or tokens.
    baselines : bool or list of seqattn.baselines.Baseline, default True
        True: the families that fit the task (:func:`seqattn.baselines.for_batch`, told the
        adapter), fitted here; False or None: the model alone; a list: those baselines, the
        fitted ones used as they are and the others fitted here.
    train : selection, optional
        The samples the baselines are fitted on; needed, with `validation`, when any
        baseline is to be fitted.
    validation : selection, optional
        The samples on which the baselines make their choices (penalty, k).
    by : tuple of str, default ('lead',)
        Dims of the decoded targets kept in the value scores (one score per coordinate);
        each absent dim is ignored. Not used for classes.
    weights : xarray.DataArray, optional
        Weights >= 0 of the values in ``rmse``, ``mae``, ``bias`` and ``r2``, on some of the
        decoded targets' dims (e.g. ``np.cos(np.deg2rad(ds.lat))``); default: equal.
    batch_size : int, default 64
        Samples per batch for the model's and the baselines' calls.

    Returns
    -------
    xarray.Dataset
        One variable per metric on a ``predictor`` dim (``"model"`` first), with the ``by``
        dims (values) or a ``class`` dim for ``recall`` (classes), a ``target`` dim for
        several value targets; ``n``, the number of values or samples scored; ``chosen``,
        what each baseline chose on validation, as JSON.
    """
    if weights is not None and not isinstance(weights, xr.DataArray):
        raise TypeError(f"weights is a {type(weights).__name__}; expected an xarray.DataArray "
                        "on dims of the decoded targets, e.g. np.cos(np.deg2rad(ds.lat))")
    options = {} if targets is None else {"targets": targets}
    batches = as_list(adapter.batches(ds, where=where, batch_size=batch_size, shuffle=False,
                                      **options), "where")
    run = ModelCall(model)
    raw = [run(b) for b in batches]
    group = target_group(batches)
    outputs = {MODEL: [_group_output(r, group, "the model") for r in raw]}
    views = [group_view(b, group) for b in batches]
    layout = layout_of(views[0], outputs[MODEL][0].shape[-1])
    fitted = _fitted_baselines(baselines, adapter, ds, train, validation, batch_size, options,
                               layout)
    for baseline in fitted:
        if baseline.group != group:
            raise ValueError(f"baseline {baseline.name!r} was fitted on target group "
                             f"{baseline.group!r}, but the evaluated batches' targets are "
                             f"{group!r}; fit it on batches of the same targets")
        outputs[_unique(baseline.name, outputs)] = [
            _group_output(baseline.predict(b), group, baseline.name) for b in batches]
    chosen = [""] + [json.dumps(_plain(b.chosen)) for b in fitted]
    decodable = _Decodable(raw, group)
    if layout.classes:
        scores = _class_scores(adapter, batches, views, outputs, layout, metrics or {},
                               decodable)
    else:
        scores = _value_scores(adapter, batches, views, outputs, metrics or {}, tuple(by),
                               decodable, weights)
    scores["chosen"] = xr.DataArray(np.array(chosen, dtype=object), dims="predictor")
    return scores


def _fitted_baselines(baselines, adapter, ds, train, validation, batch_size, options, layout):
    if baselines is False or baselines is None:
        return []
    given = None if baselines is True else list(baselines)
    if given is not None and not all(isinstance(b, Baseline) for b in given):
        raise TypeError(f"baselines={baselines!r}; expected True, False or a list of "
                        "seqattn.baselines.Baseline")
    if given is not None and all(b.chosen is not None for b in given):
        return given
    if train is None or validation is None:
        raise ValueError(f"baselines are fitted on the training samples and choose their "
                         f"penalties on validation samples; got train={train!r}, "
                         f"validation={validation!r}: give both (where-selections, as for fit), "
                         "or baselines=False, or fitted baselines")
    train_batches = as_list(adapter.batches(ds, where=train, batch_size=batch_size,
                                            shuffle=False, **options), "train")
    valid_batches = as_list(adapter.batches(ds, where=validation, batch_size=batch_size,
                                            shuffle=False, **options), "validation")
    n_classes = layout.n_outputs if layout.classes else None
    return [b if b.chosen is not None else b.fit(train_batches, valid_batches, n_classes=n_classes)
            for b in (given if given is not None else for_batch(train_batches[0], adapter))]


def _group_output(out, group, who):
    """`who`'s output for the evaluated targets: the array itself, or the evaluated group's
    array out of a dict of named outputs."""
    if group is None:
        if isinstance(out, dict):
            raise ValueError(f"{who} returned named outputs {sorted(out)}, but the batches' "
                             "targets are one array; expected an array like the targets")
        return np.asarray(out)
    key = output_key(group)
    if not isinstance(out, dict) or out.get(key) is None:
        have = sorted(out) if isinstance(out, dict) else f"a {type(out).__name__}"
        raise ValueError(f"the batches' targets are the group {group!r}, whose outputs are "
                         f"{key!r}, but {who} returned {have}; build the model with "
                         "adapter.model_config(...)")
    return np.asarray(out[key])


class _Decodable:
    """What ``adapter.decode`` takes for a predictor's output of batch `i`: the output itself
    (array targets), or the model's named outputs with the evaluated group's replaced by it
    and every other float output NaN (so only the evaluated targets come back finite)."""

    def __init__(self, raw, group):
        self.raw, self.group = raw, group

    def __call__(self, i, values):
        if self.group is None:
            return values
        key = output_key(self.group)
        out = {k: None if v is None else np.full(np.shape(v), np.nan)
               for k, v in self.raw[i].items()}
        out[key] = np.asarray(values).reshape(np.shape(self.raw[i][key]))
        return out


def _unique(name, taken):
    candidate, i = name, 2
    while candidate in taken:
        candidate, i = f"{name} {i}", i + 1
    return candidate


def _plain(value):
    """`value` with numpy scalars and non-string keys made JSON-able."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    return value


# ---- values ---------------------------------------------------------------------------------

def _known_targets(batch, like):
    """The batch's targets in the model's output layout, NaN where unknown (what decode turns
    into the targets in physical units)."""
    targets = np.asarray(batch.targets, np.float64)
    known = np.isfinite(targets)
    if batch.target_valid is not None:
        known &= np.asarray(batch.target_valid).reshape(targets.shape)
    return np.where(known, targets, np.nan).reshape(like.shape)


def _rows(da, keep):
    """`da` as (rows, *keep sizes): the `keep` dims last, every other dim flattened."""
    others = [d for d in da.dims if d not in keep]
    da = da.transpose(*others, *keep)
    return da.values.reshape(-1, *da.shape[len(others):]).astype(np.float64)


def _is_class_variable(decoded, v):
    """Whether decoded variable `v` is a class target's: its labels (beside
    ``<v>_probability``) or probabilities (on ``class`` or ``<target>_class``)."""
    return f"{v}_probability" in decoded.data_vars or any(
        d == CLASS_DIM or str(d).endswith("_" + CLASS_DIM) for d in decoded[v].dims)


def _weight_rows(weights, target, keep):
    """`weights` broadcast on decoded target `target`, as rows like its values."""
    lacking = [d for d in weights.dims if d not in target.dims]
    if lacking:
        raise ValueError(f"weights has dims {weights.dims}, but the decoded target "
                         f"{target.name!r} has dims {target.dims} (lacking {lacking}); "
                         "expected weights on dims of the decoded targets")
    found = weights.broadcast_like(target)
    if found.shape != target.shape or not (np.isfinite(found.values).all()
                                           and (found.values >= 0).all()):
        raise ValueError(f"weights on {target.name!r}'s coordinates hold a negative, non-finite "
                         "or missing value; expected finite weights >= 0 on the same "
                         "coordinates as the data")
    return _rows(found.transpose(*target.dims), keep)


def _value_scores(adapter, batches, views, outputs, metrics, by, decodable, weights):
    truth, predicted, keep, coords = {}, {name: {} for name in outputs}, {}, {}
    weight = {}
    for i, batch in enumerate(batches):
        decoded_truth = adapter.decode(
            batch, decodable(i, _known_targets(views[i], outputs[MODEL][i])))
        variables = [v for v in decoded_truth.data_vars if decoded_truth[v].dtype.kind == "f"
                     and not (decodable.group and _is_class_variable(decoded_truth, v))]
        # a batch decodes onto the whole source (NaN where it has no sample): keep its rows
        rows = {}
        for v in variables:
            keep[v] = tuple(d for d in by if d in decoded_truth[v].dims)
            coords[v] = {d: decoded_truth[v][d].values for d in keep[v] if d in
                         decoded_truth[v].coords}
            target = _rows(decoded_truth[v], keep[v])
            rows[v] = np.isfinite(target).reshape(len(target), -1).any(axis=1)
            truth.setdefault(v, []).append(target[rows[v]])
            if weights is not None:
                weight.setdefault(v, []).append(
                    _weight_rows(weights, decoded_truth[v], keep[v])[rows[v]])
        for name, values in outputs.items():
            decoded = adapter.decode(batch, decodable(i, values[i]))
            for v in variables:
                predicted[name].setdefault(v, []).append(_rows(decoded[v], keep[v])[rows[v]])
    per_variable = {}
    for v in truth:
        target = np.concatenate(truth[v])
        if decodable.group and not np.isfinite(target).any():
            continue  # a target of the adapter outside the evaluated group
        preds = {name: np.concatenate(predicted[name][v]) for name in outputs}
        scored = np.isfinite(target) & np.all([np.isfinite(p) for p in preds.values()], axis=0)
        w = np.concatenate(weight[v]) if weights is not None else np.ones_like(target)
        per_variable[v] = _value_metrics(target, preds, scored, w, keep[v], coords[v], metrics)
    if len(per_variable) == 1:
        (v, scores), = per_variable.items()
        return scores.assign_attrs(target=v)
    return xr.concat(list(per_variable.values()), dim="target").assign_coords(
        target=list(per_variable))


def _value_metrics(target, preds, scored, weight, keep, coords, metrics):
    cells = list(np.ndindex(*target.shape[1:]))
    names = list(preds)
    n = np.zeros(target.shape[1:], np.int64)
    found = {m: np.full((len(names), *target.shape[1:]), np.nan)
             for m in (*VALUE_METRICS, *metrics)}
    for cell in cells:
        rows = scored[(slice(None), *cell)]
        n[cell] = rows.sum()
        if not rows.any():
            continue
        y = target[(slice(None), *cell)][rows]
        w = weight[(slice(None), *cell)][rows]
        if not w.sum() > 0:
            continue  # every value here weighs nothing: no score
        w = w / w.sum()
        spread = np.sum(w * (y - np.sum(w * y)) ** 2)
        for p, name in enumerate(names):
            error = preds[name][(slice(None), *cell)][rows] - y
            found["rmse"][(p, *cell)] = np.sqrt(np.sum(w * error ** 2))
            found["mae"][(p, *cell)] = np.sum(w * np.abs(error))
            found["bias"][(p, *cell)] = np.sum(w * error)
            found["r2"][(p, *cell)] = 1 - np.sum(w * error ** 2) / spread if spread > 0 \
                else np.nan
            for m, f in metrics.items():
                found[m][(p, *cell)] = f(y, preds[name][(slice(None), *cell)][rows])
    dims = ("predictor", *keep)
    scores = xr.Dataset({m: (dims, v) for m, v in found.items()},
                        coords={"predictor": names, **coords})
    if len(names) > 1:
        best = scores["rmse"].isel(predictor=slice(1, None)).min("predictor")
        scores["rmse_skill"] = 1 - scores["rmse"] / best
    scores["n"] = (keep, n)
    return scores


# ---- classes --------------------------------------------------------------------------------

def _class_names(adapter, batch, logits, n_classes):
    decoded = adapter.decode(batch, logits)
    for v in decoded.data_vars:
        if CLASS_DIM in decoded[v].dims:
            return list(decoded[v][CLASS_DIM].values)
    # several class targets (a molecule adapter's): each on its own <target>_class dim
    found = [decoded[v][d].values for v in decoded.data_vars for d in decoded[v].dims
             if str(d).endswith("_" + CLASS_DIM) and d in decoded[v].coords
             and decoded.sizes[d] == n_classes]
    return list(found[0]) if len(found) == 1 else list(range(n_classes))


def _labelled(batch, values):
    """(labels (R,), logits (R, C)) of the labelled samples or unpadded tokens."""
    targets = np.asarray(batch.targets)
    keep = targets != MISSING_CLASS
    if targets.ndim == 2:
        keep &= ~np.asarray(batch.key_padding_mask)
    return targets[keep], np.asarray(values, np.float64)[keep]


def _auroc(labels, probabilities):
    from sklearn.metrics import roc_auc_score

    present = np.unique(labels)
    if len(present) < 2:
        return np.nan
    if probabilities.shape[1] == 2:
        return roc_auc_score(labels, probabilities[:, 1])
    return float(np.mean([roc_auc_score(labels == c, probabilities[:, c]) for c in present]))


def _class_scores(adapter, batches, views, outputs, layout, metrics, decodable):
    names = list(outputs)
    classes = _class_names(adapter, batches[0], decodable(0, outputs[MODEL][0]),
                           layout.n_outputs)
    found = {m: np.full(len(names), np.nan) for m in (*CLASS_METRICS, *metrics)}
    recall = np.full((len(names), layout.n_outputs), np.nan)
    for p, name in enumerate(names):
        pairs = [_labelled(b, v) for b, v in zip(views, outputs[name])]
        labels = np.concatenate([lab for lab, _ in pairs])
        logits = np.concatenate([lg for _, lg in pairs])
        if len(labels) == 0:
            raise ValueError("the evaluated samples hold no labelled target")
        probabilities = softmax(logits)
        chosen = probabilities.argmax(axis=1)
        per_class = [np.mean(chosen[labels == c] == c) if (labels == c).any() else np.nan
                     for c in range(layout.n_outputs)]
        recall[p] = per_class
        found["accuracy"][p] = np.mean(chosen == labels)
        found["balanced_accuracy"][p] = np.nanmean(per_class)
        found["log_loss"][p] = log_loss(logits, labels)
        found["auroc"][p] = _auroc(labels, probabilities)
        for m, f in metrics.items():
            found[m][p] = f(labels, probabilities)
    scores = xr.Dataset({m: ("predictor", v) for m, v in found.items()},
                        coords={"predictor": names, CLASS_DIM: classes})
    scores["recall"] = (("predictor", CLASS_DIM), recall)
    scores["n"] = len(labels)
    return scores


# ---- reading the result ---------------------------------------------------------------------

def table(scores):
    """The scores as a pandas DataFrame: one row per predictor (and lead, target), one column
    per metric; printable in a notebook or a terminal.

    Parameters
    ----------
    scores : xarray.Dataset
        What :func:`evaluate` returned. ``chosen``, ``n`` and the per-class ``recall`` are
        left out.

    Returns
    -------
    pandas.DataFrame
        Indexed by predictor (and the scores' other dims), one column per metric.
    """
    metrics = [v for v in scores.data_vars if v not in ("chosen", "n")
               and CLASS_DIM not in scores[v].dims]
    return scores[metrics].to_dataframe()[metrics]


def strongest_baseline(scores, metric=None):
    """The name of the baseline with the best `metric`, averaged over leads and targets.

    Parameters
    ----------
    scores : xarray.Dataset
        What :func:`evaluate` returned, with at least one baseline.
    metric : str, optional
        The metric to rank by; higher is better for ``accuracy``, ``balanced_accuracy``,
        ``auroc``, ``r2``, ``rmse_skill`` and ``recall``, lower for the others. Default:
        ``rmse`` for values, ``log_loss`` for classes.

    Returns
    -------
    str
        The baseline's name on the ``predictor`` dim.
    """
    metric = metric or ("rmse" if "rmse" in scores else "log_loss")
    baselines = scores[metric].sel(predictor=scores.predictor.values[1:])
    if baselines.sizes["predictor"] == 0:
        raise ValueError("the scores hold no baseline; evaluate with baselines=True")
    mean = baselines.mean([d for d in baselines.dims if d != "predictor"])
    best = np.argmax(mean.values) if metric in HIGHER_IS_BETTER else np.argmin(mean.values)
    return str(mean.predictor.values[best])
