"""The signal's row of the conformance table: who is speaking (string labels, N -> 1)."""
import numpy as np
import xarray as xr

from conformance import Row
from seqattn.adapters import SignalAdapter
from seqattn.train import CrossEntropyLoss

SIZES = dict(d_model=16, nhead=2, num_layers=1, dim_feedforward=16)
SPEAKERS = ("ada", "bob", "cyd")


def make_dataset():
    """12 recordings of 64 steps at 100 Hz, each a tone of its speaker's pitch in noise; the
    last 4 (not for training) are twice as loud."""
    rng = np.random.default_rng(1)
    time = np.arange(64) / 100.0
    speaker = np.array([SPEAKERS[i % 3] for i in range(12)], dtype=object)
    pitch = np.array([5.0, 11.0, 17.0])[np.arange(12) % 3]
    x = np.sin(2 * np.pi * pitch[:, None] * time) + rng.normal(0, 0.2, size=(12, 64))
    x[8:] *= 2.0
    x[3, 10:20] = np.nan
    return xr.Dataset({"x": (("recording", "time"), x, {"units": "Pa"}),
                       "speaker": ("recording", speaker)},
                      coords={"time": time, "recording": [f"r{i:02d}" for i in range(12)]})


ROWS = [Row(
    name="signal",
    make_dataset=make_dataset,
    make_adapter=lambda: SignalAdapter(["x"], 8, hop=4),
    targets="speaker",
    train={"recording": slice(0, 8)},
    test={"recording": slice(8, None)},
    task="classification",
    loss=CrossEntropyLoss,
    prediction_dims=("recording",),
    model_options=dict(SIZES, pooling="mean"),
    bad_inputs=[
        (lambda a, ds: a.batches(ds.assign(speaker=ds.speaker.where(ds.recording != "r00",
                                                                    "eve"))),
         ValueError, "label 'eve', which fit never saw"),
        (lambda a, ds: a.encode(ds.isel(time=slice(0, 0))), ValueError,
         "0 steps along time_dim 'time'"),
        (lambda a, ds: a.model_config(task="regression"), ValueError, "holds classes"),
    ],
)]
