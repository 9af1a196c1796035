"""Forecasting a weather station's temperature 1-6 hours ahead from its previous 48 hours.

The data are a typical meteorological year (TMY3) of hourly observations at Greensboro,
North Carolina (WMO 723170), the file pvlib ships as ``pvlib/data/723170TYA.CSV`` (read by path
with pandas; pvlib itself is not imported): 8,760 hours of temperature, dew point, humidity,
pressure, wind, cloud cover and irradiance. Each month of a TMY3 year comes from a different real
year, so the series has small jumps at month boundaries; the times are local standard time.

    read the CSV -> Dataset (time, station) -> train January-August | validate September |
    test October-December -> GridAdapter, one token per variable (its 48 hourly values,
    normalized with the training months' statistics) -> ForecastWindows (history 47, leads
    1-6 h, increments: predicting zero is persistence, scaled per lead so that every lead
    weighs alike in the loss; in memory) -> the forecasting baselines of seqattn.baselines on
    exactly the model's inputs (persistence, climatology of the hour of day, ridge regression
    per lead), fitted on January-August with their choices made on September -> two
    candidates, each a TokenModel that encodes the lead and the hour of day fitted on the
    windows with early stopping on September: attention alone, and attention with a linear
    path of the whole sample, one map per lead, started at that fitted ridge
    (seqattn.baselines.warm_start: the model starts as the ridge, and attention, its output
    projection zeroed, learns the residual; the path stays fixed; early stopping scores the
    start too, so this candidate never ends worse on September than the ridge) -> the
    candidate with the lower September RMSE (seqattn.train.select) -> seqattn.predict ->
    seqattn.evaluate: RMSE per lead on the test months of the model and of those same fitted
    baselines.

Every input of a forecast issued at hour t is an observation at t or before, so the forecast is
causal; every choice (the baselines' penalties, the training length, the candidate) is made on
September only. Attention alone wins at Greensboro; at a station where the ridge is hard to
beat the residual candidate keeps the recipe from ending behind it.

Run ``python examples/station_forecast.py [--quick] [--plot out.png]``.
"""
import argparse
import dataclasses
import importlib.util
import time
from pathlib import Path

import numpy as np
import pandas as pd
import xarray as xr

import seqattn
from seqattn.adapters import ForecastWindows, GridAdapter
from seqattn.baselines import LeadRidge, for_batch, warm_start
from seqattn.models import build
from seqattn.models.linear_path import residual_parameters
from seqattn.train import AdamW, EarlyStopping, MSELoss, WarmupCosine, fit
from seqattn.train.select import select

# TMY3 column -> (variable name, units); wind enters as its eastward and northward components
COLUMNS = {"Dry-bulb (C)": ("temperature", "degC"), "Dew-point (C)": ("dew_point", "degC"),
           "RHum (%)": ("relative_humidity", "%"), "Pressure (mbar)": ("pressure", "hPa"),
           "GHI (W/m^2)": ("ghi", "W m-2"), "TotCld (tenths)": ("cloud_cover", "tenths")}
TARGET = "temperature"
# the candidates chosen on September, by whether the model has the lead linear path
CANDIDATES = {False: "attention", True: "ridge per lead + attention residual"}


@dataclasses.dataclass
class ExampleConfig:
    """Everything the run depends on; ``seed`` fixes the training."""

    history: int = 47             # inputs at t - history .. t, hourly
    leads: tuple = (1, 2, 3, 4, 5, 6)
    d_model: int = 32
    nhead: int = 4
    num_layers: int = 1
    dim_feedforward: int = 64
    dropout: float = 0.1
    epochs: int = 12
    patience: int = 4             # epochs without a better September loss before stopping
    batch_size: int = 128
    lr: float = 2e-3
    weight_decay: float = 0.05
    train_months: tuple = (1, 8)  # inclusive
    validation_month: int = 9
    test_months: tuple = (10, 12)
    # the model encodes the lead and the hour of day of the initial time; day-of-year features
    # (the adapter's calendar=True) would have to extrapolate to the unseen October-December
    coordinates: tuple = ("lead", "time_of_day")
    calendar: bool = False
    # increments divided by each lead's RMS (chosen against unscaled increments on September)
    lead_scales: str = "rms"
    # the candidates, chosen on September's RMSE: attention alone, and with the lead linear
    # path started at the fitted ridge per lead (the model starts as that baseline, and early
    # stopping on September keeps it unless an epoch beats it), so the chosen model is not
    # worse than the ridge on September
    linear: tuple = (False, True)
    seed: int = 0


