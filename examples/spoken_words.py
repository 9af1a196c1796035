"""Spoken words as the seeds frame audio: 25 ms windows every 10 ms, each a log-mel vector.

The recordings (examples/data/spoken_words, made by examples/data/make_spoken_words.py with the
espeak-ng synthesiser): the ten digits "zero" .. "nine", said once by each of 21 synthetic
speakers (seven accents, three voices each), at 8 kHz. Which word is it, said by a speaker of
an accent never heard in training? The recordings are split by accent: four accents train, one
validates, two test.

    WAV files -> Dataset (recording, time in s), shorter recordings NaN-padded, the word per
    recording -> SignalAdapter (frames of 25 ms every 10 ms, each made a vector of 40 log-mel
    energies inside the adapter: frame_features=LogMel(40); statistics per band and the words
    as classes from the training recordings) -> SequenceModel (mean pooling) with a linear path
    on the frames pooled over time (linear_features="pooled": each band's mean, spread and
    extremes, and the number of frames), built from adapter.model_config -> fit on the
    adapter's batches (early stopping on the validation accent) -> seqattn.evaluate on the
    test accents.

The model's function class contains the strongest baseline of ``seqattn.baselines`` here,
logistic regression on those pooled frames, and its path starts from that baseline as fitted
on the training accents (``seqattn.baselines.warm_start``, the head zeroed: the model starts
as the baseline, and early stopping can keep that start). Two ways to train it, chosen on the
validation accent's log loss (``seqattn.train.select``): "residual" (the path kept at the
baseline, the attention trained on what it leaves) and "joint" (path and attention trained
together from there). (A path on the frames' mean alone, started at logistic regression on
it, was tried before: validation log loss 0.400 against 0.365 without a path.)

``seqattn.evaluate`` scores the model on the test accents against the baselines of
``seqattn.baselines`` on the model's own log-mel frames pooled over time (what is said, without
when: their mean, spread and extremes per band, and the number of frames): logistic regression
and the k nearest training recordings, fitted on the training accents with C and k chosen on
the validation accent.

Run ``python examples/spoken_words.py [--quick] [--seed 0] [--plot out.png]``.
"""
import argparse
import dataclasses
import time
from pathlib import Path

import numpy as np
import xarray as xr
from scipy.io import wavfile

import seqattn
from seqattn.adapters import LogMel, SignalAdapter
from seqattn.baselines import PooledFeatures, for_batch, warm_start
from seqattn.models import build
from seqattn.models.linear_path import residual_parameters
from seqattn.train import AdamW, CrossEntropyLoss, EarlyStopping, WarmupCosine, fit
from seqattn.train.select import select

DATA = Path(__file__).parent / "data" / "spoken_words"
WORDS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")
SPLIT = {"validation": ("en-gb-x-gbcwmd",), "test": ("en-029", "en-gb-scotland")}
VARIANTS = ("residual", "joint")


@dataclasses.dataclass
class ExampleConfig:
    window: float = 0.025         # s
    hop: float = 0.010            # s
    mel_bands: int = 40
    d_model: int = 32
    nhead: int = 4
    num_layers: int = 2
    dim_feedforward: int = 64
    dropout: float = 0.1
    epochs: int = 80
    patience: int = 20
    batch_size: int = 16
    lr: float = 2e-3
    variants: tuple = VARIANTS    # how the path is trained, chosen on validation log loss
    seed: int = 0


QUICK = dict(epochs=30, patience=30)


def load():
    """{split: Dataset (recording, time) of the audio in [-1, 1), with the word per recording}."""
    records = {"train": [], "validation": [], "test": []}
    rates = set()
    for path in sorted(DATA.glob("*.wav")):
        speaker, word = path.stem.rsplit("_", 1)
        accent = speaker.split("_")[0]
        split = next((s for s, accents in SPLIT.items() if accent in accents), "train")
        rate, audio = wavfile.read(path)
        rates.add(rate)
        records[split].append((audio / 32768.0, WORDS.index(word), path.stem))
    (rate,) = rates
    return {split: as_dataset(items, rate) for split, items in records.items()}


