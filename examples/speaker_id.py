"""Who is speaking, and other series classification (N -> 1), on the UCR/UEA files sktime ships.

* **JapaneseVowels**: nine male speakers each say the vowels /ae/; every utterance is 7-29
  frames of 12 LPC cepstral coefficients. Which speaker is it? (270 training, 370 test.)
* **GunPoint**: the x position of an actor's hand over 150 frames; did they draw a gun or only
  point a finger? (50 training, 150 test.)

The seqattn path, the same model and training for both sets; only the frame (how many steps a
token holds) is chosen per set, by cross-validation on its training file (``--select``):

    .ts files -> seqattn.readers.read_series_file -> Dataset (sample, time, channel), shorter
    series NaN-padded, the labels as the files' strings -> SignalAdapter fitted on the training
    part (frames of `window` steps every `hop`, its statistics, the labels as classes; the
    padding becomes the key-padding mask) ->
    SequenceModel (mean pooling, a neighbour path) built from adapter.model_config -> fit on
    the adapter's batches (cross-entropy, AdamW, warmup-cosine, early stopping on a validation
    fifth of the training file) -> the nearest training series in dynamic time warping
    distance added as a second expert (``seqattn.baselines.WarpingNeighbour`` fitted on the
    training part, its band and k chosen on the validation part, which then joins the
    references, put into the model's neighbour path by ``warm_start(..., keep_head=True)``: the model's logits are attention's
    plus the votes' log probabilities, a product of the two experts) -> the two experts
    weighed (``seqattn.train.choose_expert_weights``: the weights of attention's logits and of
    the votes, 0 dropping one, chosen on out-of-fold predictions of the whole training file,
    5 folds each trained as above, the votes alone unless the best weights beat them there by
    more than one standard error; ``weigh_experts`` scales the model's head and path) ->
    seqattn.evaluate: accuracy, log loss and AUROC on the test file, from the model's
    probabilities of every class.

Why the second expert: on small sets of aligned series (ArrowHead's 30 training outlines) attention
alone trails the nearest training series by 0.2 in accuracy, and learning the residual of the
neighbours' rule from its few training errors overfits them; the product of the two experts
kept the neighbours' accuracy there and cost nothing beyond the seed spread on the recipe's own
sets (docs/transfer.md). The expert compares by warping since the library has
``WarpingNeighbour``, which contains the Euclidean neighbours (band 0 between series of one
length) and chooses between them on validation (the figures of both: docs/results.md). Why the
weights: the product rarely beat its better expert, and where attention adds nothing
(ItalyPowerDemand, OSULeaf) it trailed the neighbours alone; a validation fifth that early
stopping read cannot tell (every candidate scores 1.000 on ItalyPowerDemand's 13 validation
series), while predictions of samples no model or early stopping saw can. Why the votes alone
unless the best weights beat them by more than a standard error: on a few dozen series a
candidate right on one sample more out of fold is within the folds' noise, and the attention it
kept cost test accuracy where the votes alone did better (ArrowHead, ACSF1: docs/transfer.md).

``seqattn.evaluate`` scores the model on the test file against the default baselines of
``seqattn.baselines`` on the model's own frame tokens (logistic regression on the frames pooled
over time, the k nearest training series), fitted on the training part with their choices made
on the validation part. Three more nearest-neighbour baselines are scored beside them:
``WarpingNeighbour`` (dynamic time warping, not among evaluate's defaults) on the same frames,
its band and k chosen on the validation part, which then joins its references as it joins the
model's expert's, which ties this recipe on GunPoint; and two of
the field on the normalized series themselves, on the whole training file: 1-nearest neighbour
in dynamic time warping distance (no band, ``WarpingNeighbour`` on one step per token) and in
Euclidean distance (series resampled to a common length). The test file is read once, for the
final table. The model is stored with ``seqattn.save`` and read back with ``seqattn.load``
before it is scored, as a user would ship it.

Run ``python examples/speaker_id.py [--quick] [--sets JapaneseVowels GunPoint] [--select]
[--plot out.png]``
(``--select`` prints the cross-validation of every candidate frame instead). Needs sktime's
data files only: ``pip install --no-deps sktime`` (its package is never imported).
"""
import argparse
import dataclasses
import importlib.util
import tempfile
import time
from pathlib import Path

import numpy as np
import xarray as xr