QUICK = dict(epochs=4)


def tmy3_path():
    """pvlib's Greensboro TMY3 file, found without importing pvlib."""
    spec = importlib.util.find_spec("pvlib")
    if spec is None:
        raise ImportError("this example reads the TMY3 file pvlib ships: pip install pvlib "
                          "(or pip install --no-deps pvlib, the file is all it needs)")
    return Path(spec.submodule_search_locations[0]) / "data" / "723170TYA.CSV"


def read_station(path):
    """The TMY3 file as a Dataset (time, station); times are hourly local standard time on
    one (non-leap) calendar year, as TMY3 stitches its months from different years."""
    with open(path) as f:
        station_id, name, state, utc_offset, lat, lon, elevation = f.readline().strip().split(",")
    table = pd.read_csv(path, skiprows=1)
    times = (np.datetime64("2001-01-01T01") + np.arange(len(table)) * np.timedelta64(1, "h"))
    data = {}
    for column, (variable, units) in COLUMNS.items():
        data[variable] = (("time", "station"), table[column].to_numpy(np.float32)[:, None],
                          {"units": units})
    radians = np.deg2rad(table["Wdir (degrees)"].to_numpy())
    speed = table["Wspd (m/s)"].to_numpy()
    # the direction the wind blows from: a westerly (270 degrees) has a positive eastward part
    for variable, component in (("wind_east", np.sin), ("wind_north", np.cos)):
        values = (-speed * component(radians)).astype(np.float32)[:, None]
        data[variable] = (("time", "station"), values, {"units": "m s-1"})
    return xr.Dataset(data, coords={
        "time": ("time", times,
                 {"long_name": f"local standard time (UTC{float(utc_offset):+g} h), hour ending"}),
        "station": ("station", [station_id]),
        "lat": ("station", [float(lat)]), "lon": ("station", [float(lon)])},
        attrs={"title": f"TMY3 hourly observations, {name.strip(chr(34))}, {state}",
               "elevation_m": float(elevation),
               "source": str(path)})


def months(ds, first, last, history=0):
    """The times of months first..last, with `history` hours before them as inputs only. A
    TMY3 stamp ends its hour (the year's last is January 1, 00:00), so an hour belongs to the
    month it starts in."""
    month = (ds["time"] - np.timedelta64(1, "h")).dt.month.values
    where = np.flatnonzero((month >= first) & (month <= last))
    return ds.isel(time=slice(max(where[0] - history, 0), where[-1] + 1))


# ---- the model -------------------------------------------------------------------------------

def forecast_set_up(config, variables):
    """One token per variable; every sample encoded once per batches(...) (a handful of months
    fit in memory, and one pass over the Dataset is much cheaper than one per batch);
    increments scaled per lead, by the training months' RMS, so that the short leads count as
    much in the loss as the long ones."""
    adapter = GridAdapter(variables, {"station": 1}, variables_as="tokens",
                          calendar=config.calendar)
    return ForecastWindows(adapter, leads=[f"{lead}h" for lead in config.leads],
                           history=config.history, targets=[TARGET], increments=True,
                           lead_scales=config.lead_scales, in_memory=True)


def lead_seconds(windows):
    """The fitted windows' leads as ``coords["lead"]`` holds them: seconds."""
    return tuple(float(lead / np.timedelta64(1, "s")) for lead in windows.lead_values)