def as_dataset(items, rate):
    """The recordings `items` (audio, word, name) on a ``recording`` dim of their names."""
    x = np.full((len(items), max(len(audio) for audio, _, _ in items)), np.nan)
    for i, (audio, _, _) in enumerate(items):
        x[i, :len(audio)] = audio
    return xr.Dataset({"audio": (("recording", "time"), x),
                       "word": ("recording", np.array([label for _, label, _ in items]))},
                      coords={"recording": [name for _, _, name in items],
                              "time": ("time", np.arange(x.shape[1]) / rate, {"units": "s"})})


def fitted_baselines(adapter, ds, part):
    """The baselines seqattn.evaluate fits on `adapter`'s frames, fitted as it fits them."""
    batches = [list(adapter.batches(ds, where=part[split], batch_size=64, shuffle=False))
               for split in ("train", "validation")]
    return [b.fit(*batches, n_classes=len(WORDS)) for b in for_batch(batches[0][0])]


def pooled_logistic(baselines):
    """The PooledFeatures logistic regression (every statistic) among the fitted `baselines`."""
    return next(b for b in baselines if isinstance(b, PooledFeatures))


def train_model(train, validation, adapter, baseline, variant, config):
    """A SequenceModel whose pooled path starts at `baseline`, trained as `variant` says:
    "residual" keeps the path there, "joint" trains it with the attention."""
    training = adapter.batches(train, batch_size=config.batch_size, shuffle=True,
                               seed=config.seed)
    held = adapter.batches(validation, batch_size=config.batch_size)
    model = warm_start(build(adapter.model_config(
        task="classification", d_model=config.d_model, nhead=config.nhead,
        num_layers=config.num_layers, dim_feedforward=config.dim_feedforward,
        dropout=config.dropout, pooling="mean", seed=config.seed, linear=True,
        linear_features="pooled")), baseline)
    trained = residual_parameters(model) if variant == "residual" else model
    steps = config.epochs * len(training)
    fit(model, CrossEntropyLoss(), AdamW(trained, lr=config.lr, weight_decay=0.01), training,
        validation=held, epochs=config.epochs, seed=config.seed,
        schedule=WarmupCosine(config.lr, steps // 20, steps),
        early_stopping=EarlyStopping(patience=config.patience, include_start=True),
        progress=False)
    return model


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer epochs (CI)")
    parser.add_argument("--seed", type=int, default=0, help="the model's seed")
    parser.add_argument("--plot", metavar="PATH",
                        help="save the test confusion matrix (needs matplotlib)")
    args = parser.parse_args(argv)
    config = ExampleConfig(**(QUICK if args.quick else {}), seed=args.seed)
    data = load()
    ds = xr.concat(list(data.values()), dim="recording", join="outer")  # NaN-padded
    part = {split: ds.recording.isin(d.recording) for split, d in data.items()}
    adapter = SignalAdapter(["audio"], window=config.window, hop=config.hop,
                            frame_features=LogMel(config.mel_bands)).fit(data["train"],
                                                                         targets="word")
    baselines = fitted_baselines(adapter, ds, part)
    start = time.perf_counter()
    choice = select({variant: variant for variant in config.variants},
                    train=lambda variant: train_model(data["train"], data["validation"],
                                                      adapter, pooled_logistic(baselines),
                                                      variant, config),
                    score=lambda model: seqattn.evaluate(model, ds, adapter,
                                                         where=part["validation"],
                                                         baselines=False),
                    metric="log_loss")
    seconds = time.perf_counter() - start
    model = choice.model
    print("validation accent:")
    print(choice.table[["accuracy", "log_loss", "seconds"]].to_dataframe().to_string(
        float_format="%.3f"))
    scores = seqattn.evaluate(model, ds, adapter, where=part["test"], baselines=baselines)
    results = {"scores": scores, "seqattn": float(scores.accuracy.sel(predictor="model")),
               "choice": choice.name, "validation": choice.table, "seconds": seconds}
    print(f"test scores ({data['test'].sizes['recording']} recordings, unseen accents; seqattn "
          f"{choice.name}, trained in {seconds:.0f} s with the other candidate):")
    print(seqattn.evaluation.table(scores).to_string(float_format="%.3f"))
    if args.plot:
        test = data["test"]
        seqattn.confusion_figure(test["word"].values,
                                 seqattn.predict(model, test, adapter)["word"].values,
                                 range(len(WORDS)), args.plot, names=WORDS,
                                 title="unseen accents", truth_label="word said",
                                 predicted_label="predicted word", counted="recordings")
        print(f"figure saved to {args.plot}")
    return results


if __name__ == "__main__":
    main()
