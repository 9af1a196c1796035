"""The neighbour path that compares by dynamic time warping: a model warm-started from a fitted
WarpingNeighbour gives its probabilities on new series of unequal lengths, a training series is
not its own neighbour, the references are saved with the weights and rebuilt by seqattn.load,
a model with the path as a second expert runs end to end from a SignalAdapter, and a path that
compares the steps of frame tokens gives its baseline's probabilities and saves."""
import importlib.util
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

import seqattn
from baseline_batches import batch
from seqattn import load, save
from seqattn.adapters import SignalAdapter
from seqattn.baselines import NearestNeighbour, WarpingNeighbour, warm_start
from seqattn.baselines.sequences import smoothed_votes
from seqattn.kernels.cpu.warping_distance import warping_distance_matrix
from seqattn.models import SequenceModel, SequenceModelConfig, build
from seqattn.models.linear_path import residual_parameters
from seqattn.models.warping_path import WarpingNeighbourPath
from seqattn.readers import read_series_file

RNG = np.random.default_rng(11)
TINY = dict(d_model=8, nhead=2, num_layers=1, dim_feedforward=8, dtype="float64")
LENGTH = 12
LABELS = np.arange(60) % 3
# each class a bump at its own place, shifted a little per sample: warping aligns the shifts
PLACES = np.array([2.0, 6.0, 9.0])[LABELS] + RNG.integers(-1, 2, size=60)
TOKENS = (np.exp(-0.5 * (np.arange(LENGTH)[None, :] - PLACES[:, None]) ** 2)[..., None]
          + 0.1 * RNG.normal(size=(60, LENGTH, 2)))
PADDING = np.arange(LENGTH)[None, :] >= RNG.integers(9, LENGTH + 1, size=60)[:, None]


def neighbour_model():
    return SequenceModel(SequenceModelConfig(in_features=2, out_features=3, linear=True,
                                             linear_features="neighbours", **TINY))


def fitted(windows=(0.0, 0.1, 1.0), neighbours=(1, 3)):
    """WarpingNeighbour fitted on the first 40 series, band and k chosen on the next 10."""
    train = batch(TOKENS[:40], LABELS[:40], key_padding_mask=PADDING[:40])
    valid = batch(TOKENS[40:50], LABELS[40:50], key_padding_mask=PADDING[40:50])
    return WarpingNeighbour(windows=windows, neighbours=neighbours).fit([train], [valid])


def probabilities(logits):
    return np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)


def test_a_started_model_gives_the_baselines_probabilities_on_new_series():
    baseline = fitted()
    model = warm_start(neighbour_model(), baseline)
    assert isinstance(model.linear, WarpingNeighbourPath)
    new = slice(50, 60)
    expected = baseline.predict(batch(TOKENS[new], LABELS[new], key_padding_mask=PADDING[new]))
    np.testing.assert_allclose(probabilities(model(TOKENS[new], PADDING[new])),
                               np.exp(expected), rtol=1e-6)
    assert model.config.linear_window == baseline.window
    assert model.config.linear_references == 40
    assert model.config.linear_neighbours == baseline.k
    assert model.config.linear_tokens == LENGTH


def test_a_path_keeps_the_validation_references_of_its_baseline():
    train = batch(TOKENS[:40], LABELS[:40], key_padding_mask=PADDING[:40])
    valid = batch(TOKENS[40:50], LABELS[40:50], key_padding_mask=PADDING[40:50])
    baseline = WarpingNeighbour(windows=(0.0, 0.1, 1.0), neighbours=(1, 3),
                                validation_references=True).fit([train], [valid])
    model = warm_start(neighbour_model(), baseline)
    assert model.config.linear_references == 50
    new = slice(50, 60)
    expected = baseline.predict(batch(TOKENS[new], LABELS[new], key_padding_mask=PADDING[new]))
    np.testing.assert_allclose(probabilities(model(TOKENS[new], PADDING[new])),
                               np.exp(expected), rtol=1e-6)