def build_model(config, windows, n_tokens, ridge=None):
    """Attention across the variables' tokens; ``lead`` tells it how far ahead to predict and
    learned positions which variable a token is. With a fitted `ridge` (a LeadRidge) a linear
    path with one map per lead has its function class: every input of the sample where it
    flattened them (a station's few variables do), each token's own where it regressed per
    token. Sizes from the fitted windows."""
    linear = ridge is not None
    return build(windows.model_config(
        d_model=config.d_model, nhead=config.nhead, num_layers=config.num_layers,
        dim_feedforward=config.dim_feedforward, dropout=config.dropout, positions="learned",
        max_len=n_tokens, coordinates=list(config.coordinates), linear=linear,
        linear_leads=lead_seconds(windows) if linear else None,
        linear_tokens=ridge.n_tokens if linear and ridge.flatten else None, seed=config.seed))


def fit_baselines(windows, train_ds, val_ds, batch_size):
    """The baselines of seqattn.baselines for these batches and windows (persistence, seasonal
    persistence where the history reaches a day back, climatology, ridge per lead), fitted on
    `train_ds` with their choices made on `val_ds`."""
    training = windows.batches(train_ds, batch_size=batch_size)
    validation = windows.batches(val_ds, batch_size=batch_size)
    return [baseline.fit(training, validation)
            for baseline in for_batch(next(iter(training)), windows)]


