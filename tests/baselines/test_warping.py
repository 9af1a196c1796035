"""WarpingNeighbour: the dynamic time warping distance against a plain Python table, its band
and k chosen on validation, the baseline through seqattn.evaluate on a SignalAdapter's series of
unequal lengths, and the steps that frame tokens hold as a second view chosen on validation."""
import dataclasses
import importlib.util
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

import seqattn
from baseline_batches import batch
from seqattn.adapters import SignalAdapter
from seqattn.baselines import PooledFeatures, WarpingNeighbour
from seqattn.baselines import warping
from seqattn.kernels.cpu.warping_distance import warping_distance_matrix
from seqattn.baselines.sequences import smoothed_votes
from seqattn.data.targets import MISSING_CLASS
from seqattn.models import build
from seqattn.readers import read_series_file

LENGTH = 40


def reference_distance(a, b, band):
    """DTW of a (n, F) and b (m, F): the whole (n + 1, m + 1) table, cells off the band
    |i - j| <= max(floor(band * max(n, m)), |n - m|) unreachable."""
    n, m = len(a), len(b)
    w = max(int(np.floor(band * max(n, m))), abs(n - m))
    table = np.full((n + 1, m + 1), np.inf)
    table[0, 0] = 0.0
    for i in range(1, n + 1):
        for j in range(1, m + 1):
            if abs(i - j) <= w:
                table[i, j] = np.sum((a[i - 1] - b[j - 1]) ** 2) + min(
                    table[i - 1, j], table[i, j - 1], table[i - 1, j - 1])
    return table[n, m]


@pytest.mark.parametrize("band", [0.0, 0.1, 0.25, 1.0])
def test_distances_match_the_full_table_on_unequal_lengths(band):
    rng = np.random.default_rng(0)
    queries, references = rng.normal(size=(4, 9, 3)), rng.normal(size=(5, 12, 3))
    query_lengths, reference_lengths = np.array([9, 5, 0, 7]), np.array([12, 3, 9, 0, 7])
    got = warping_distance_matrix(queries, query_lengths, references, reference_lengths, band)
    want = [[reference_distance(q[:n], r[:m], band)
             for r, m in zip(references, reference_lengths)]
            for q, n in zip(queries, query_lengths)]
    np.testing.assert_allclose(got, want, rtol=1e-12)
    # the empty query is 0 from the empty reference and infinitely far from the others
    assert got[2, 3] == 0.0 and np.isinf(got[2, [0, 1, 2, 4]]).all()


def bump(centre, length=LENGTH, width=1.5):
    return np.exp(-0.5 * ((np.arange(length) - centre) / width) ** 2)


def test_a_shifted_copy_is_at_distance_zero_within_a_wide_enough_band():
    a, b = bump(12)[:, None], bump(16)[:, None]
    lengths = np.array([LENGTH])

    def distance(band):
        return warping_distance_matrix(a[None], lengths, b[None], lengths, band)[0, 0]

    euclidean = np.sum((a - b) ** 2)
    assert euclidean > 1.0
    assert distance(0.0) == pytest.approx(euclidean, rel=1e-12)  # band 0: matched in step
    assert 0.0 < distance(0.05) < euclidean  # 2 steps of the 4 the shift needs
    assert distance(0.1) == pytest.approx(0.0, abs=1e-9)
    assert distance(1.0) == pytest.approx(0.0, abs=1e-9)


def bumps(n, seed, by_shape, cut=False):
    """n series of LENGTH steps (with `cut`, the tail of each from 30 on cut at random: NaN),
    class 0 or 1 alternately, in noise. by_shape: a bump then a dip 5 steps later (class 0), or the dip
    first (class 1), anywhere, so that only warping sees the class; else one bump early (0) or
    late (1)."""
    rng = np.random.default_rng(seed)
    labels = np.arange(n) % 2
    x = np.empty((n, LENGTH))
    for i, label in enumerate(labels):
        if by_shape:
            at = rng.uniform(4, 24)
            x[i] = (1 - 2 * label) * (bump(at) - bump(at + 5))
        else:
            x[i] = bump(rng.uniform(5, 9) + 16 * label)
        x[i] += 0.05 * rng.normal(size=LENGTH)
        if cut:
            x[i, rng.integers(30, LENGTH + 1):] = np.nan
    return x, labels


