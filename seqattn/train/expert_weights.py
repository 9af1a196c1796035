"""How much to trust each of two experts, chosen on predictions of samples no model trained on.

A SequenceModel given a fitted neighbour baseline by ``warm_start(model, baseline,
keep_head=True)`` adds attention's class logits (its head) to the baseline's log votes (its
neighbour path): a product of the two experts. On small sets of series attention trained on a
few dozen samples can be confidently wrong, and the product then trails the neighbours alone;
elsewhere attention is the better expert. :func:`weigh_experts` scales the two terms (the head
and the path's map), so that 0 drops an expert; :func:`choose_expert_weights` chooses the
weights on out-of-fold predictions::

    weights = choose_expert_weights(lambda part: train_model(part), ds, label="label")
    weigh_experts(model, weights)          # model trained as train_model trains it
    weights.table                          # every candidate's out-of-fold scores

The training Dataset is cut into ``folds`` stratified folds; ``train_model(part)`` trains the
whole recipe (attention, early stopping on its own part, the baseline, ``warm_start``) on the
other folds and returns ``(model, adapter)``; each held fold is then scored by its model's two
terms apart. Choosing on predictions of samples that neither the model nor its early stopping
saw matters here: a validation part that early stopping read makes attention look better than
it is, and on small sets every candidate scores the same on it.

The expert alone is the simpler model, and it is kept unless the best candidate beats it out of
fold by more than one standard error of their paired difference (the one-standard-error rule,
as early stopping keeps the linear solution where training adds nothing): on a few dozen series
a candidate that is right on one sample more is within the folds' noise, and attention weighed
in on such evidence cost accuracy on new data where the expert alone did better.
"""
from dataclasses import dataclass

import numpy as np
import xarray as xr

from ..autodiff.tensor import unwrap
from ..backend import CPU
from ..data.model_call import evaluation_mode
from ..nn.placement import moved

# (attention, expert) weights, the product of the two first: a tie goes to the earlier one
CANDIDATE_WEIGHTS = ((1.0, 1.0), (0.5, 1.0), (0.25, 1.0), (0.0, 1.0), (1.0, 0.5), (1.0, 0.25),
                     (1.0, 0.0))
EXPERT_ALONE = (0.0, 1.0)
METRICS = ("accuracy", "cross_entropy")


@dataclass
class ExpertWeights:
    """The chosen ``attention`` and ``expert`` weights and ``table``: every candidate's
    out-of-fold ``accuracy`` and ``cross_entropy`` (candidate = "attention x, expert y")."""

    attention: float
    expert: float
    table: xr.Dataset


def expert_outputs(model, batches):
    """The two terms of `model`'s class logits over `batches`, apart: ``(attention, expert,
    targets)``, attention's logits (S, C) (the head), the neighbour path's outputs (S, C) and
    the class ids (S,) of every sample."""
    _check_two_experts(model)
    attention, expert, targets = [], [], []
    for batch in batches:
        with evaluation_mode(model):
            terms = model.terms(batch.tokens, batch.key_padding_mask, coords=batch.coords)
        head, path = (np.asarray(moved(unwrap(t), CPU), np.float64) for t in terms)
        attention.append(head)
        expert.append(path)
        targets.append(np.asarray(batch.targets).reshape(-1))
    return (np.concatenate(attention), np.concatenate(expert),
            np.concatenate(targets).astype(np.int64))


def sample_scores(attention, expert, targets, weights):
    """Per sample, (hit, cross-entropy) of softmax(a * attention + e * expert) for (a, e) =
    `weights`: (S,) 1.0 where the most probable class is the target, else 0.0, and (S,)
    -log p(target)."""
    a, e = weights
    logits = a * attention + e * expert
    log_p = logits - np.logaddexp.reduce(logits, axis=1, keepdims=True)
    rows = np.arange(len(targets))
    return (np.argmax(log_p, axis=1) == targets).astype(np.float64), -log_p[rows, targets]


