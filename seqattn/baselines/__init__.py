"""Strong simple baselines on exactly the inputs a model sees: fitted on the adapter's training
batches, their one choice (a penalty, k, the number of harmonics) made on validation batches.

::

    train = adapter.batches(ds, where=train_part)
    valid = adapter.batches(ds, where=valid_part)
    fitted = [b.fit(train, valid) for b in seqattn.baselines.for_batch(next(iter(train)))]
    seqattn.evaluate(model, ds, adapter, where=test_part, baselines=fitted)

Families (one module each), by the task the targets describe (:mod:`.base`):

* forecasting (value targets per token with a ``lead`` coordinate): :class:`Persistence`,
  :class:`Climatology` (with a calendar: a ``time`` coordinate), :class:`LeadRidge`, and
  :class:`SeasonalPersistence` (a day back; it reads the layout of the inputs from the
  :class:`~seqattn.adapters.ForecastWindows` that made the batches);
* values or classes per token: :class:`TokenFeatures` (ridge / logistic on each token's inputs);
* graph nodes (per-token classes or values with ``structure.pair_codes``):
  :class:`NodeFeatures`, and for classes :class:`LabelPropagation`;
* per sample: :class:`PooledFeatures` (ridge / logistic on pooled inputs),
  :class:`NearestNeighbour`, and given by name, :class:`WarpingNeighbour` (dynamic time
  warping, for series); sequences of one length (a library of variants):
  :class:`PositionFeatures` (additive, and pairwise where its columns fit); DNA bases (or
  a k-mer model's ids, the bases read back from them): :class:`KmerCounts`, plain and
  strand-symmetric; structures with atom types: :class:`ElementCounts`.

scikit-learn (the ``baselines`` extra) serves logistic regression and the neighbour search.
"""
import numpy as np

from ..adapters.forecast import ForecastWindows
from .base import Baseline, Layout, layout_of
from .dna import KmerCounts, bases
from .forecasting import Climatology, LeadRidge, Persistence
from .linear import LinearBaseline
from .nodes import LabelPropagation, NodeFeatures
from .positions import MAX_FEATURES, PositionFeatures, fixed_length, position_width
from .seasonal import SeasonalPersistence
from .sequences import STATISTICS, NearestNeighbour, PooledFeatures
from .structures import ElementCounts
from .tokens import TokenFeatures
from .warping import WarpingNeighbour


def _reads_bases(batch):
    """Whether `batch`'s tokens are single-base ids (GenomeAdapter(k=1, tokens="ids"))."""
    tokens = np.asarray(batch.tokens)
    if tokens.dtype.kind not in "iu" or tokens.ndim != 2 or tokens.max(initial=0) > 4:
        return False
    return bool((bases(batch) >= 0).any())


def for_batch(batch, adapter=None):
    """Unfitted baselines that fit the task of `batch`, the families that
    :func:`seqattn.evaluate` fits with ``baselines=True``.

    Parameters
    ----------
    batch : seqattn.data.Batch
        A training batch with targets; its targets' layout (:func:`layout_of`), coordinates
        (``lead``, ``time``), structure (``pair_codes``, ``types``) and tokens decide the
        families (see the module docstring).
    adapter : object, optional
        The adapter that made `batch`. A :class:`~seqattn.adapters.ForecastWindows` on a
        time axis whose steps are shorter than a day and divide it, with a history that
        reaches a day back from every lead's valid time, adds :class:`SeasonalPersistence`;
        a :class:`~seqattn.adapters.GenomeAdapter` of k-mer ids adds :class:`KmerCounts` on
        the bases they hold (plain and strand-symmetric, as on single bases).

    Returns
    -------
    list of Baseline
        The baselines, not yet fitted.
    """
    layout = layout_of(batch)
    structure = batch.structure
    if layout.per_token:
        if getattr(structure, "pair_codes", None) is not None:
            return [NodeFeatures(), LabelPropagation()] if layout.classes else [NodeFeatures()]
        if not layout.classes and "lead" in batch.coords:
            found = [Persistence()]
            if "time" in batch.coords:
                found.append(Climatology())
                found += _seasonal(adapter)
            return found + [LeadRidge()]
        return [TokenFeatures()]
    found = [PooledFeatures(), NearestNeighbour()]
    if fixed_length(batch) and getattr(structure, "types", None) is None:
        found += [PositionFeatures(pairwise=pairwise) for pairwise in (False, True)
                  if position_width(batch, pairwise) <= MAX_FEATURES]
    if getattr(structure, "types", None) is not None:
        found.append(ElementCounts())
    if _kmer_ids_of(adapter):
        reads = {"token_k": adapter.k, "token_stride": adapter.stride}
    elif _reads_bases(batch):
        reads = {}
    else:
        return found
    # either strand may be read: the counts plain and strand-symmetric
    return found + [KmerCounts(strand_symmetric=s, **reads) for s in (False, True)]


def _kmer_ids_of(adapter):
    """Whether `adapter` is a GenomeAdapter making k-mer ids (k > 1)."""
    from ..adapters import GenomeAdapter

    return isinstance(adapter, GenomeAdapter) and adapter.tokens == "ids" and adapter.k > 1


