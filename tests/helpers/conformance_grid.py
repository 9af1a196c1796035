"""The grid's row of the conformance table: a value per time step (N -> 1) from a field."""
import numpy as np
import xarray as xr

from conformance import Row
from seqattn.adapters import GridAdapter
from seqattn.train import MSELoss

SIZES = dict(d_model=16, nhead=2, num_layers=1, dim_feedforward=16)


def make_dataset():
    """12 six-hourly fields t, u (lat 4 x lon 4); the target is the field mean of t plus u's
    first cell, in kelvin; the last 4 steps run 5 K warmer than the 8 training steps."""
    rng = np.random.default_rng(0)
    t = rng.normal(280.0, 3.0, size=(12, 4, 4))
    t[8:] += 5.0
    t[2, 1, 1] = np.nan
    u = rng.normal(0.0, 1.0, size=(12, 4, 4))
    index = t.mean(axis=(1, 2), where=~np.isnan(t)) + u[:, 0, 0]
    index[5] = np.nan                                    # a missing target is skipped
    time = np.datetime64("2021-03-01") + np.arange(12) * np.timedelta64(6, "h")
    return xr.Dataset({"t": (("time", "lat", "lon"), t, {"units": "K"}),
                       "u": (("time", "lat", "lon"), u, {"units": "m s-1"}),
                       "index": ("time", index, {"units": "K", "long_name": "warmth index"})},
                      coords={"time": time, "lat": [60.0, 50.0, 40.0, 30.0],
                              "lon": [0.0, 10.0, 20.0, 30.0]})


ROWS = [Row(
    name="grid",
    make_dataset=make_dataset,
    make_adapter=lambda: GridAdapter(["t", "u"], {"lat": 2, "lon": 2}),
    targets="index",
    train={"time": slice(0, 8)},
    test={"time": slice(8, None)},
    task="regression",
    loss=lambda: MSELoss(skip_nan=True),
    prediction_dims=("time",),
    model_options=dict(SIZES, coordinates=["latlon"]),
    bad_inputs=[
        (lambda a, ds: a.batches(ds.drop_vars("u")), ValueError, "variable 'u' is not in the"),
        (lambda a, ds: a.batches(ds, batch_size=0), ValueError, "batch_size = 0"),
        (lambda a, ds: a.batches(ds, targets="t"), ValueError, r"targets \['t'\] were not given"),
        (lambda a, ds: a.model_config(task="classification"), ValueError,
         "task='classification' but target 'index' holds values"),
        (lambda a, ds: a.model_config(in_features=3), TypeError, "infers in_features"),
    ],
)]