def test_a_training_series_is_scored_by_the_other_references():
    baseline = fitted(windows=(1.0,), neighbours=(1,))
    model = warm_start(neighbour_model(), baseline)
    votes = model.linear.votes(TOKENS[:40], PADDING[:40])
    # by hand: each training series' nearest other training series in warping distance
    lengths = (~PADDING[:40]).sum(axis=1)
    series = (TOKENS[:40] - baseline.mean) / baseline.scale
    distance = warping_distance_matrix(series, lengths, series, lengths, 1.0)
    np.fill_diagonal(distance, np.inf)
    np.testing.assert_allclose(votes, smoothed_votes(LABELS[:40][distance.argmin(1), None], 3),
                               rtol=1e-12)
    assert not np.allclose(votes, smoothed_votes(LABELS[:40, None], 3))


def test_a_new_series_that_copies_a_reference_counts_it_as_the_baseline_does():
    # archives hold test series that duplicate training series (to float32 rounding); at
    # prediction (evaluation mode) such a copy is a neighbour, as the baseline counts it
    baseline = fitted(windows=(1.0,), neighbours=(1,))
    model = warm_start(neighbour_model(), baseline)
    copies = TOKENS[:40] + 1e-7 * RNG.normal(size=TOKENS[:40].shape)
    expected = baseline.predict(batch(copies, LABELS[:40], key_padding_mask=PADDING[:40]))
    with model.mode(False):
        votes = model.linear.votes(copies, PADDING[:40])
        np.testing.assert_allclose(probabilities(model(copies, PADDING[:40])), np.exp(expected),
                                   rtol=1e-6)
    np.testing.assert_allclose(votes, smoothed_votes(LABELS[:40, None], 3), rtol=1e-12)
    # in training mode the same copies are their references, left out
    assert not np.allclose(model.linear.votes(copies, PADDING[:40]), votes)


def test_the_started_model_saves_and_loads(tmp_path):
    model = warm_start(neighbour_model(), fitted())
    model.head.weight.data[...] = RNG.normal(size=model.head.weight.data.shape)
    save(model, tmp_path / "model")
    loaded = load(tmp_path / "model")
    assert isinstance(loaded.linear, WarpingNeighbourPath)
    np.testing.assert_array_equal(loaded(TOKENS, PADDING), model(TOKENS, PADDING))
    np.testing.assert_array_equal(loaded.linear.reference_lengths,
                                  model.linear.reference_lengths)


def test_bad_baselines_and_models_are_named():
    plain = SequenceModel(SequenceModelConfig(in_features=2, out_features=3, **TINY))
    with pytest.raises(ValueError, match="WarpingNeighbour starts a SequenceModel's neighbour"):
        warm_start(plain, fitted())
    with pytest.raises(ValueError, match="WarpingNeighbour is not fitted"):
        warm_start(neighbour_model(), WarpingNeighbour())
    values = batch(TOKENS[:40], LABELS[:40].astype(float))
    regression = WarpingNeighbour().fit([values], [values])
    with pytest.raises(ValueError, match="classes of float tokens"):
        warm_start(neighbour_model(), regression)
    model = warm_start(neighbour_model(), fitted())
    with pytest.raises(ValueError, match=r"references have shape"):
        model.linear.set(np.zeros((3, LENGTH + 1, 2)), np.ones(3), np.zeros(3), np.zeros(2),
                         np.ones(2))