def _seasonal(adapter):
    """[SeasonalPersistence a day back] where `adapter` is ForecastWindows whose inputs reach
    a day back (on a time axis of whole steps per day), else []."""
    if not isinstance(adapter, ForecastWindows):
        return []
    daily = SeasonalPersistence(adapter)
    try:
        reaches = daily.period_steps() > 1 and daily.reaches()
    except ValueError:  # a numeric axis or a step that does not divide a day
        return []
    return [daily] if reaches else []


def _lead_maps(baseline):
    """{lead: (weight, bias)} of a fitted LeadRidge. Flattened: on the flattened inputs and the
    hour's sine and cosine once (LeadRidge puts them beside every token: their weights add up).
    Per token: on the token's inputs and the hour's sine and cosine (zero weights where the
    ridge had no hour)."""
    maps = {}
    for lead, fit in baseline.models.items():
        weight, bias = fit.raw()
        extra = 2 if baseline.time_of_day and baseline.hour_inputs else 0
        if not baseline.flatten:
            maps[lead] = (np.concatenate([weight, np.zeros((len(weight), 2 - extra))], axis=1),
                          bias)
            continue
        per_token = weight.reshape(len(weight), baseline.n_tokens, -1)
        hour = per_token[:, :, per_token.shape[2] - extra:].sum(axis=1) if extra \
            else np.zeros((len(weight), 2))
        values = per_token[:, :, :per_token.shape[2] - extra].reshape(len(weight), -1)
        maps[lead] = (np.concatenate([values, hour], axis=1), bias)
    return maps


def _start_from_lead_ridge(model, baseline):
    from ..models.linear_path import LeadLinearPath, LeadTokenLinearPath, start_from_leads

    path = getattr(model, "linear", None)
    if baseline.flatten and isinstance(path, LeadTokenLinearPath):
        raise ValueError("this LeadRidge regressed the flattened inputs; the model's lead linear "
                         "path maps each token's own inputs: build it with linear_tokens=N "
                         f"(N = {baseline.n_tokens}), or fit LeadRidge with a smaller "
                         "max_features")
    if not baseline.flatten and isinstance(path, LeadLinearPath):
        raise ValueError("this LeadRidge regressed per token (its inputs passed max_features); "
                         "the model's lead linear path maps the flattened inputs: build it "
                         "without linear_tokens")
    start_from_leads(model, _lead_maps(baseline))


def _path_features(baseline):
    """The SequenceModelConfig ``linear_features`` that reads what `baseline` fits on."""
    if isinstance(baseline, PositionFeatures):
        return baseline.kind
    if baseline.statistics == ("mean",):
        return "mean"
    if baseline.statistics == STATISTICS and baseline.vocab_size is None:
        return "pooled"
    raise ValueError(f"baseline pools statistics={baseline.statistics!r}"
                     f"{' of ids' if baseline.vocab_size is not None else ''}; a linear path "
                     "reads the mean (linear_features='mean') or, of float tokens, all of "
                     f"{STATISTICS} (linear_features='pooled')")


def _checked_neighbour_start(model, baseline):
    """The model's config, once `model` has a neighbour path that fitted `baseline` (a
    NearestNeighbour or WarpingNeighbour) of classes of float tokens can start."""
    kind = type(baseline).__name__
    config = getattr(model, "config", None)
    if getattr(config, "linear_features", None) != "neighbours" or not config.linear:
        raise ValueError(f"a {kind} starts a SequenceModel's neighbour path: build it "
                         "with linear=True, linear_features='neighbours'")
    if baseline.chosen is None:
        raise ValueError(f"the {kind} is not fitted: call its fit first")
    if not baseline.layout.classes or getattr(baseline, "vocab_size", None) is not None:
        raise ValueError(f"the neighbour path takes a {kind} fitted on classes of float tokens")
    if baseline.layout.n_outputs != config.out_features:
        raise ValueError(f"the {kind} votes for {baseline.layout.n_outputs} classes; "
                         f"the model has {config.out_features} outputs")
    return config


def _start_from_warping_neighbours(model, baseline):
    """warm_start's work for a WarpingNeighbour: checked, then the model's neighbour path
    compares by warping distance and holds its references
    (:meth:`seqattn.models.SequenceModel.start_from_warping_neighbours`)."""
    _checked_neighbour_start(model, baseline)
    steps = baseline.steps if baseline.view == "steps" else None
    model.start_from_warping_neighbours(baseline.X, baseline.lengths, baseline.Y,
                                        baseline.mean, baseline.scale, baseline.k,
                                        baseline.window, steps)