def weighed_scores(attention, expert, targets, weights):
    """(accuracy, mean cross-entropy) of softmax(a * attention + e * expert) for (a, e) =
    `weights`."""
    hits, losses = sample_scores(attention, expert, targets, weights)
    return float(np.mean(hits)), float(np.mean(losses))


def stratified_folds(labels, folds, seed):
    """Fold number (0 .. folds-1) of each sample, every class spread over the folds."""
    labels = np.asarray(labels)
    rng = np.random.default_rng(seed)
    fold = np.empty(len(labels), dtype=np.int64)
    for c in np.unique(labels):
        members = rng.permutation(np.flatnonzero(labels == c))
        fold[members] = np.arange(len(members)) % folds
    return fold


def choose_expert_weights(train_model, ds, *, label, folds=5, seed=0,
                          candidates=CANDIDATE_WEIGHTS, metric="accuracy", prefer=EXPERT_ALONE,
                          sample_dim="sample"):
    """Choose (attention, expert) weights on out-of-fold predictions of `ds` (see the module
    docstring).

    Parameters
    ----------
    train_model : callable
        ``train_model(part) -> (model, adapter)``: the whole recipe trained on a Dataset `part`
        of `ds`'s samples, a model with a neighbour path (``warm_start(..., keep_head=True)``).
    ds : xarray.Dataset
        The training samples (never the test set).
    label : str
        The class label variable along `sample_dim` (the folds are stratified by it).
    folds : int
        How many folds (at least 2).
    seed : int
        Seeds the folds.
    candidates : sequence of (float, float)
        (attention, expert) weights, each at least 0 and not both 0.
    metric : {"accuracy", "cross_entropy"}
        What ranks the candidates: the highest accuracy (ties broken by the lower cross-entropy,
        then by order), or the lowest cross-entropy.
    prefer : (float, float) or None
        The simpler candidate, the expert alone by default: chosen unless the best one beats it
        by more than one standard error of their paired out-of-fold difference in `metric`
        (see :func:`choose_from_outputs`). None: the best candidate is chosen.

    Returns
    -------
    ExpertWeights
    """
    if isinstance(folds, bool) or not isinstance(folds, int) or folds < 2:
        raise ValueError(f"folds must be an int of at least 2, got {folds!r}")
    candidates, prefer = _checked_choice(candidates, metric, prefer)
    if label not in ds:
        raise KeyError(f"label={label!r} is not a variable of ds ({sorted(ds.data_vars)})")
    fold = stratified_folds(ds[label].values, folds, seed)
    attention, expert, targets = [], [], []
    for k in range(folds):
        held = ds.isel({sample_dim: np.flatnonzero(fold == k)})
        if held.sizes[sample_dim] == 0:
            continue
        model, adapter = train_model(ds.isel({sample_dim: np.flatnonzero(fold != k)}))
        a, e, t = expert_outputs(model, adapter.batches(held, batch_size=64))
        attention.append(a)
        expert.append(e)
        targets.append(t)
    weights = choose_from_outputs(*(np.concatenate(x) for x in (attention, expert, targets)),
                                  candidates=candidates, metric=metric, prefer=prefer)
    weights.table.attrs["folds"] = folds
    return weights


