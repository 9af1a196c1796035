"""Images as vectors: scikit-learn's 8 x 8 handwritten digits as sequences of patch tokens.

1,797 images of 8 x 8 pixels (grey levels 0-16) of the digits 0-9, bundled with scikit-learn.
The seqattn path:

    images -> Dataset (sample, y, x) -> GridAdapter fitted on the training images (patch x
    patch cells per token, their statistics, the digit labels as classes) -> SequenceModel
    (mean pooling) with a linear path on the tokens of every position and every two positions
    (linear_features="pairwise"), built from adapter.model_config -> fit on the adapter's
    batches (cross-entropy, AdamW, warmup-cosine, early stopping on the validation images) ->
    seqattn.predict: the predicted digit and its probabilities on the test Dataset's sample dim.

The model's function class contains the strongest linear baseline of ``seqattn.baselines``,
logistic regression on every two patches' pixels jointly (pairwise PositionFeatures), and
starts its linear path from that baseline as fitted on the training images
(``seqattn.baselines.warm_start``). Two ways to train the attention around it:

* "attention + path": the attention model trained with its path at zero, on the training
  images and their copies shifted by one pixel up, down, left and right (handwriting is not
  centred to the pixel), then the path set to the baseline, the head kept: the model's logits
  are the sum of both, the product of the two as experts;
* "residual": the path started at the baseline with the head zeroed and kept there, the
  attention trained on what the baseline leaves (the training images as they are; early
  stopping can keep the start).

A stratified quarter of the images is the test set, read once for the final table; a fifth of
the rest validates. The patch size and the way to train are chosen on the validation images'
log loss (``seqattn.train.select``). ``seqattn.evaluate`` scores the model on the test images
against the baselines of ``seqattn.baselines`` on the model's own patch tokens (logistic
regression on the pixels of every patch in place, of every two patches jointly and on pooled
features, the k nearest training images), fitted on the training images with their penalty
and k chosen on the validation images.

Run ``python examples/digits.py [--quick] [--seed 0] [--plot out.png]``.
"""
import argparse
import dataclasses
import time

import numpy as np
import xarray as xr
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

import seqattn
from seqattn.adapters import GridAdapter
from seqattn.baselines import PositionFeatures, for_batch, warm_start
from seqattn.models import build
from seqattn.models.linear_path import residual_parameters
from seqattn.train import AdamW, CrossEntropyLoss, EarlyStopping, WarmupCosine, fit
from seqattn.train.select import select

VARIANTS = ("attention + path", "residual")
SHIFTS = ((1, 0), (-1, 0), (0, 1), (0, -1))  # (y, x) pixels: down, up, right, left


@dataclasses.dataclass
class ExampleConfig:
    patches: tuple = (2, 4)       # candidate patch sizes, chosen on validation log loss
    variants: tuple = VARIANTS    # ways to train the attention around the path, chosen alike
    d_model: int = 64
    nhead: int = 4
    num_layers: int = 2
    dim_feedforward: int = 128
    dropout: float = 0.1
    label_smoothing: float = 0.1  # the attention alone (0.985 against 0.981 without)
    epochs: int = 40
    shifted_epochs: int = 13      # on five times the images: about as many steps as 40 epochs
    batch_size: int = 32
    lr: float = 2e-3
    test_fraction: float = 0.25
    validation_fraction: float = 0.2
    seed: int = 0


QUICK = dict(patches=(4,))


def as_dataset(images, labels, index):
    """The images `index` of scikit-learn's set, on a ``sample`` dim holding that index."""
    return xr.Dataset({"image": (("sample", "y", "x"), images.astype(np.float64)),
                       "label": ("sample", labels)},
                      coords={"sample": index, "y": np.arange(8), "x": np.arange(8)})


def splits(config):
    """(train, validation, test) Datasets, stratified by digit."""
    digits = load_digits()
    rest, test = train_test_split(np.arange(len(digits.target)), test_size=config.test_fraction,
                                  stratify=digits.target, random_state=config.seed)
    train, validation = train_test_split(rest, test_size=config.validation_fraction,
                                         stratify=digits.target[rest], random_state=config.seed)
    return [as_dataset(digits.images[i], digits.target[i], i) for i in (train, validation, test)]


def shifted(images):
    """`images` and their copies shifted by one pixel (SHIFTS), the pixels shifted in blank
    (grey level 0, the background); each copy's samples numbered past the last one's."""
    copies, step = [images], int(images["sample"].max()) + 1
    for k, (dy, dx) in enumerate(SHIFTS, start=1):
        moved = np.zeros_like(images["image"].values)
        moved[:, max(dy, 0):8 + min(dy, 0), max(dx, 0):8 + min(dx, 0)] = \
            images["image"].values[:, max(-dy, 0):8 + min(-dy, 0), max(-dx, 0):8 + min(-dx, 0)]
        copies.append(as_dataset(moved, images["label"].values,
                                 images["sample"].values + k * step))
    return xr.concat(copies, dim="sample")


