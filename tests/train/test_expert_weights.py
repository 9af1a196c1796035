"""The two experts' weights (attention's head, the neighbour path): chosen on out-of-fold
predictions, an expert that is confidently wrong dropped, the weighed model's predictions the
weighed sum of its two terms through seqattn.predict and save / load, clear errors."""
import numpy as np
import pytest
import xarray as xr

import seqattn
from seqattn import load, save
from seqattn.adapters import SignalAdapter
from seqattn.baselines import WarpingNeighbour, warm_start
from seqattn.models import SequenceModel, SequenceModelConfig, build
from seqattn.models.linear_path import residual_parameters
from seqattn.train import (AdamW, CrossEntropyLoss, ExpertWeights, choose_expert_weights, fit,
                           weigh_experts)
from seqattn.train.expert_weights import (CANDIDATE_WEIGHTS, choose_from_outputs,
                                          expert_outputs, stratified_folds, weighed_scores)

RNG = np.random.default_rng(5)
LENGTH = 12
LABELS = np.arange(60) % 3
# each class a bump at its own place, shifted a little per series: the nearest series in warping
# distance classify them
PLACES = np.array([2.0, 6.0, 9.0])[LABELS] + RNG.integers(-1, 2, size=60)
SERIES = (np.exp(-0.5 * (np.arange(LENGTH)[None, :] - PLACES[:, None]) ** 2)
          + 0.1 * RNG.normal(size=(60, LENGTH)))
DS = xr.Dataset({"x": (("sample", "time"), SERIES),
                 "label": ("sample", np.array(["a", "b", "c"])[LABELS])},
                coords={"time": np.arange(LENGTH)})