import seqattn
from seqattn.adapters import SignalAdapter
from seqattn.baselines import WarpingNeighbour, warm_start
from seqattn.evaluation import strongest_baseline
from seqattn.models import build
from seqattn.models.linear_path import residual_parameters
from seqattn.readers import read_series_file
from seqattn.train import (AdamW, CrossEntropyLoss, EarlyStopping, WarmupCosine,
                           choose_expert_weights, fit, weigh_experts)
from seqattn.train.expert_weights import stratified_folds

# (window, hop) of a frame token, in steps, chosen per set by `--select` (5-fold
# cross-validation on the training file, lowest held-out cross-entropy; see the README)
FRAMES = {"JapaneseVowels": (8, 4), "GunPoint": (8, 4)}
CANDIDATE_FRAMES = ((1, 1), (4, 2), (8, 4))
SETS = tuple(FRAMES)


@dataclasses.dataclass
class ExampleConfig:
    d_model: int = 32
    nhead: int = 4
    num_layers: int = 2
    dim_feedforward: int = 64
    dropout: float = 0.1
    epochs: int = 150
    patience: int = 30
    batch_size: int = 16
    lr: float = 2e-3
    validation_fraction: float = 0.2
    seed: int = 0


# --quick trains JapaneseVowels less; GunPoint (40 training series) is cheap to train in full,
# and needs it: its cross-validated models were still improving after 120-150 epochs
QUICK = {"JapaneseVowels": dict(epochs=40, patience=40), "GunPoint": {}}


# ---- reading the files -----------------------------------------------------------------------

def data_folder():
    """sktime's bundled UCR/UEA folder, found without importing sktime (which pulls in heavy
    dependencies)."""
    spec = importlib.util.find_spec("sktime")
    if spec is None:
        raise ModuleNotFoundError("the data files come with sktime: pip install --no-deps sktime")
    return Path(spec.submodule_search_locations[0]) / "datasets" / "data"


def load_set(name):
    folder = data_folder() / name
    return (read_series_file(folder / f"{name}_TRAIN.ts"),
            read_series_file(folder / f"{name}_TEST.ts"))


def joined(parts):
    """{part: Dataset (sample, time, channel)} as one Dataset, NaN-padded to the longest time,
    with a ``part`` coordinate on ``sample``: the shape seqattn.evaluate selects from."""
    length = max(ds.sizes["time"] for ds in parts.values())
    padded = [ds.reindex(time=np.arange(length)).assign_coords(
        part=("sample", np.full(ds.sizes["sample"], name, dtype=object)))
        for name, ds in parts.items()]
    ds = xr.concat(padded, dim="sample")
    return ds.assign_coords(sample=np.arange(ds.sizes["sample"]))


def split_validation(ds, fraction, seed):
    """A stratified `fraction` of the training samples held out for early stopping."""
    rng = np.random.default_rng(seed)
    labels = ds["label"].values
    held = np.concatenate([rng.permutation(np.flatnonzero(labels == c))[
        :max(1, round(fraction * np.sum(labels == c)))] for c in np.unique(labels)])
    keep = np.setdiff1d(np.arange(len(labels)), held)
    return ds.isel(sample=keep), ds.isel(sample=np.sort(held))


# ---- baselines -------------------------------------------------------------------------------

def resampled(x, length):
    """(B, T, C) NaN-padded series, each linearly resampled to `length` steps: (B, length * C)."""
    out = np.empty((len(x), length, x.shape[2]))
    for i, s in enumerate(x):
        s = s[~np.isnan(s).any(axis=1)]
        old = np.linspace(0.0, 1.0, len(s))
        new = np.linspace(0.0, 1.0, length)
        out[i] = np.stack([np.interp(new, old, c) for c in s.T], axis=1)
    return out.reshape(len(x), -1)


def nearest_euclidean(train_x, train_y, test_x):
    length = int(np.max(np.sum(~np.isnan(train_x[..., 0]), axis=1)))
    a, b = resampled(train_x, length), resampled(test_x, length)
    distance = (b ** 2).sum(1)[:, None] - 2 * b @ a.T + (a ** 2).sum(1)[None, :]
    return train_y[np.argmin(distance, axis=1)]


def accuracy_of(baseline, batches):
    hits = [baseline.predict(b).argmax(-1) == b.targets for b in batches]
    return float(np.mean(np.concatenate(hits)))