def _start_from_neighbours(model, baseline):
    """warm_start's work for a NearestNeighbour: checked, then the model's neighbour path holds
    its references (:meth:`seqattn.models.SequenceModel.start_from_neighbours`)."""
    config = _checked_neighbour_start(model, baseline)
    n_tokens = (None if baseline.flat_width is None
                else baseline.flat_width // config.in_features)
    model.start_from_neighbours(baseline.X, baseline.Y, baseline.mean, baseline.scale,
                                baseline.k, n_tokens)


def warm_start(model, baseline, keep_head=False):
    """Start `model`'s linear path at the fitted linear `baseline` (TokenFeatures for a
    TokenModel; for a SequenceModel PooledFeatures or PositionFeatures, read by the path of
    the same ``linear_features``; LeadRidge for a TokenModel with ``linear_leads``: with
    ``linear_tokens`` where the ridge flattened the inputs, without where it regressed per
    token), or a SequenceModel's neighbour path at a fitted NearestNeighbour or
    WarpingNeighbour of classes (``linear_features="neighbours"``), with the head zeroed: the model predicts what the
    baseline does and training learns the residual. With `keep_head` the head stays as it
    is, so that a model trained with its path at zero (``AdamW(residual_parameters(model))``)
    adds the baseline's outputs to its own: for classes, the product of the two as experts.

    Parameters
    ----------
    model : seqattn.models.TokenModel or seqattn.models.SequenceModel
        A model built with a linear path (``linear=True``, or ``linear_leads``) whose inputs
        are the baseline's features.
    baseline : seqattn.baselines.Baseline
        The fitted baseline: a TokenFeatures, PooledFeatures, PositionFeatures, KmerCounts,
        LeadRidge or NearestNeighbour; a PooledFeatures pools the mean only
        (``statistics=("mean",)``, ``linear_features="mean"``) or, of float tokens, all its
        statistics
        (``linear_features="pooled"``); a PositionFeatures is read by
        ``linear_features="additive"`` or ``"pairwise"`` as it is; a KmerCounts fitted on the
        model's own overlapping k-mer ids (``token_k``, k at most ``token_k``) by the path on
        their frequencies (:meth:`KmerCounts.on_token_frequencies`); a NearestNeighbour
        fitted on classes of float tokens by the neighbour path, which takes its references,
        k and standardization (:mod:`seqattn.models.neighbour_path`); a WarpingNeighbour the
        same way, the path then comparing by dynamic time warping within its band
        (:mod:`seqattn.models.warping_path`).
    keep_head : bool, default False
        Keep the head's weights instead of zeroing them.

    Returns
    -------
    seqattn.models.TokenModel or seqattn.models.SequenceModel
        `model` itself, its linear path set and its head zeroed (or kept).
    """
    head = model.head.state_dict() if keep_head else None
    _start_path(model, baseline)
    if keep_head:
        model.head.load_state_dict(head)
    return model


def _start_path(model, baseline):
    """warm_start's work: the path set, the head zeroed."""
    if isinstance(baseline, LeadRidge) and baseline.chosen is not None:
        _start_from_lead_ridge(model, baseline)
        return
    if isinstance(baseline, NearestNeighbour):
        _start_from_neighbours(model, baseline)
        return
    if isinstance(baseline, WarpingNeighbour):
        _start_from_warping_neighbours(model, baseline)
        return
    if isinstance(baseline, KmerCounts):
        has = getattr(getattr(model, "config", None), "linear_features", "mean")
        if has != "mean" or getattr(model.config, "vocab_size", None) is None:
            raise ValueError("a KmerCounts starts the linear path on the frequencies of k-mer "
                             "ids: build the model on GenomeAdapter(tokens='ids') batches with "
                             "linear=True")
        model.start_from_linear(*baseline.on_token_frequencies())
        return
    if not isinstance(baseline, LinearBaseline) or baseline.chosen is None:
        raise ValueError(f"baseline is {baseline!r}; expected a fitted TokenFeatures, "
                         "PooledFeatures, PositionFeatures, KmerCounts, LeadRidge, "
                         "NearestNeighbour or WarpingNeighbour")
    if not isinstance(baseline, (TokenFeatures, PooledFeatures, PositionFeatures)):
        raise ValueError(f"baseline is a {type(baseline).__name__}; its features are not the "
                         "linear path's: use TokenFeatures, PooledFeatures or PositionFeatures")
    if not isinstance(baseline, TokenFeatures):
        wanted = _path_features(baseline)
        has = getattr(getattr(model, "config", None), "linear_features", "mean")
        if has != wanted:
            raise ValueError(f"baseline is a {baseline.name} on the features "
                             f"linear_features={wanted!r} reads, but the model's linear path has "
                             f"linear_features={has!r}: build it with linear_features={wanted!r}"
                             + (" or fit PooledFeatures(statistics=('mean',))"
                                if isinstance(baseline, PooledFeatures) and has == "mean"
                                else ""))
    model.start_from_linear(*baseline.model.raw())


__all__ = ["Baseline", "Climatology", "ElementCounts", "KmerCounts", "LabelPropagation",
           "Layout", "LeadRidge", "LinearBaseline", "NearestNeighbour", "NodeFeatures",
           "PooledFeatures", "Persistence", "PositionFeatures", "SeasonalPersistence",
           "TokenFeatures", "WarpingNeighbour", "for_batch",
           "layout_of", "warm_start"]
