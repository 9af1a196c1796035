"""Forecast windows' row of the conformance table: a grid forecast 6 h ahead (N -> N, targets
implied by the windows)."""
import numpy as np

from adapters_helpers import make_grid
from conformance import Row
from seqattn.adapters import ForecastWindows, GridAdapter
from seqattn.train import MSELoss

SIZES = dict(d_model=16, nhead=2, num_layers=1, dim_feedforward=16)


def make_dataset():
    """16 six-hourly steps of t and u; the 6 steps after training are 3 units warmer."""
    ds = make_grid(seed=3, time=16, lat=4, lon=4, nan_fraction=0.05, static=False)
    return ds.assign(t=ds.t + 3.0 * (np.arange(16) >= 10)[:, None, None])


def at_reached_valid_times(decoded, expected):
    """The forecast at its one lead, on the valid times a test sample reaches (history 1 +
    lead 1 steps into the test period), and the data there, except where the value one step
    earlier is missing (an increment from it is undefined)."""
    got = decoded.isel(lead=0, drop=True).sel(time=expected.time)
    expected = expected.where(expected.shift(time=1).notnull())
    return got.isel(time=slice(2, None)), expected.isel(time=slice(2, None))


ROWS = [Row(
    name="forecast",
    make_dataset=make_dataset,
    make_adapter=lambda: ForecastWindows(GridAdapter(["t", "u"], {"lat": 2, "lon": 2}),
                                         leads=["6h"], history=1, increments=True,
                                         lead_scales="rms"),
    targets=None,
    train={"time": slice(0, 10)},
    test={"time": slice(10, None)},
    task="regression",
    loss=lambda: MSELoss(skip_nan=True),
    prediction_dims=("lead", "time", "lat", "lon"),
    prediction_name="t",
    model_options=dict(SIZES, coordinates=["latlon", "lead"], causal=True),
    view=at_reached_valid_times,
    bad_inputs=[
        (lambda a, ds: a.batches(ds, where={"time": slice(0, 1)}), ValueError,
         "no forecasting sample fits the selection"),
        (lambda a, ds: ForecastWindows(ds, a.adapter, leads=[1]), TypeError,
         r"ForecastWindows\(ds, adapter, leads=...\) is gone"),
        (lambda a, ds: a.model_config(out_features=2), TypeError, "infers out_features"),
    ],
)]