def nearest_dtw(train_all, validation, test):
    """Test accuracy of the field's 1-nearest neighbour in dynamic time warping distance, no
    band, on the series' own steps of the whole training file (``WarpingNeighbour`` with one
    candidate, on a SignalAdapter of one step per token: `validation`, a part of the training
    file, has nothing to choose)."""
    steps = SignalAdapter(["x"], window=1, hop=1, channel_dims=("channel",),
                          per_dims=("channel",)).fit(train_all, targets="label")
    fitted = WarpingNeighbour(windows=(1.0,), neighbours=(1,)).fit(
        steps.batches(train_all, batch_size=64), steps.batches(validation, batch_size=64))
    return accuracy_of(fitted, steps.batches(test, batch_size=64))


def warping_on_frames(adapter, train, validation, test):
    """Test accuracy of ``WarpingNeighbour`` on the model's own frame tokens, fitted on the
    training part, its band and k chosen on the validation part, which then joins the
    references (as in the model's expert): not among evaluate's defaults, so asked for here."""
    fitted = WarpingNeighbour(validation_references=True).fit(
        adapter.batches(train, batch_size=64), adapter.batches(validation, batch_size=64))
    return accuracy_of(fitted, adapter.batches(test, batch_size=64))


# ---- the seqattn path ------------------------------------------------------------------------

