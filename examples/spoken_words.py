"""Spoken words as the seeds frame audio: 25 ms windows every 10 ms, each a log-mel vector.

The recordings (examples/data/spoken_words, made by examples/data/make_spoken_words.py with the
espeak-ng synthesiser): the ten digits "zero" .. "nine", said once by each of 21 synthetic
speakers (seven accents, three voices each), at 8 kHz. Which word is it, said by a speaker of
an accent never heard in training? The recordings are split by accent: four accents train, one
validates, two test.

    WAV files -> log-mel spectrogram (scipy: Hann windows of 25 ms every 10 ms, 40 mel bands)
    -> Dataset (recording, time in s, mel), shorter recordings NaN-padded -> SignalAdapter
    (one frame per token, statistics per band from the training recordings) -> SequenceModel
    (mean pooling) -> fit (early stopping on the validation accent) -> predict(...,
    per_sample=True): word logits back on the test Dataset's recording dim.

Baselines on the time-averaged log-mel spectrum of each recording (what is said, without when):
logistic regression (C chosen on the validation accent, then refitted with it) and 1-nearest
neighbour.

Run ``python examples/spoken_words.py [--quick]``.
"""
import argparse
import dataclasses
import time
from pathlib import Path

import numpy as np
import xarray as xr
from scipy.io import wavfile
from scipy.signal import stft
from sklearn.linear_model import LogisticRegression
from sklearn.neighbors import KNeighborsClassifier
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from seqattn.adapters import SignalAdapter, predict
from seqattn.models import SequenceModel, SequenceModelConfig
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


def mel_filterbank(bands, n_fft, rate):
    """(bands, n_fft // 2 + 1) triangular filters evenly spaced on the mel scale, 0 to rate / 2."""
    mel = lambda hz: 2595.0 * np.log10(1.0 + hz / 700.0)
    hz = lambda m: 700.0 * (10.0 ** (m / 2595.0) - 1.0)
    edges = hz(np.linspace(0.0, mel(rate / 2), bands + 2))
    freqs = np.linspace(0.0, rate / 2, n_fft // 2 + 1)
    rising = (freqs[None] - edges[:-2, None]) / (edges[1:-1] - edges[:-2])[:, None]
    falling = (edges[2:, None] - freqs[None]) / (edges[2:] - edges[1:-1])[:, None]
    return np.maximum(0.0, np.minimum(rising, falling))


def log_mel(audio, rate, config):
    """(frames, bands) log-mel energies and the frame centres in s."""
    size, step = round(config.window * rate), round(config.hop * rate)
    times, spectrum = stft(audio, fs=rate, window="hann", nperseg=size, noverlap=size - step,
                           boundary=None, padded=False)[1:]
    power = np.abs(spectrum) ** 2
    return np.log(mel_filterbank(config.mel_bands, size, rate) @ power + 1e-6).T, times


def load(config):
    """{split: Dataset (recording, time, mel) with the word label per recording}."""
    records = {"train": [], "validation": [], "test": []}
    for path in sorted(DATA.glob("*.wav")):
        speaker, word = path.stem.rsplit("_", 1)
        accent = speaker.split("_")[0]
        split = next((s for s, accents in SPLIT.items() if accent in accents), "train")
        rate, audio = wavfile.read(path)
        records[split].append((log_mel(audio / 32768.0, rate, config), WORDS.index(word)))
    return {split: as_dataset(items, config) for split, items in records.items()}


def as_dataset(items, config):
    frames = max(len(spectrogram) for (spectrogram, _), _ in items)
    x = np.full((len(items), frames, config.mel_bands), np.nan)
    for i, ((spectrogram, _), _) in enumerate(items):
        x[i, :len(spectrogram)] = spectrogram
    times = config.window / 2 + config.hop * np.arange(frames)
    return xr.Dataset({"log_mel": (("recording", "time", "mel"), x),
                       "word": ("recording", np.array([label for _, label in items]))},
                      coords={"recording": np.arange(len(items)), "time": times})


def train_model(train, validation, config):
    adapter = SignalAdapter(["log_mel"], window=config.hop, channel_dims=("mel",),
                            per_dims=("mel",)).fit(train)
    fitted, held = adapter.encode(train), adapter.encode(validation)
    model = SequenceModel(SequenceModelConfig(
        in_features=fitted.tokens.shape[-1], out_features=len(WORDS), d_model=config.d_model,
        nhead=config.nhead, num_layers=config.num_layers, dim_feedforward=config.dim_feedforward,
        dropout=config.dropout, pooling="mean", seed=config.seed))
    steps = config.epochs * -(-len(fitted) // config.batch_size)
    fit(model, CrossEntropyLoss(), AdamW(model, lr=config.lr, weight_decay=0.01),
        (fitted.tokens, train["word"].values, fitted.key_padding_mask),
        validation=(held.tokens, validation["word"].values, held.key_padding_mask),
        epochs=config.epochs, batch_size=config.batch_size, seed=config.seed,
        schedule=WarmupCosine(config.lr, steps // 20, steps),
        early_stopping=EarlyStopping(patience=config.patience), progress=False)
    return model, adapter


def baselines(data, seed):
    """Test accuracy on time-averaged log-mel spectra: logistic regression and 1-NN."""
    def averaged(ds):
        return ds["log_mel"].mean("time", skipna=True).values, ds["word"].values

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
    data = load(config)
    start = time.perf_counter()
    model, adapter = train_model(data["train"], data["validation"], config)
    logits = predict(model, data["test"], adapter, per_sample=True)["prediction"]
    results = {"seqattn": float(np.mean(logits.argmax("output").values
                                        == data["test"]["word"].values)),
               "seconds": time.perf_counter() - start}
    results.update(baselines(data, config.seed))
    print(f"test accuracy ({data['test'].sizes['recording']} recordings, unseen accents): "
          f"seqattn {results['seqattn']:.3f}, logistic regression on averaged spectra "
          f"(C={results['C']}) {results['logistic regression']:.3f}, 1-NN "
          f"{results['1-NN']:.3f}  (seqattn {results['seconds']:.0f} s)")
    return results


if __name__ == "__main__":
    main()