def series_batch(x, labels):
    missing = np.isnan(x)
    return batch(np.where(missing, 0.0, x)[..., None], labels, key_padding_mask=missing)


@pytest.mark.parametrize("by_shape", [True, False])
def test_the_band_is_chosen_on_validation(by_shape):
    """Series of one length. Classes told by shape: no band beats matching in step; told by
    position: warping without a band makes early and late bumps alike, and a
    narrow band wins."""
    train, valid, test = (series_batch(*bumps(n, seed, by_shape))
                          for n, seed in ((16, 1), (20, 2), (20, 3)))
    fitted = WarpingNeighbour().fit([train], [valid])
    accuracy = fitted.chosen["validation_accuracy"]
    no_band, in_step = accuracy["no window, k=1"], accuracy["window 0 %, k=1"]
    if by_shape:
        assert fitted.window > 0.0 and no_band > in_step, accuracy
    else:
        assert fitted.window < 1.0 and in_step > no_band, accuracy
    assert accuracy[f"{warping._window_text(fitted.window)}, k={fitted.k}"] == max(
        accuracy.values())
    assert np.mean(fitted.predict(test).argmax(-1) == test.targets) >= 0.9
    assert fitted.name == f"{fitted.k}-nearest neighbour (DTW, " \
        f"{'no window' if fitted.window == 1.0 else f'window {100 * fitted.window:g} %'})"


def test_validation_series_join_the_references_after_the_choice():
    x, labels = bumps(44, 5, by_shape=True, cut=True)
    labels[25] = MISSING_CLASS  # a validation series without a label is no reference
    train, valid, test = (series_batch(x[part], labels[part])
                          for part in (slice(0, 16), slice(16, 36), slice(36, 44)))
    plain = WarpingNeighbour().fit([train], [valid])
    joined = WarpingNeighbour(validation_references=True).fit([train], [valid])
    # the same choice, made on validation before the validation series joined
    for key in ("window", "k", "validation_accuracy", "validation_log_loss"):
        assert joined.chosen[key] == plain.chosen[key]
    assert joined.chosen["references"] == len(joined.X) == 16 + 19
    np.testing.assert_array_equal(joined.Y, np.delete(labels[:36], 25))
    # the validation series are standardized with the training series' statistics
    assert (joined.mean, joined.scale) == (plain.mean, plain.scale)
    X, lengths = warping.series(test)
    distances = warping_distance_matrix((X - joined.mean) / joined.scale, lengths, joined.X,
                                        joined.lengths, joined.window)
    assert distances.shape == (8, 35) and np.isfinite(distances).all()
    nearest = np.argsort(distances, axis=1, kind="stable")[:, :joined.k]
    np.testing.assert_allclose(joined.predict(test), smoothed_votes(joined.Y[nearest], 2),
                               rtol=1e-6)
    # a validation series is now at distance 0 from a reference: its own
    X, lengths = warping.series(series_batch(x[16:20], labels[16:20]))
    own = warping_distance_matrix((X - joined.mean) / joined.scale, lengths, joined.X,
                                  joined.lengths, joined.window)
    np.testing.assert_allclose(own[np.arange(4), 16 + np.arange(4)], 0.0, atol=1e-9)


def test_padding_anywhere_is_left_out_and_the_order_kept():
    tokens = np.arange(10, dtype=float).reshape(1, 5, 2)
    padded = np.array([[False, True, False, True, False]])
    x, lengths = warping.series(batch(tokens, [0], key_padding_mask=padded))
    assert lengths.tolist() == [3]
    np.testing.assert_array_equal(x[0, :3], tokens[0, [0, 2, 4]])