def train_model(train, validation, frames, config):
    window, hop = frames
    adapter = SignalAdapter(["x"], window=window, hop=hop, channel_dims=("channel",),
                            per_dims=("channel",)).fit(train, targets="label")
    training = adapter.batches(train, batch_size=config.batch_size, shuffle=True,
                               seed=config.seed)
    held = adapter.batches(validation, batch_size=config.batch_size)
    model = build(adapter.model_config(
        task="classification", d_model=config.d_model, nhead=config.nhead,
        num_layers=config.num_layers, dim_feedforward=config.dim_feedforward,
        dropout=config.dropout, pooling="mean", seed=config.seed,
        linear=True, linear_features="neighbours"))
    steps = config.epochs * len(training)
    # attention trains alone (the neighbour path, empty, stays out of the optimizer) ...
    fit(model, CrossEntropyLoss(),
        AdamW(residual_parameters(model), lr=config.lr, weight_decay=0.01), training,
        validation=held, epochs=config.epochs, seed=config.seed,
        schedule=WarmupCosine(config.lr, steps // 20, steps),
        early_stopping=EarlyStopping(patience=config.patience), progress=False)
    # ... then the nearest training series in warping distance join as a second expert: their
    # votes' log probabilities are added to attention's logits (band and k chosen on the
    # validation part, band 0 between series of one length is the Euclidean neighbours; and
    # whether to warp the frames or the steps they hold, the steps where they score better);
    # the validation part then joins the references
    neighbours = WarpingNeighbour(steps=adapter.step_features(), validation_references=True)
    neighbours.fit(adapter.batches(train, batch_size=64), held,
                   n_classes=model.config.out_features)
    return warm_start(model, neighbours, keep_head=True), adapter


def train_recipe(train_all, frames, config):
    """The whole recipe on a training file: the two experts' weights chosen on out-of-fold
    predictions of the file (5 folds, each model trained on the others as below), then the
    model trained on the file's training part (early stopping on its validation part) and
    weighed. Returns the model, its adapter and the weights (their table: every candidate's
    out-of-fold accuracy and cross-entropy)."""
    def on_part(part):
        return train_model(*split_validation(part, config.validation_fraction, config.seed),
                           frames, config)

    weights = choose_expert_weights(on_part, train_all, label="label", seed=config.seed)
    model, adapter = on_part(train_all)
    return weigh_experts(model, weights), adapter, weights


def cross_validate(train_all, frames, config, folds=5):
    """Mean held-out (accuracy, cross-entropy) over stratified folds of the training file, each
    model early-stopped on the fold it is scored on (the same for every candidate)."""
    fold = stratified_folds(train_all["label"].values, folds, config.seed)
    scores = []
    for k in range(folds):
        held = train_all.isel(sample=np.flatnonzero(fold == k))
        model, adapter = train_model(train_all.isel(sample=np.flatnonzero(fold != k)), held,
                                     frames, config)
        predicted = seqattn.predict(model, held, adapter)
        truth = held["label"]
        log_p = np.log(predicted["label_probability"].sel({"class": truth}).values)
        scores.append((np.mean(predicted["label"].values == truth.values), -np.mean(log_p)))
    return tuple(np.mean(scores, axis=0))


def select_frames(name, config):
    """Print the cross-validation score of every candidate frame; return the best one."""
    train_all, _ = load_set(name)
    scores = {frames: cross_validate(train_all, frames, config)
              for frames in CANDIDATE_FRAMES}
    for frames, (accuracy, loss) in scores.items():
        print(f"{name:16s} window, hop {frames}: held-out accuracy {accuracy:.3f}, "
              f"cross-entropy {loss:.3f}")
    return min(scores, key=lambda frames: scores[frames][1])


def run_set(name, config):
    train_all, test = load_set(name)
    train, validation = split_validation(train_all, config.validation_fraction, config.seed)
    start = time.perf_counter()
    model, adapter, weights = train_recipe(train_all, FRAMES[name], config)
    with tempfile.TemporaryDirectory() as folder:
        seqattn.save(model, Path(folder) / "model")
        model = seqattn.load(Path(folder) / "model")
    seconds = time.perf_counter() - start
    ds = joined({"train": train, "validation": validation, "test": test})
    scores = seqattn.evaluate(model, ds, adapter, where=ds.part == "test",
                              train=ds.part == "train", validation=ds.part == "validation")
    truth = test["label"].values
    # the field's baselines see the series the model sees: normalized with the training
    # statistics
    train_x = adapter.normalizer.apply(train_all)["x"].values
    test_x = adapter.normalizer.apply(test)["x"].values
    train_y = train_all["label"].values
    accuracy = dict(zip(scores.predictor.values, scores.accuracy.values.tolist()))
    return {"scores": scores, "weights": weights, "seqattn": accuracy.pop("model"), **accuracy,
            "1-NN Euclidean": float(np.mean(nearest_euclidean(train_x, train_y, test_x) == truth)),
            "1-NN DTW": nearest_dtw(train_all, validation, test),
            "k-NN DTW on the frames": warping_on_frames(adapter, train, validation, test),
            "seconds": seconds}


def plot(path, results):
    """Test accuracy per class of each set: the model beside the library baseline of the
    highest test accuracy (the baselines' recall per class that seqattn.evaluate scored)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(results), 1, figsize=(10, 2.8 * len(results)), squeeze=False,
                             constrained_layout=True)
    for ax, (name, r) in zip(axes[:, 0], results.items()):
        scores = r["scores"]
        shown = ["model", strongest_baseline(scores, "accuracy")]
        classes = [str(c) for c in scores["class"].values]
        place = np.arange(len(classes))
        for i, predictor in enumerate(shown):
            recall = scores.recall.sel(predictor=predictor).values
            accuracy = float(scores.accuracy.sel(predictor=predictor))
            ax.bar(place + (i - 0.5) * 0.4, recall, 0.4,
                   label=f"{predictor} (accuracy {accuracy:.3f})")
        ax.set_xticks(place, classes)
        ax.set_ylim(0, 1.05)
        ax.set_ylabel("test accuracy")
        ax.set_title(f"{name}: accuracy per class")
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8)
    axes[-1, 0].set_xlabel("class")
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="fewer epochs on JapaneseVowels (CI)")
    parser.add_argument("--sets", nargs="+", default=list(SETS), choices=SETS)
    parser.add_argument("--epochs", type=int)
    parser.add_argument("--select", action="store_true",
                        help="choose each set's frames by cross-validation on its training file")
    parser.add_argument("--plot", metavar="PATH",
                        help="save the test accuracy per class (needs matplotlib)")
    args = parser.parse_args(argv)
    configs = {name: ExampleConfig(**(QUICK[name] if args.quick else {})) for name in args.sets}
    if args.epochs:
        configs = {name: dataclasses.replace(c, epochs=args.epochs) for name, c in configs.items()}
    if args.select:
        return {name: select_frames(name, configs[name]) for name in args.sets}
    results = {name: run_set(name, configs[name]) for name in args.sets}
    for name, r in results.items():
        print(f"{name}: test accuracy (seqattn trained and reloaded in {r['seconds']:.0f} s)")
        table = r["weights"].table
        print(f"  experts' weights chosen out of fold: attention {r['weights'].attention:g}, "
              f"nearest series {r['weights'].expert:g} (best out of fold: {table.attrs['best']}, "
              f"accuracy gain {table.attrs['gain']:.3f} +- {table.attrs['standard_error']:.3f})")
        print("  " + ", ".join(f"{p} {r[p]:.3f}" for p in r
                               if p not in ("scores", "weights", "seconds")))
    if args.plot:
        plot(args.plot, results)
        print(f"figure saved to {args.plot}")
    return results


if __name__ == "__main__":
    main()
