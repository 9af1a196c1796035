"""Forecasting next month's equatorial sea-surface temperature from the OSTIA analysis.

The data are monthly means of the Met Office OSTIA sea-surface temperature analysis on the
equatorial band 5S-5N all round the globe (18 x 432 cells, April 2006 - September 2010), the
file iris-sample-data ships as ``sample_data/ostia_monthly.nc`` (plain netCDF4, read by path with
xarray; iris is not needed). Land cells are NaN; they become masks, never values.

    read -> train the first 36 months | validate the next 6 | test the last 12 -> GridAdapter
    (3 x 6 cell patches, periodic in longitude, statistics of the training months only, sin/cos
    of the day of year) -> ForecastWindows (the last 3 months as inputs, one month ahead,
    increments: predicting zero is persistence; in memory) -> TokenModel that encodes each patch's
    latitude and longitude, with or without a linear path (one map per lead of each patch's
    inputs) started at ridge on those inputs per lead (seqattn.baselines.warm_start: the model
    starts as the baselines' "lead token ridge", which stays fixed while the rest learns the
    residual), the two chosen by seqattn.train.select on the validation months -> fit (early
    stopping on the validation months, the model as started scored too) ->
    seqattn.predict -> seqattn.evaluate: RMSE over ocean cells on the test months against the
    forecasting baselines of seqattn.baselines on the model's own inputs (persistence,
    climatology with annual harmonics, ridge on each patch's history), fitted on the training
    months with their choices made on the validation months.

The time axis holds monthly means, whose months differ in length (28-31 days); forecast leads
need an evenly spaced axis, so the times are re-stamped at the mean month length from the first
month's centre (each stays within 2.1 days of its month's centre; the calendar features and the
months they name are unchanged).

Run ``python examples/sst_forecast.py [--quick] [--plot out.png]``.
"""
import argparse
import dataclasses
import importlib.util
import time
from pathlib import Path

import numpy as np
import xarray as xr

import seqattn
from seqattn.adapters import ForecastWindows, GridAdapter
from seqattn.baselines import LeadRidge, warm_start
from seqattn.models import build
from seqattn.models.linear_path import residual_parameters
from seqattn.train import AdamW, EarlyStopping, MSELoss, WarmupCosine, fit
from seqattn.train.select import select

MEAN_MONTH = np.timedelta64(int(365.2425 / 12 * 86400), "s")


@dataclasses.dataclass
class ExampleConfig:
    """Everything the run depends on; ``seed`` fixes the training."""

    train_months: int = 36
    validation_months: int = 6
    patch: tuple = (3, 6)         # lat x lon cells per token
    history: int = 2              # inputs at months t - 2 .. t
    d_model: int = 32
    nhead: int = 4
    num_layers: int = 2
    dim_feedforward: int = 64
    epochs: int = 60
    patience: int = 10
    batch_size: int = 4
    lr: float = 2e-3
    weight_decay: float = 0.05
    seed: int = 0


# a smaller model; its epochs chosen on the validation months over seeds 0-2
QUICK = dict(epochs=80, num_layers=1, patch=(6, 12))


def ostia_path():
    """iris-sample-data's OSTIA file, found without importing the package."""
    spec = importlib.util.find_spec("iris_sample_data")
    if spec is None:
        raise ImportError("this example reads the OSTIA file iris-sample-data ships: "
                          "pip install iris-sample-data")
    return Path(spec.submodule_search_locations[0]) / "sample_data" / "ostia_monthly.nc"


def read_sst(path):
    """The analysis as a Dataset ``sst`` (time, lat, lon) in K, on evenly spaced times."""
    raw = xr.open_dataset(path, engine="h5netcdf")
    sst = raw["surface_temperature"].rename(latitude="lat", longitude="lon").load()
    months = raw["time"].values
    times = months[0] + np.arange(len(months)) * MEAN_MONTH
    sst = sst.assign_coords(time=("time", times, {
        "long_name": "month centre, evenly spaced at the mean month length"}))
    sst = sst.reset_coords(drop=True).astype(np.float32)
    sst.attrs = {"long_name": "sea-surface temperature, monthly mean", "units": "K"}
    return xr.Dataset({"sst": sst}, attrs={"title": "OSTIA monthly SST, 5S-5N",
                                           "source": str(path)})


def split(ds, config):
    """(training, validation, test); the later periods keep the `history` + 1 months before
    them as inputs only, so that their first month is forecast too."""
    a = config.train_months
    b = a + config.validation_months
    before = config.history + 1
    return (ds.isel(time=slice(0, a)), ds.isel(time=slice(a - before, b)),
            ds.isel(time=slice(b - before, None)))


def forecast_set_up(config, train_ds):
    adapter = GridAdapter(["sst"], {"lat": config.patch[0], "lon": config.patch[1]},
                          periodic=["lon"], calendar=True)
    return ForecastWindows(adapter, leads=[1], history=config.history, increments=True,
                           in_memory=True).fit(train_ds)


