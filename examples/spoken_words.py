"""Spoken words as the seeds frame audio: 25 ms windows every 10 ms, each a log-mel vector.

The recordings (examples/data/spoken_words, made by examples/data/make_spoken_words.py with the
espeak-ng synthesiser): the ten digits "zero" .. "nine", said once by each of 21 synthetic
speakers (seven accents, three voices each), at 8 kHz. Which word is it, said by a speaker of
an accent never heard in training? The recordings are split by accent: four accents train, one
validates, two test.

    WAV files -> Dataset (recording, time in s), shorter recordings NaN-padded, the word per
    recording -> SignalAdapter (frames of 25 ms every 10 ms, each made a vector of 40 log-mel
    energies inside the adapter: frame_features=LogMel(40); statistics per band and the words
    as classes from the training recordings) -> SequenceModel (mean pooling) built from
    adapter.model_config -> fit on the adapter's batches (early stopping on the validation
    accent) -> seqattn.predict: the word and its probabilities on the test Dataset's recording
    dim.

Baselines on the time-averaged log-mel spectrum of each recording (what is said, without when;
the spectra are the adapter's own, decoded): logistic regression (C chosen on the validation
accent, then refitted with it) and 1-nearest neighbour.

Run ``python examples/spoken_words.py [--quick]``.
"""
import argparse
import dataclasses
import time
from pathlib import Path

import numpy as np
import xarray as xr
from scipy.io import wavfile
from sklearn.linear_model import LogisticRegression
from sklearn.neighbors import KNeighborsClassifier
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

import seqattn
from seqattn.adapters import LogMel, SignalAdapter
from seqattn.models import build
from seqattn.train import AdamW, CrossEntropyLoss, EarlyStopping, WarmupCosine, fit

DATA = Path(__file__).parent / "data" / "spoken_words"
WORDS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")
SPLIT = {"validation": ("en-gb-x-gbcwmd",), "test": ("en-029", "en-gb-scotland")}


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
        records[split].append((audio / 32768.0, WORDS.index(word)))
    (rate,) = rates
    return {split: as_dataset(items, rate) for split, items in records.items()}


def as_dataset(items, rate):
    x = np.full((len(items), max(len(audio) for audio, _ in items)), np.nan)
    for i, (audio, _) in enumerate(items):
        x[i, :len(audio)] = audio
    return xr.Dataset({"audio": (("recording", "time"), x),
                       "word": ("recording", np.array([label for _, label in items]))},
                      coords={"recording": np.arange(len(items)),
                              "time": ("time", np.arange(x.shape[1]) / rate, {"units": "s"})})


def train_model(train, validation, config):
    adapter = SignalAdapter(["audio"], window=config.window, hop=config.hop,
                            frame_features=LogMel(config.mel_bands)).fit(train, targets="word")
    training = adapter.batches(train, batch_size=config.batch_size, shuffle=True,
                               seed=config.seed)
    held = adapter.batches(validation, batch_size=config.batch_size)
    model = build(adapter.model_config(
        task="classification", d_model=config.d_model, nhead=config.nhead,
        num_layers=config.num_layers, dim_feedforward=config.dim_feedforward,
        dropout=config.dropout, pooling="mean", seed=config.seed))
    steps = config.epochs * len(training)
    fit(model, CrossEntropyLoss(), AdamW(model, lr=config.lr, weight_decay=0.01), training,
        validation=held, epochs=config.epochs, seed=config.seed,
        schedule=WarmupCosine(config.lr, steps // 20, steps),
        early_stopping=EarlyStopping(patience=config.patience), progress=False)
    return model, adapter


def baselines(data, adapter, seed):
    """Test accuracy on time-averaged log-mel spectra: logistic regression and 1-NN."""
    def averaged(ds):
        spectra = adapter.decode(adapter.encode(ds))["audio"]  # (recording, time, mel)
        return spectra.mean("time", skipna=True).values, ds["word"].values

    (x, y), (xv, yv), (xt, yt) = (averaged(data[s]) for s in ("train", "validation", "test"))
    logistic = lambda c: make_pipeline(StandardScaler(),
                                       LogisticRegression(C=c, max_iter=5000, random_state=seed))
    best_c = max((0.01, 0.1, 1.0, 10.0), key=lambda c: logistic(c).fit(x, y).score(xv, yv))
    xa, ya = np.concatenate([x, xv]), np.concatenate([y, yv])
    return {"logistic regression": logistic(best_c).fit(xa, ya).score(xt, yt),
            "1-NN": make_pipeline(StandardScaler(), KNeighborsClassifier(1)).fit(xa, ya)
            .score(xt, yt), "C": best_c}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer epochs (CI)")
    args = parser.parse_args(argv)
    config = ExampleConfig(**(QUICK if args.quick else {}))
    data = load()
    start = time.perf_counter()
    model, adapter = train_model(data["train"], data["validation"], config)
    predicted = seqattn.predict(model, data["test"], adapter)["word"]
    results = {"seqattn": float(np.mean(predicted.values == data["test"]["word"].values)),
               "seconds": time.perf_counter() - start}
    results.update(baselines(data, adapter, config.seed))
    print(f"test accuracy ({data['test'].sizes['recording']} recordings, unseen accents): "
          f"seqattn {results['seqattn']:.3f}, logistic regression on averaged spectra "
          f"(C={results['C']}) {results['logistic regression']:.3f}, 1-NN "
          f"{results['1-NN']:.3f}  (seqattn {results['seconds']:.0f} s)")
    return results


if __name__ == "__main__":
    main()
