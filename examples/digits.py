"""Images as vectors: scikit-learn's 8 x 8 handwritten digits as sequences of patch tokens.

1,797 images of 8 x 8 pixels (grey levels 0-16) of the digits 0-9, bundled with scikit-learn.
The seqattn path:

    images -> Dataset (sample, y, x) -> GridAdapter fitted on the training images (patch x
    patch cells per token, their statistics, the digit labels as classes) -> SequenceModel
    (mean pooling) built from adapter.model_config -> fit on the adapter's batches
    (cross-entropy, AdamW, warmup-cosine, early stopping on the validation images) ->
    seqattn.predict: the predicted digit and its probabilities on the test Dataset's sample dim.

A stratified quarter of the images is the test set, read once for the final table; a fifth of
the rest validates. The patch size is chosen on the validation images. ``seqattn.evaluate``
scores the model on the test images against the baselines of ``seqattn.baselines`` on the
model's own patch tokens (logistic regression on the pixels of every patch in place and on
pooled features, the k nearest training images), fitted on the training images with their
penalty and k chosen on the validation images.

Run ``python examples/digits.py [--quick] [--plot out.png]``.
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
from seqattn.models import build
from seqattn.train import AdamW, CrossEntropyLoss, EarlyStopping, WarmupCosine, fit


@dataclasses.dataclass
class ExampleConfig:
    patches: tuple = (2, 4)       # candidate patch sizes, chosen on validation accuracy
    d_model: int = 64
    nhead: int = 4
    num_layers: int = 2
    dim_feedforward: int = 128
    dropout: float = 0.1
    label_smoothing: float = 0.1  # chosen on validation (0.985 against 0.981 without)
    epochs: int = 40
    patience: int = 40            # keeps the weights of the best validation loss
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


def accuracy(model, ds, adapter):
    predicted = seqattn.predict(model, ds, adapter)["label"]
    return float(np.mean(predicted.values == ds["label"].values))


def train_model(train, validation, patch, config):
    adapter = GridAdapter(["image"], {"y": patch, "x": patch}).fit(train, targets="label")
    model = build(adapter.model_config(
        task="classification", d_model=config.d_model, nhead=config.nhead,
        num_layers=config.num_layers, dim_feedforward=config.dim_feedforward,
        dropout=config.dropout, pooling="mean", positions="learned", seed=config.seed))
    batches = adapter.batches(train, batch_size=config.batch_size, shuffle=True,
                              seed=config.seed)
    steps = config.epochs * len(batches)
    fit(model, CrossEntropyLoss(label_smoothing=config.label_smoothing),
        AdamW(model, lr=config.lr, weight_decay=0.01), batches,
        validation=adapter.batches(validation, batch_size=config.batch_size),
        epochs=config.epochs, batch_size=config.batch_size, seed=config.seed,
        schedule=WarmupCosine(config.lr, steps // 20, steps),
        early_stopping=EarlyStopping(patience=config.patience), progress=False)
    return model, adapter


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="one patch size (CI)")
    parser.add_argument("--plot", metavar="PATH",
                        help="save the test confusion matrix (needs matplotlib)")
    args = parser.parse_args(argv)
    config = ExampleConfig(**(QUICK if args.quick else {}))
    train, validation, test = splits(config)
    start = time.perf_counter()
    candidates = {}
    for patch in config.patches:
        model, adapter = train_model(train, validation, patch, config)
        candidates[patch] = (accuracy(model, validation, adapter), model, adapter)
        print(f"patch {patch} x {patch}: validation accuracy {candidates[patch][0]:.3f}")
    patch = max(candidates, key=lambda p: candidates[p][0])
    _, model, adapter = candidates[patch]
    seconds = time.perf_counter() - start
    ds = xr.concat([train, validation, test], dim="sample")
    scores = seqattn.evaluate(model, ds, adapter, where=ds.sample.isin(test.sample),
                              train=ds.sample.isin(train.sample),
                              validation=ds.sample.isin(validation.sample))
    results = {"scores": scores, "seqattn": float(scores.accuracy.sel(predictor="model")),
               "patch": patch, "seconds": seconds}
    print(f"test scores ({test.sizes['sample']} images; model: seqattn on {patch} x {patch} "
          f"patches, trained in {seconds:.0f} s):")
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