def train(config, windows, train_ds, val_ds, linear, progress=True):
    """A model trained on `train_ds` (early stopping on `val_ds`, the model as started scored
    too); with `linear`, its linear path (one map per lead of each patch's inputs) started at
    ridge on them per lead (the lead token ridge, penalty chosen on `val_ds`) and kept there
    while the rest learns the residual."""
    training = windows.batches(train_ds, batch_size=config.batch_size, shuffle=True,
                               seed=config.seed)
    validation = windows.batches(val_ds, batch_size=config.batch_size)
    # the ridge the baselines hold (evaluate fits the same on the same months)
    ridge = LeadRidge().fit(training, validation) if linear else None
    model = build(windows.model_config(
        d_model=config.d_model, nhead=config.nhead, num_layers=config.num_layers,
        dim_feedforward=config.dim_feedforward, positions="none", coordinates=["latlon"],
        linear=linear, linear_leads=lead_seconds(windows) if linear else None,
        linear_tokens=ridge.n_tokens if linear and ridge.flatten else None, seed=config.seed))
    trained = model.named_parameters()
    if linear:
        warm_start(model, ridge)
        trained = residual_parameters(model)  # weight decay would shrink the fitted maps
    steps = config.epochs * len(training)
    schedule = WarmupCosine(config.lr, max(1, steps // 20), steps, min_lr=config.lr / 20)
    fit(model, MSELoss(skip_nan=True),
        AdamW(trained, lr=config.lr, weight_decay=config.weight_decay), training,
        validation=validation, epochs=config.epochs, seed=config.seed,
        schedule=schedule, clip_grad_norm=1.0,
        early_stopping=EarlyStopping(patience=config.patience, include_start=True),
        progress=progress)
    return model


def lead_seconds(windows):
    """The fitted windows' leads as ``coords["lead"]`` holds them: seconds."""
    return tuple(float(lead / np.timedelta64(1, "s")) for lead in windows.lead_values)


def plot(path, forecast, truth):
    """The last test month: the analysis and the model's error."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    when = truth["time"].values[-1]
    fig, axes = plt.subplots(2, 1, figsize=(12, 3.2), constrained_layout=True, sharex=True)
    field = truth.sel(time=when)
    image = axes[0].pcolormesh(field["lon"], field["lat"], field, shading="nearest")
    fig.colorbar(image, ax=axes[0], label="K")
    axes[0].set_title(f"OSTIA analysis, month centred near {str(when)[:10]}")
    error = forecast.sel(time=when) - field
    image = axes[1].pcolormesh(error["lon"], error["lat"], error, vmin=-1.5, vmax=1.5,
                               cmap="RdBu_r", shading="nearest")
    rmse = float(np.sqrt(np.nanmean(error.values ** 2)))
    axes[1].set_title(f"seqattn one month ahead minus analysis (RMSE {rmse:.2f} K)")
    fig.colorbar(image, ax=axes[1], label="K")
    axes[-1].set_xlabel("longitude [deg E]")
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main(argv=None, config=None, progress=True):
    """Run the pipeline; returns a dict with ``scores`` (seqattn.evaluate's Dataset: the
    model's and the baselines' RMSE), ``choice`` (seqattn.train.select's Selection: the
    validation table), ``forecast`` (the model's Dataset) and ``seconds``."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="a short run (under 90 s)")
    parser.add_argument("--plot", metavar="PATH", help="save a figure (needs matplotlib)")
    args = parser.parse_args(argv)
    config = config or ExampleConfig(**(QUICK if args.quick else {}))
    start = time.perf_counter()

    ds = read_sst(ostia_path())
    train_ds, val_ds, test_ds = split(ds, config)
    windows = forecast_set_up(config, train_ds)
    choice = select({"attention": False, "attention + linear path from ridge": True},
                    train=lambda linear: train(config, windows, train_ds, val_ds, linear,
                                               progress),
                    score=lambda model: seqattn.evaluate(model, val_ds, windows, baselines=False,
                                                         batch_size=config.batch_size),
                    metric="rmse")
    model = choice.model
    predicted = seqattn.predict(model, test_ds, windows, batch_size=config.batch_size)
    # the baselines are fitted on the training months and choose on the validation months
    scores = seqattn.evaluate(model, ds, windows, where=ds.time.isin(test_ds.time),
                              train=ds.time.isin(train_ds.time),
                              validation=ds.time.isin(val_ds.time),
                              batch_size=config.batch_size)
    tested = predicted["time"].values[np.isfinite(predicted["sst"]).any(("lat", "lon")).values[0]]
    print(f"trained on {train_ds.sizes['time']} months; validation RMSE [K] on "
          f"{config.validation_months} months: " + ", ".join(
              f"{c} {v:.3f}" for c, v in zip(choice.table.candidate.values,
                                             choice.table.rmse.values))
          + f"; chosen: {choice.name}; tested on {len(tested)} months "
          f"({str(tested[0])[:7]} .. {str(tested[-1])[:7]})")
    print("next month's SST over ocean cells [K]:")
    print(seqattn.evaluation.table(scores).to_string(float_format="%.3f"))
    if args.plot:
        plot(args.plot, predicted["sst"].isel(lead=0), test_ds["sst"])
        print(f"figure saved to {args.plot}")
    seconds = time.perf_counter() - start
    print(f"total {seconds:.0f} s")
    return {"scores": scores, "choice": choice, "forecast": predicted, "seconds": seconds}


if __name__ == "__main__":
    main()