def two_experts(part, head_scale=None, epochs=0):
    """A model on `part`: attention trained alone for `epochs` (or its head set to large random
    weights, `head_scale`: a confidently wrong expert), then the nearest series in warping
    distance added by warm_start(..., keep_head=True), band and k chosen on the last fifth."""
    n = part.sizes["sample"]
    train, valid = part.isel(sample=slice(0, n - n // 5)), part.isel(sample=slice(n - n // 5, n))
    adapter = SignalAdapter(["x"], 1, hop=1, dtype="float64").fit(train, targets="label")
    model = build(adapter.model_config(task="classification", d_model=8, nhead=2, num_layers=1,
                                       dim_feedforward=8, dtype="float64", linear=True,
                                       linear_features="neighbours", seed=0))
    if epochs:
        fit(model, CrossEntropyLoss(), AdamW(residual_parameters(model), lr=1e-2),
            adapter.batches(train, batch_size=8), epochs=epochs, seed=0, progress=False)
    if head_scale is not None:
        rng = np.random.default_rng(0)
        for _, parameter in model.head.named_parameters():
            parameter.data[...] = head_scale * rng.normal(size=parameter.data.shape)
    expert = WarpingNeighbour(windows=(0.0, 0.2), neighbours=(1, 3)).fit(
        adapter.batches(train, batch_size=16), adapter.batches(valid, batch_size=16),
        n_classes=model.config.out_features)
    return warm_start(model, expert, keep_head=True), adapter


def test_scores_of_a_weighed_sum_by_hand():
    attention = np.array([[2.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    expert = np.log(np.array([[0.2, 0.8], [0.9, 0.1], [0.5, 0.5]]))
    targets = np.array([1, 0, 1])
    accuracy, cross_entropy = weighed_scores(attention, expert, targets, (0.0, 1.0))
    assert accuracy == pytest.approx(2 / 3)  # argmax of an exact tie is the first class
    assert cross_entropy == pytest.approx(-np.mean(np.log([0.8, 0.9, 0.5])))
    logits = 0.5 * attention + expert
    p = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
    assert weighed_scores(attention, expert, targets, (0.5, 1.0))[1] == pytest.approx(
        -np.mean(np.log(p[[0, 1, 2], targets])))


def test_folds_are_stratified_and_seeded():
    labels = np.repeat(["a", "b", "c"], [10, 7, 5])
    fold = stratified_folds(labels, 5, seed=3)
    np.testing.assert_array_equal(fold, stratified_folds(labels, 5, seed=3))
    for c in "abc":
        counts = np.bincount(fold[labels == c], minlength=5)
        assert counts.max() - counts.min() <= 1


def test_a_confidently_wrong_attention_is_dropped_and_the_model_gives_the_neighbours():
    weights = choose_expert_weights(lambda part: two_experts(part, head_scale=50.0), DS,
                                    label="label", folds=3)
    assert (weights.attention, weights.expert) == (0.0, 1.0)
    table = weights.table
    assert list(table.candidate.values) == [f"attention {a:g}, expert {e:g}"
                                            for a, e in CANDIDATE_WEIGHTS]
    assert table.attrs["chosen"] == "attention 0, expert 1" and table.attrs["samples"] == 60
    # the chosen candidate has the highest out-of-fold accuracy, ties to the lower cross-entropy
    best = table.accuracy.values.max()
    assert table.accuracy.sel(candidate="attention 0, expert 1") == best
    tied = table.cross_entropy.values[table.accuracy.values == best]
    assert table.cross_entropy.sel(candidate="attention 0, expert 1") == tied.min()
    # the product with the wrong expert does worse out of fold than the neighbours alone
    assert table.accuracy.sel(candidate="attention 1, expert 0") < best
    model, adapter = two_experts(DS.isel(sample=slice(0, 50)), head_scale=50.0)
    new = DS.isel(sample=slice(50, 60))
    weigh_experts(model, weights)
    predicted = seqattn.predict(model, new, adapter)
    neighbours = WarpingNeighbour(windows=(0.0, 0.2), neighbours=(1, 3)).fit(
        adapter.batches(DS.isel(sample=slice(0, 40)), batch_size=16),
        adapter.batches(DS.isel(sample=slice(40, 50)), batch_size=16), n_classes=3)
    expected = np.exp(neighbours.predict(next(iter(adapter.batches(new, batch_size=10)))))
    np.testing.assert_allclose(predicted["label_probability"].values, expected, rtol=1e-6)


def test_the_weighed_model_predicts_the_weighed_sum_and_saves(tmp_path):
    model, adapter = two_experts(DS.isel(sample=slice(0, 50)), epochs=2)
    new = DS.isel(sample=slice(50, 60))
    attention, expert, targets = expert_outputs(model, adapter.batches(new, batch_size=4))
    assert attention.shape == expert.shape == (10, 3)
    np.testing.assert_array_equal(targets, LABELS[50:60])
    weigh_experts(model, ExpertWeights(0.25, 0.5, xr.Dataset()))
    logits = 0.25 * attention + 0.5 * expert
    expected = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
    predicted = seqattn.predict(model, new, adapter)
    # predict gives float32 probabilities
    np.testing.assert_allclose(predicted["label_probability"].values, expected, rtol=1e-6)
    save(model, tmp_path / "model")
    again = seqattn.predict(load(tmp_path / "model"), new, adapter)
    np.testing.assert_array_equal(again["label_probability"].values,
                                  predicted["label_probability"].values)


def test_choosing_by_cross_entropy():
    weights = choose_expert_weights(lambda part: two_experts(part, epochs=2), DS, label="label",
                                    folds=2, metric="cross_entropy", prefer=None,
                                    candidates=((1.0, 1.0), (0.0, 1.0), (1.0, 0.0)))
    entropy = weights.table.cross_entropy.values
    assert weights.table.attrs["chosen"] == weights.table.candidate.values[np.argmin(entropy)]
    assert weights.table.attrs["best"] == weights.table.attrs["chosen"]
    assert weights.table.attrs["metric"] == "cross_entropy"


def attention_fixes(right, wrong, samples=20):
    """Two experts' terms for `samples` samples of two classes: the expert (log votes 0.8 /
    0.2) right on all but the first `right` samples, where attention's logits (+-20, enough to
    outvote it at every candidate weight above 0) are right; on the next `wrong` samples
    attention is wrong against a right expert; elsewhere attention gives 0 logits."""
    targets = np.arange(samples) % 2
    expert = np.log(np.where(np.eye(2)[targets] == 1, 0.8, 0.2))
    expert[:right] = expert[:right, ::-1]
    attention = np.zeros((samples, 2))
    attention[:right] = 20.0 * (2 * np.eye(2)[targets[:right]] - 1)
    attention[right:right + wrong] = -20.0 * (2 * np.eye(2)[targets[right:right + wrong]] - 1)
    return attention, expert, targets


@pytest.mark.parametrize("right, wrong, kept", [(1, 0, True), (2, 0, False), (3, 1, True),
                                                (4, 1, False)])
def test_the_expert_alone_is_kept_unless_the_best_beats_it_by_more_than_a_standard_error(
        right, wrong, kept):
    # b samples only the best gets right, c only the expert alone: a standard error is
    # sqrt(b + c) samples, so the best is chosen where (b - c)^2 > b + c
    attention, expert, targets = attention_fixes(right, wrong)
    weights = choose_from_outputs(attention, expert, targets)
    table = weights.table
    best = table.accuracy.values.max()
    assert table.accuracy.sel(candidate="attention 0, expert 1") == (20 - right) / 20
    assert table.accuracy.sel(candidate=table.attrs["best"]) == best == (20 - wrong) / 20
    assert table.attrs["gain"] == pytest.approx((right - wrong) / 20)
    d = np.r_[np.ones(right), -np.ones(wrong), np.zeros(20 - right - wrong)]
    assert table.attrs["standard_error"] == pytest.approx(np.std(d, ddof=1) / np.sqrt(20))
    if kept:
        assert (weights.attention, weights.expert) == (0.0, 1.0)
        assert table.attrs["chosen"] == "attention 0, expert 1"
    else:
        assert table.attrs["chosen"] == table.attrs["best"] != "attention 0, expert 1"
        assert weights.attention > 0
    # without a preferred candidate the best one is chosen, however small its lead
    plain = choose_from_outputs(attention, expert, targets, prefer=None)
    assert plain.table.attrs["chosen"] == table.attrs["best"]


def test_the_preferred_candidate_by_cross_entropy():
    attention, expert, targets = attention_fixes(2, 0)
    # the best cross-entropy's lead is the per-sample differences' mean, against their spread
    weights = choose_from_outputs(attention, expert, targets, metric="cross_entropy",
                                  candidates=((1.0, 1.0), (0.0, 1.0)))
    product = weighed_scores(attention, expert, targets, (1.0, 1.0))[1]
    alone = weighed_scores(attention, expert, targets, (0.0, 1.0))[1]
    assert weights.table.attrs["best"] == "attention 1, expert 1"
    assert weights.table.attrs["gain"] == pytest.approx(alone - product)
    assert (weights.attention, weights.expert) == (1.0, 1.0)
    # an expert as good as attention where it is right leaves nothing to gain
    even = choose_from_outputs(np.zeros_like(attention), expert, targets,
                               metric="cross_entropy", candidates=((1.0, 1.0), (0.0, 1.0)))
    assert (even.attention, even.expert) == (0.0, 1.0)


def test_bad_arguments_are_named():
    train = lambda part: two_experts(part)  # noqa: E731
    with pytest.raises(ValueError, match="metric='auroc'"):
        choose_expert_weights(train, DS, label="label", metric="auroc")
    with pytest.raises(ValueError, match="folds must be an int of at least 2"):
        choose_expert_weights(train, DS, label="label", folds=1)
    with pytest.raises(ValueError, match="not both 0"):
        choose_expert_weights(train, DS, label="label", candidates=((0.0, 0.0),))
    with pytest.raises(ValueError, match="each at least 0"):
        choose_expert_weights(train, DS, label="label", candidates=((-1.0, 1.0),))
    with pytest.raises(ValueError, match=r"prefer=\(0.0, 2.0\) is not among the candidates"):
        choose_expert_weights(train, DS, label="label", prefer=(0.0, 2.0))
    with pytest.raises(KeyError, match="label='species'"):
        choose_expert_weights(train, DS, label="species")
    plain = SequenceModel(SequenceModelConfig(in_features=1, out_features=3, d_model=8, nhead=2,
                                              num_layers=1, dim_feedforward=8))
    with pytest.raises(ValueError, match="need a SequenceModel with a neighbour path"):
        weigh_experts(plain, ExpertWeights(1.0, 1.0, xr.Dataset()))