def test_the_path_as_a_second_expert_end_to_end(tmp_path):
    """SignalAdapter -> model with a neighbour path -> fit of attention alone -> warm_start(WarpingNeighbour,
    keep_head=True) -> seqattn.predict on the Dataset -> save / load: the same predictions,
    the logits attention's plus the votes' log probabilities."""
    x = np.where(PADDING, np.nan, TOKENS[..., 0])
    ds = xr.Dataset({"x": (("sample", "time"), x),
                     "label": ("sample", np.array(["a", "b", "c"])[LABELS])},
                    coords={"time": np.arange(LENGTH)})
    train, valid = ds.isel(sample=slice(0, 40)), ds.isel(sample=slice(40, 50))
    adapter = SignalAdapter(["x"], 1, hop=1).fit(train, targets="label")
    model = build(adapter.model_config(task="classification", d_model=8, nhead=2, num_layers=1,
                                       dim_feedforward=8, linear=True,
                                       linear_features="neighbours"))
    seqattn.train.fit(model, seqattn.train.CrossEntropyLoss(),
                      seqattn.train.AdamW(residual_parameters(model), lr=1e-2),
                      adapter.batches(train, batch_size=8),
                      epochs=2, progress=False)
    tokens = next(iter(adapter.batches(ds.isel(sample=slice(50, 60)), batch_size=10)))
    alone = np.asarray(model(tokens.tokens, tokens.key_padding_mask))
    expert = WarpingNeighbour().fit(adapter.batches(train, batch_size=8),
                                    adapter.batches(valid, batch_size=8))
    warm_start(model, expert, keep_head=True)
    np.testing.assert_allclose(np.asarray(model(tokens.tokens, tokens.key_padding_mask)),
                               alone + expert.predict(tokens), rtol=1e-5, atol=1e-5)
    predicted = seqattn.predict(model, ds.isel(sample=slice(50, 60)), adapter)
    save(model, tmp_path / "model")
    again = seqattn.predict(load(tmp_path / "model"), ds.isel(sample=slice(50, 60)), adapter)
    np.testing.assert_array_equal(again["label"].values, predicted["label"].values)
    assert (predicted["label"].values == ds["label"].values[50:60]).mean() >= 0.8
    # the Euclidean neighbours' path, the other kind, is rebuilt as before
    other = warm_start(model, NearestNeighbour().fit(adapter.batches(train, batch_size=8),
                                                     adapter.batches(valid, batch_size=8)))
    assert other.config.linear_window is None
    assert not isinstance(other.linear, WarpingNeighbourPath)




def test_a_path_that_compares_the_steps_of_frames_gives_the_baseline_and_saves(tmp_path):
    # JapaneseVowels' frames of 8 steps every 4: the baseline compares their steps (its
    # validation says so, tests/baselines/test_warping.py), and so does the model's path
    sktime = importlib.util.find_spec("sktime")  # its data files; the tests install it
    folder = Path(sktime.submodule_search_locations[0]) / "datasets" / "data" / "JapaneseVowels"
    ds = read_series_file(folder / "JapaneseVowels_TRAIN.ts")
    train, valid, new = (ds.isel(sample=slice(k, None, 5)) for k in (0, 1, 2))
    adapter = SignalAdapter(["x"], 8, hop=4, channel_dims=("channel",),
                            per_dims=("channel",)).fit(train, targets="label")
    baseline = WarpingNeighbour(steps=adapter.step_features()).fit(
        adapter.batches(train, batch_size=64), adapter.batches(valid, batch_size=64))
    assert baseline.chosen["view"] == "steps"
    model = build(adapter.model_config(task="classification", d_model=8, nhead=2, num_layers=1,
                                       dim_feedforward=8, linear=True,
                                       linear_features="neighbours"))
    warm_start(model, baseline)
    assert isinstance(model.linear, WarpingNeighbourPath)
    assert model.config.linear_steps == (4, 12)
    tokens = next(iter(adapter.batches(new, batch_size=64)))
    inputs = (tokens.tokens, tokens.key_padding_mask)
    np.testing.assert_allclose(probabilities(model(*inputs, coords=tokens.coords)),
                               np.exp(baseline.predict(tokens)), rtol=1e-5)
    save(model, tmp_path / "model")
    loaded = load(tmp_path / "model")
    np.testing.assert_array_equal(loaded.linear.steps, adapter.step_features())
    np.testing.assert_array_equal(loaded(*inputs, coords=tokens.coords),
                                  model(*inputs, coords=tokens.coords))
    # the series' own steps come from the adapter's count, never from the values
    with pytest.raises(ValueError, match=r"needs each token's coords\['steps'\]"):
        model(*inputs)
    # seqattn.predict passes the batches' coords: the model predicts as the expert does
    predicted = seqattn.predict(loaded, new, adapter)
    np.testing.assert_array_equal(predicted["label"].values,
                                  np.asarray(adapter.target_specs[0].classes)[
                                      baseline.predict(tokens).argmax(axis=1)])
    with pytest.raises(ValueError, match=r"this warping path compares steps of shape \(4, 12\)"):
        model.linear.set(baseline.X, baseline.lengths, baseline.Y, baseline.mean,
                         baseline.scale)