def train_candidate(config, windows, train_ds, val_ds, ridge=None, progress=True):
    """The model and its history; with a fitted `ridge` its linear path starts there and
    stays: training moves the attention residual only, and early stopping on `val_ds` keeps
    the start when no epoch beats it."""
    training = windows.batches(train_ds, batch_size=config.batch_size, shuffle=True,
                               seed=config.seed)
    validation = windows.batches(val_ds, batch_size=config.batch_size)
    model = build_model(config, windows, len(train_ds.data_vars), ridge)
    trained = model.named_parameters()
    if ridge is not None:
        warm_start(model, ridge)
        # weight decay would shrink the fitted maps: they stay as fitted
        trained = residual_parameters(model)
    steps = config.epochs * len(training)
    schedule = WarmupCosine(config.lr, max(1, steps // 20), steps, min_lr=config.lr / 20)
    stopping = EarlyStopping(patience=config.patience, include_start=ridge is not None)
    # missing targets (a gap in the record) count for nothing in the NaN-aware loss
    history = fit(model, MSELoss(skip_nan=True),
                  AdamW(trained, lr=config.lr, weight_decay=config.weight_decay), training,
                  validation=validation, epochs=config.epochs, seed=config.seed,
                  schedule=schedule, clip_grad_norm=1.0, early_stopping=stopping,
                  progress=progress)
    if progress:
        kept = "the ridge" if stopping.best_epoch == -1 else f"epoch {stopping.best_epoch + 1}"
        print(f"kept {kept} (September loss {stopping.best:.4f})")
    return model, history


def train(config, train_ds, val_ds, progress=True):
    """The forecast set-up (statistics from `train_ds` only), the baselines fitted on it, the
    candidates of ``config.linear`` trained and chosen on `val_ds`'s RMSE
    (seqattn.train.select: its ``model`` is the chosen one, ``table`` the candidates'
    September scores), and the chosen candidate's history."""
    windows = forecast_set_up(config, list(train_ds.data_vars)).fit(train_ds)
    # few large batches: the baselines' fits read every sample anyway
    baselines = fit_baselines(windows, train_ds, val_ds, batch_size=4096)
    ridge = next(b for b in baselines if isinstance(b, LeadRidge))
    histories = {}

    def candidate(linear):
        model, histories[CANDIDATES[linear]] = train_candidate(
            config, windows, train_ds, val_ds, ridge if linear else None, progress)
        return model

    choice = select({CANDIDATES[linear]: linear for linear in config.linear}, train=candidate,
                    score=lambda model: seqattn.evaluate(model, val_ds, windows,
                                                         baselines=False, batch_size=4096),
                    metric="rmse")
    return windows, baselines, choice, histories[choice.name]


# ---- skill -----------------------------------------------------------------------------------

def print_scores(scores):
    rmse = scores["rmse"].to_pandas().T
    rmse.index = [f"{int(lead / np.timedelta64(1, 'h'))}h" for lead in rmse.index]
    rmse.loc["mean"] = rmse.mean()
    print(f"RMSE of {TARGET} [degC] on the test months, per lead ({int(scores.n[0])} forecasts "
          "per lead):")
    print(rmse.to_string(float_format="%.3f"))


def plot(path, forecast, observed, lead_index, days=7):
    """The last `days` test days: the observations, and the model's forecasts `lead_index`
    leads ahead."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    end = observed["time"].values[-1]
    span = slice(end - np.timedelta64(days * 24, "h"), end)
    lead = int(forecast["lead"].values[lead_index] / np.timedelta64(1, "h"))
    fig, ax = plt.subplots(figsize=(12, 4), constrained_layout=True)
    ax.plot(observed.sel(time=span)["time"], observed.sel(time=span), "k", lw=2, label="observed")
    ax.plot(forecast.sel(time=span)["time"], forecast.isel(lead=lead_index).sel(time=span), lw=1,
            label=f"seqattn, {lead} h ahead")
    ax.set_ylabel(f"{TARGET} [degC]")
    ax.set_title(f"Greensboro, the last {days} test days: forecasts {lead} h ahead")
    ax.legend(fontsize=8)
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main(argv=None, config=None, progress=True):
    """Run the pipeline; returns a dict with ``scores`` (seqattn.evaluate's Dataset: RMSE per
    lead of the model and the baselines), ``forecast`` (the model's Dataset, NaN outside the
    test months), ``selection`` (seqattn.train.select's choice among the candidates: the
    chosen ``name`` and ``model``, every candidate's ``models`` and September ``table``),
    ``windows`` (the fitted set-up), ``baselines`` (the fitted baselines that were scored),
    ``history`` (the chosen candidate's) and ``seconds``."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="a short run (about 2 minutes)")
    parser.add_argument("--plot", metavar="PATH", help="save a figure (needs matplotlib)")
    args = parser.parse_args(argv)
    config = config or ExampleConfig(**(QUICK if args.quick else {}))
    start = time.perf_counter()

    ds = read_station(tmy3_path())
    train_ds = months(ds, *config.train_months)
    val_ds = months(ds, config.validation_month, config.validation_month, config.history)
    test_ds = months(ds, *config.test_months, config.history)
    windows, baselines, choice, history = train(config, train_ds, val_ds, progress)
    model = choice.model
    # few large batches: cutting the windows costs more than the model on them
    forecast = seqattn.predict(model, test_ds, windows, batch_size=4096)
    scores = seqattn.evaluate(model, test_ds, windows, baselines=baselines, batch_size=4096)
    september = ", ".join(f"{name} {rmse:.3f}" for name, rmse in
                          zip(choice.table.candidate.values, choice.table.rmse.values))
    print(f"trained on months {config.train_months} ({train_ds.sizes['time']} h); chosen on "
          f"month {config.validation_month}'s RMSE [degC] ({september}): {choice.name}, "
          f"early-stopped after {len(history['loss'])} epochs; baselines fitted on the same "
          f"months, their choices made on month {config.validation_month}")
    print_scores(scores)
    if args.plot:
        plot(args.plot, forecast[TARGET].isel(station=0), test_ds[TARGET].isel(station=0),
             len(config.leads) - 1)
        print(f"figure saved to {args.plot}")
    seconds = time.perf_counter() - start
    print(f"total {seconds:.0f} s")
    return {"scores": scores, "forecast": forecast, "selection": choice, "windows": windows,
            "baselines": baselines, "history": history, "seconds": seconds}


if __name__ == "__main__":
    main()