def signal_dataset(n=60):
    """bumps by shape as a Dataset (sample, time), NaN-padded, labels as strings."""
    x, labels = bumps(n, 4, by_shape=True, cut=True)
    return xr.Dataset({"x": (("sample", "time"), x),
                       "label": ("sample", np.array(["one", "two"], dtype=object)[labels])},
                      coords={"time": np.arange(LENGTH) / 100.0, "sample": np.arange(n)})


TRAIN, VALID, TEST = ({"sample": slice(a, b)} for a, b in ((0, 20), (20, 40), (40, 60)))


def test_evaluate_scores_it_on_the_signal_adapters_steps():
    ds = signal_dataset()
    adapter = SignalAdapter(["x"], 1, hop=1).fit(ds.isel(TRAIN), targets="label")
    model = build(adapter.model_config(task="classification", d_model=8, nhead=2, num_layers=1,
                                       dim_feedforward=8))
    scores = seqattn.evaluate(model, ds, adapter, where=TEST, train=TRAIN, validation=VALID,
                              baselines=[PooledFeatures(), WarpingNeighbour()])
    names = [str(p) for p in scores.predictor.values]
    dtw = [p for p in names if "(DTW, " in p]
    assert len(dtw) == 1, names
    # the same fit by hand, on the adapter's batches, predicts the same classes
    by_hand = WarpingNeighbour().fit(adapter.batches(ds, where=TRAIN),
                                     adapter.batches(ds, where=VALID))
    assert by_hand.name == dtw[0]
    test = list(adapter.batches(ds, where=TEST))
    hand_accuracy = np.mean(np.concatenate(
        [by_hand.predict(b).argmax(-1) == b.targets for b in test]))
    assert float(scores.accuracy.sel(predictor=dtw[0])) == pytest.approx(hand_accuracy)
    assert hand_accuracy >= 0.9
    assert str(scores.chosen.sel(predictor=dtw[0]).item()).startswith('{"window"')


@pytest.mark.parametrize("options, message", [
    (dict(windows=(0.1, 1.5)), "windows="),
    (dict(windows=()), "windows="),
    (dict(neighbours=(0, 1)), "neighbours="),
])
def test_bad_options_are_named(options, message):
    with pytest.raises(ValueError, match=message):
        WarpingNeighbour(**options)


def test_bad_inputs_are_named():
    x, labels = bumps(8, 0, by_shape=True, cut=True)
    series = series_batch(x, labels)
    ids = batch(np.random.default_rng(0).integers(0, 4, (8, 6)), labels)
    with pytest.raises(ValueError, match="integer ids"):
        WarpingNeighbour().fit([ids], [ids])
    per_token = batch(np.zeros((8, 6, 1)), np.zeros((8, 6), int))
    with pytest.raises(ValueError, match="per token"):
        WarpingNeighbour().fit([per_token], [per_token])
    fitted = WarpingNeighbour().fit([series], [series])
    with pytest.raises(ValueError, match="2 channels"):
        fitted.predict(batch(np.zeros((2, 5, 2)), [0, 1]))
    lengths = np.array([3])
    with pytest.raises(ValueError, match="band="):
        warping_distance_matrix(np.zeros((1, 3, 1)), lengths, np.zeros((1, 3, 1)), lengths, 2.0)
    with pytest.raises(ValueError, match="query_lengths"):
        warping_distance_matrix(np.zeros((1, 3, 1)), np.array([4]), np.zeros((1, 3, 1)),
                                lengths, 0.1)