def fitted_baselines(adapter, ds, train, validation):
    """The baselines seqattn.evaluate fits on `adapter`'s tokens, fitted as it fits them."""
    batches = [list(adapter.batches(ds, where=part, batch_size=64, shuffle=False))
               for part in (train, validation)]
    return [b.fit(*batches, n_classes=10) for b in for_batch(batches[0][0])]


def pairwise_logistic(baselines):
    """The pairwise PositionFeatures among the fitted `baselines`."""
    found = [b for b in baselines if isinstance(b, PositionFeatures) and b.pairwise]
    if not found:
        raise ValueError("no pairwise logistic among the baselines: its columns passed "
                         "PositionFeatures' max_features; choose a larger patch")
    return found[0]


def train_model(train, validation, adapter, patch, variant, baseline, config):
    """A SequenceModel on `patch` x `patch` tokens with the pairwise path started from
    `baseline`, trained as `variant` says (module docstring)."""
    model = build(adapter.model_config(
        task="classification", d_model=config.d_model, nhead=config.nhead,
        num_layers=config.num_layers, dim_feedforward=config.dim_feedforward,
        dropout=config.dropout, pooling="mean", positions="learned", seed=config.seed,
        linear=True, linear_features="pairwise", linear_tokens=(8 // patch) ** 2))
    residual = variant == "residual"
    if residual:
        warm_start(model, baseline)
    images, epochs = (train, config.epochs) if residual else (shifted(train),
                                                              config.shifted_epochs)
    batches = adapter.batches(images, batch_size=config.batch_size, shuffle=True,
                              seed=config.seed)
    steps = epochs * len(batches)
    # the path stays where it starts: at the baseline (residual) or at zero until the end.
    # No smoothing on the residual: it would buy a lower smoothed loss by blunting the
    # baseline's confident logits (validation accuracy 0.970 against 0.985 without)
    fit(model, CrossEntropyLoss(label_smoothing=0.0 if residual else config.label_smoothing),
        AdamW(residual_parameters(model), lr=config.lr, weight_decay=0.01), batches,
        validation=adapter.batches(validation, batch_size=config.batch_size),
        epochs=epochs, batch_size=config.batch_size, seed=config.seed,
        schedule=WarmupCosine(config.lr, steps // 20, steps),
        # every epoch runs; the best validation loss's weights are kept
        early_stopping=EarlyStopping(patience=epochs, include_start=residual), progress=False)
    if not residual:
        warm_start(model, baseline, keep_head=True)
    return model


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="one patch size (CI)")
    parser.add_argument("--seed", type=int, default=0, help="the split's and the model's seed")
    parser.add_argument("--plot", metavar="PATH",
                        help="save the test confusion matrix (needs matplotlib)")
    args = parser.parse_args(argv)
    config = ExampleConfig(**(QUICK if args.quick else {}), seed=args.seed)
    train, validation, test = splits(config)
    ds = xr.concat([train, validation, test], dim="sample")
    part = dict(zip(("train", "validation", "test"),
                    (ds.sample.isin(d.sample) for d in (train, validation, test))))
    start = time.perf_counter()
    adapters = {patch: GridAdapter(["image"], {"y": patch, "x": patch}).fit(train,
                                                                           targets="label")
                for patch in config.patches}
    baselines = {patch: fitted_baselines(adapter, ds, part["train"], part["validation"])
                 for patch, adapter in adapters.items()}
    print(f"baselines fitted in {time.perf_counter() - start:.0f} s")
    start = time.perf_counter()
    candidates = {f"{patch} x {patch}, {variant}": (patch, variant)
                  for patch in config.patches for variant in config.variants}
    choice = select(
        candidates,
        train=lambda c: (train_model(train, validation, adapters[c[0]], *c,
                                     pairwise_logistic(baselines[c[0]]), config), c[0]),
        score=lambda trained: seqattn.evaluate(trained[0], ds, adapters[trained[1]],
                                               where=part["validation"], baselines=False),
        metric="log_loss")
    seconds = time.perf_counter() - start
    print("validation images:")
    print(choice.table[["accuracy", "log_loss", "seconds"]].to_dataframe().to_string(
        float_format="%.3f"))
    model, patch = choice.model
    adapter = adapters[patch]
    scores = seqattn.evaluate(model, ds, adapter, where=part["test"], baselines=baselines[patch])
    results = {"scores": scores, "seqattn": float(scores.accuracy.sel(predictor="model")),
               "patch": patch, "choice": choice.name, "validation": choice.table,
               "seconds": seconds}
    print(f"test scores ({test.sizes['sample']} images; model: seqattn, {choice.name}, "
          f"trained in {seconds:.0f} s with the other candidates):")
    print(seqattn.evaluation.table(scores).to_string(float_format="%.3f"))
    if args.plot:
        seqattn.confusion_figure(test["label"].values,
                                 seqattn.predict(model, test, adapter)["label"].values,
                                 range(10), args.plot, title="test images",
                                 truth_label="true digit", predicted_label="predicted digit",
                                 counted="images")
        print(f"figure saved to {args.plot}")
    return results


if __name__ == "__main__":
    main()