def choose_from_outputs(attention, expert, targets, *, candidates=CANDIDATE_WEIGHTS,
                        metric="accuracy", prefer=EXPERT_ALONE):
    """Choose (attention, expert) weights on the two terms of predictions of samples no model
    trained on (what :func:`choose_expert_weights` does once it has them).

    The candidates are ranked by `metric` (see :func:`choose_expert_weights`). The best one is
    chosen only where it beats `prefer` by more than one standard error of their paired
    difference: per sample, the best candidate's hit minus the preferred one's (accuracy) or
    the preferred one's cross-entropy minus the best one's, whose mean must exceed its sample
    standard deviation over the square root of the number of samples. For accuracy that is
    (b - c)^2 > b + c, where the best one alone is right on b samples and the preferred one
    alone on c: one sample more right and none fewer is exactly one standard error, and does
    not count.

    Parameters
    ----------
    attention, expert : array (S, C)
        Attention's logits and the neighbour path's outputs (:func:`expert_outputs`).
    targets : array of int (S,)
        The class ids.
    candidates, metric, prefer
        As in :func:`choose_expert_weights`.

    Returns
    -------
    ExpertWeights
        Its table's attrs: ``metric``, ``chosen``, ``best`` (the best-ranked candidate),
        ``gain`` (its mean paired gain over `prefer`, 0 where `prefer` is None),
        ``standard_error`` (of that gain) and ``samples``.
    """
    candidates, prefer = _checked_choice(candidates, metric, prefer)
    per_sample = [sample_scores(attention, expert, targets, c) for c in candidates]
    scores = np.array([(np.mean(hits), np.mean(losses)) for hits, losses in per_sample])
    if metric == "accuracy":
        order = np.lexsort((np.arange(len(candidates)), scores[:, 1], -scores[:, 0]))
    else:
        order = np.lexsort((np.arange(len(candidates)), scores[:, 1]))
    best = int(order[0])
    chosen, gain, standard_error = best, 0.0, 0.0
    if prefer is not None:
        simple = candidates.index(prefer)
        column = 0 if metric == "accuracy" else 1
        sign = 1.0 if metric == "accuracy" else -1.0
        d = sign * (per_sample[best][column] - per_sample[simple][column])
        n = len(d)
        gain = float(np.mean(d))
        standard_error = float(np.std(d, ddof=1) / np.sqrt(n)) if n > 1 else np.inf
        # mean > std(ddof=1) / sqrt(n) is sum(d) > 0 and sum(d)^2 > sum(d^2): in that form
        # one hit more of n (exactly one standard error) is not lost to rounding
        if not (np.sum(d) > 0 and np.sum(d) ** 2 > np.sum(d ** 2)):
            chosen = simple
    names = [f"attention {a:g}, expert {e:g}" for a, e in candidates]
    table = xr.Dataset({"accuracy": ("candidate", scores[:, 0]),
                        "cross_entropy": ("candidate", scores[:, 1])},
                       coords={"candidate": names})
    table.attrs.update(metric=metric, chosen=names[chosen], best=names[best], gain=gain,
                       standard_error=standard_error, samples=len(targets))
    return ExpertWeights(candidates[chosen][0], candidates[chosen][1], table)


def _checked_choice(candidates, metric, prefer):
    """The candidates and `prefer` as tuples of floats, with clear errors."""
    if metric not in METRICS:
        raise ValueError(f"metric={metric!r}; expected one of {METRICS}")
    candidates = [tuple(float(w) for w in pair) for pair in candidates]
    if not candidates or any(len(c) != 2 or min(c) < 0 or max(c) == 0 for c in candidates):
        raise ValueError(f"candidates must be (attention, expert) weight pairs, each at least 0 "
                         f"and not both 0; got {candidates!r}")
    if prefer is not None:
        prefer = tuple(float(w) for w in prefer)
        if prefer not in candidates:
            raise ValueError(f"prefer={prefer!r} is not among the candidates {candidates!r}")
    return candidates, prefer


def weigh_experts(model, weights):
    """Scale `model`'s two terms in place: its head (attention's logits) by
    ``weights.attention`` and its neighbour path's map (the baseline's log votes) by
    ``weights.expert``. Returns `model`; ``seqattn.save`` keeps the scaled weights."""
    _check_two_experts(model)
    for module, factor in ((model.head, weights.attention), (model.linear.map, weights.expert)):
        for _, parameter in module.named_parameters():
            parameter.data[...] = parameter.data * factor
    return model


def _check_two_experts(model):
    linear = getattr(model, "linear", None)
    if not hasattr(model, "terms") or getattr(linear, "votes", None) is None:
        raise ValueError("expert weights need a SequenceModel with a neighbour path "
                         "(linear_features='neighbours', started by warm_start(..., "
                         "keep_head=True))")