def alternating_dataset(n=90, length=24):
    """Two classes of 1-step detail (+-1 every step, or every two steps), each series shifted by
    0-3 steps, with noise: (sample, time), labels as strings."""
    rng = np.random.default_rng(2)
    labels = np.arange(n) % 2
    t = np.arange(length + 4)
    patterns = [np.where(t % 2 == 0, 1.0, -1.0), np.where((t // 2) % 2 == 0, 1.0, -1.0)]
    shift = rng.integers(0, 4, size=n)
    x = (np.stack([patterns[c][s:s + length] for c, s in zip(labels, shift)])
         + 0.3 * rng.normal(size=(n, length)))
    return xr.Dataset({"x": (("sample", "time"), x),
                       "label": ("sample", np.array(["a", "b"])[labels])})


def test_the_steps_of_frames_score_as_the_steps_themselves():
    # frames of 4 steps every 4 hold every step once: the steps view of each band and k scores
    # on validation exactly as an adapter of one step per token (the same statistics) does
    ds = alternating_dataset()
    parts = [ds.isel(sample=slice(a, b)) for a, b in ((0, 30), (30, 60))]
    frames = SignalAdapter(["x"], 4, hop=4).fit(parts[0], targets="label")
    both = WarpingNeighbour(steps=frames.step_features()).fit(
        *(frames.batches(p, batch_size=64) for p in parts))
    steps = SignalAdapter(["x"], 1, hop=1, validity_channel=False).fit(parts[0], targets="label")
    alone = WarpingNeighbour().fit(*(steps.batches(p, batch_size=64) for p in parts))
    for table in ("validation_accuracy", "validation_log_loss"):
        on_steps = {k[len("on the steps, "):]: v for k, v in both.chosen[table].items()
                    if k.startswith("on the steps, ")}
        assert on_steps.keys() == alone.chosen[table].keys()
        np.testing.assert_allclose(list(on_steps.values()),
                                   list(alone.chosen[table].values()), rtol=1e-9)


def test_the_steps_are_chosen_where_they_score_better_on_validation():
    # JapaneseVowels' frames of 8 steps every 4 (the speaker example's): their steps classify
    # the validation fifth better than the frames do, and are compared from then on
    sktime = importlib.util.find_spec("sktime")  # its data files; the tests install it
    folder = Path(sktime.submodule_search_locations[0]) / "datasets" / "data" / "JapaneseVowels"
    ds = read_series_file(folder / "JapaneseVowels_TRAIN.ts")
    train, valid = ds.isel(sample=slice(0, None, 5)), ds.isel(sample=slice(1, None, 5))
    frames = SignalAdapter(["x"], 8, hop=4, channel_dims=("channel",),
                           per_dims=("channel",)).fit(train, targets="label")
    fitted = WarpingNeighbour(steps=frames.step_features()).fit(
        frames.batches(train, batch_size=64), frames.batches(valid, batch_size=64))
    accuracy = fitted.chosen["validation_accuracy"]
    on_steps = max(v for k, v in accuracy.items() if k.startswith("on the steps, "))
    on_frames = max(v for k, v in accuracy.items() if not k.startswith("on the steps, "))
    assert on_steps > on_frames and fitted.chosen["view"] == "steps"
    assert fitted.name.startswith(f"{fitted.k}-nearest neighbour (DTW, on the steps, ")
    # predictions compare the new series' steps too
    batch = next(iter(frames.batches(ds.isel(sample=slice(2, None, 5)), batch_size=64)))
    X, lengths = warping.as_steps(*warping.series(batch), frames.step_features(),
                                  warping.step_counts(batch))
    distances = warping_distance_matrix((X - fitted.mean) / fitted.scale, lengths, fitted.X,
                                        fitted.lengths, fitted.window)
    nearest = np.argsort(distances, axis=1, kind="stable")[:, :fitted.k]
    np.testing.assert_allclose(fitted.predict(batch),
                               smoothed_votes(fitted.Y[nearest], 9), rtol=1e-6)


def test_a_series_that_ends_inside_its_last_frame_is_its_own_steps():
    # frames of 8 steps every 4 in a batch padded to 24 steps: a series of 13 ends in its
    # frame from step 12, whose first 4 steps hold 1 step of it and 3 empty ones (written 0)
    lengths = np.array([24, 13, 14, 15, 16])
    x = np.random.default_rng(3).normal(size=(5, 24))
    x[np.arange(24) >= lengths[:, None]] = np.nan
    ds = xr.Dataset({"x": (("sample", "time"), x), "label": ("sample", list("ababa"))})
    frames = SignalAdapter(["x"], 8, hop=4).fit(ds, targets="label")
    X, n = steps_of(frames, ds)
    # the longest series: 5 frames, their first 4 steps each (the last frame's rest unread)
    assert n.tolist() == [20, 13, 14, 15, 16]
    normalized = frames.normalizer.apply(ds)["x"].values
    for i, length in enumerate(n):
        np.testing.assert_allclose(X[i, :length, 0], normalized[i, :length], rtol=1e-6)


def steps_of(frames, ds):
    """The steps view of `ds`'s samples as frames of the fitted adapter `frames`, one batch."""
    batch = next(iter(frames.batches(ds, batch_size=len(ds["sample"]))))
    return warping.as_steps(*warping.series(batch), frames.step_features(),
                            warping.step_counts(batch))


def test_a_series_whose_last_steps_are_zero_keeps_them():
    # normalize=False keeps the values as they are: series whose real final steps are exactly 0
    # in every feature (a sensor at rest), and one whose missing step sits inside its last
    # frame; NaN pads each to 24 steps. Steps 0 of the series are its own, steps past its end
    # are not, and a missing step before the end is one (0, as the model reads it)
    lengths = np.array([24, 13, 15, 16, 23])
    x = np.random.default_rng(4).normal(size=(5, 2, 24)) + 3.0
    x[:, :, 10:] = 0.0
    x[4, :, 17] = np.nan
    x = np.where(np.arange(24) < lengths[:, None, None], x, np.nan)
    ds = xr.Dataset({"x": (("sample", "channel", "time"), x),
                     "label": ("sample", list("ababa"))})
    frames = SignalAdapter(["x"], 8, hop=4, channel_dims=("channel",), normalize=False).fit(
        ds, targets="label")
    X, n = steps_of(frames, ds)
    assert n.tolist() == [20, 13, 15, 16, 20]
    for i, length in enumerate(n):
        np.testing.assert_array_equal(X[i, :length], np.nan_to_num(x[i].T[:length], nan=0.0)
                                      .astype(np.float32))
    # the adapter's count is each frame's share of its series' steps
    batch = next(iter(frames.batches(ds, batch_size=5)))
    np.testing.assert_array_equal(batch.coords["steps"][1], [4, 4, 4, 1, 0])
    np.testing.assert_array_equal(batch.coords["steps"][4], [4, 4, 4, 4, 4])


def test_the_steps_view_without_the_adapters_counts_is_refused():
    ds = alternating_dataset()
    frames = SignalAdapter(["x"], 4, hop=4).fit(ds, targets="label")
    batch = next(iter(frames.batches(ds, batch_size=90)))
    fitted = WarpingNeighbour(steps=frames.step_features()).fit([batch], [batch])
    bare = dataclasses.replace(batch, coords={k: v for k, v in batch.coords.items()
                                              if k != "steps"})
    with pytest.raises(ValueError, match=r"needs each token's coords\['steps'\]"):
        fitted.predict(bare)
    with pytest.raises(ValueError, match=r"whole numbers from 0 to hop=4"):
        fitted.predict(dataclasses.replace(batch, coords={**batch.coords,
                                                          "steps": batch.coords["steps"] + 1}))


def test_steps_that_are_not_feature_indices_are_refused():
    with pytest.raises(ValueError, match=r"steps has shape \(3,\)"):
        WarpingNeighbour(steps=np.arange(3))
    with pytest.raises(ValueError, match="dtype float64"):
        WarpingNeighbour(steps=np.zeros((2, 1)))
    ds = alternating_dataset()
    frames = SignalAdapter(["x"], 4, hop=4).fit(ds, targets="label")
    train = frames.batches(ds, batch_size=90)
    with pytest.raises(ValueError, match="steps index feature 9; the tokens have 5"):
        WarpingNeighbour(steps=np.array([[9]])).fit(train, train)
