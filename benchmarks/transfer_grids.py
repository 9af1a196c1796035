"""The transfer domain ``grids`` (docs/transfer.md, issue 38): ``examples/sst_forecast.py``'s
recipe, fixed on the OSTIA monthly sea-surface temperature of the equatorial band (5S-5N all
round the globe, 54 months), run unchanged on HadCM3's annual mean near-surface (1.5 m) air
temperature over North America under the SRES A1B scenario, 1860-2099, the file iris-sample-data
ships beside the OSTIA one (``sample_data/A1B_north_america.nc``, plain netCDF4, read by path).
The task is the recipe's: a gridded field one time step ahead from its last three steps.

Why this file. The OSTIA file holds the example's band only (18 latitudes, 5S-4.4N), so it has
no other band. Of iris-sample-data's other files, the GloSea4 forecasts, the UM sea-ice
velocities and colpex are PP files (iris, which the project does not use), the NEMO files hold 3
months, orca2_votemper one, SOI_Darwin a single series. The two HadCM3 files are gridded fields
with 240 steps; ``E1_north_america.nc`` equals the A1B file up to 1999 (the same historical
run), so it is not a second independent set, and A1B is taken.

What changes, and only because the file differs (docs/transfer.md, section 3):

* the reader (``read_hadcm3``): ``air_temperature`` becomes the recipe's variable ``sst`` (K), the
  dims ``lat``/``lon``; the times are the file's (360-day calendar, one per model year: evenly
  spaced already, so none is re-stamped);
* the split: the recipe trains on its first 36 of 54 steps, validates on the next 6 and tests
  on the rest; here the same fractions of 240 steps (``split``: 160, 27 and 53, the example's
  own ``split`` with those counts);
* the padding: the recipe's grid goes all round the globe, so its longitude is periodic and
  padding wraps; this box spans 92 degrees, where wrapping would put Pacific-coast cells beside
  Atlantic ones, so its padding is masked instead (``grid_periodic``).

Everything else is the example's: ExampleConfig and QUICK, ``forecast_set_up`` (GridAdapter
patches with calendar features, ForecastWindows of 3 steps, one step ahead, increments),
``train`` and the choice main makes with ``seqattn.train.select`` on the validation steps
between attention alone and attention learning the residual of the linear path started at the
lead token ridge. The test steps are scored once per seed by one ``seqattn.evaluate`` call,
which fits the baselines (persistence, climatology, lead token ridge) on the training steps and
makes their choices on the validation steps, as the example's call does; the example prints no
baseline of its own.

Run ``python benchmarks/transfer_grids.py [--quick] [--seeds 0]``.
"""
import dataclasses
import time

import numpy as np
import xarray as xr

import seqattn
from seqattn.train.select import select
from transfer_rows import Row, example, metric_of, run_alone

GRID_FILE = "A1B_north_america.nc"
SEEDS = (0, 1, 2)

def hadcm3_path(module):
    """The A1B file, in the folder of the recipe's own OSTIA file."""
    return module.ostia_path().parent / GRID_FILE


def read_hadcm3(path):
    """HadCM3's annual mean 1.5 m air temperature as the recipe's Dataset: ``sst`` (time, lat,
    lon) in K, float32, on the file's 360-day calendar times (one per model year)."""
    raw = xr.open_dataset(path, engine="h5netcdf",
                          decode_times=xr.coders.CFDatetimeCoder(use_cftime=True))
    air = raw["air_temperature"].rename(latitude="lat", longitude="lon").load()
    if air.attrs.get("units") != "K":
        raise ValueError(f"{path} holds air_temperature in {air.attrs.get('units')!r}; the "
                         "reader expects K")
    days = np.diff([t.toordinal() for t in air["time"].values])
    if len(set(days)) != 1:
        raise ValueError(f"{path}'s times are not evenly spaced (steps of {sorted(set(days))} "
                         "days); forecast leads need an even axis")
    sst = air.reset_coords(drop=True).astype(np.float32)
    sst.attrs = {"long_name": "air temperature at 1.5 m, annual mean (HadCM3, SRES "
                              f"{air.attrs.get('Model scenario')})", "units": "K"}
    return xr.Dataset({"sst": sst}, attrs={"title": "HadCM3 annual mean air temperature, "
                                                    "North America", "source": str(path)})


def split(module, config, ds):
    """The example's split (its first ``train_months`` steps train, the next
    ``validation_months`` validate, the rest test; the later parts keep the steps before them as
    inputs) at the fractions of the recipe's own record those counts make."""
    own = module.read_sst(module.ostia_path()).sizes["time"]
    scale = ds.sizes["time"] / own
    counts = dataclasses.replace(config, train_months=round(config.train_months * scale),
                                 validation_months=round(config.validation_months * scale))
    return module.split(ds, counts)


def grid_periodic(windows, ds):
    """`windows` with its grid's periodic dims kept only where the grid closes on itself (a
    longitude whose cells cover 360 degrees): the recipe's band goes round the globe, a regional
    box does not, and its padding is then masked, not wrapped. Periodicity only decides how
    patches are padded, which fit does not read, so the fitted windows are kept."""
    adapter = windows.adapter
    lon = ds[adapter.lon].values
    step = abs(float(lon[1] - lon[0]))
    closes = abs(step * len(lon) - 360.0) < step / 2
    adapter.periodic = tuple(d for d in adapter.periodic if d != adapter.lon or closes)
    return windows


def grid_seed(module, ds, seed, quick=False):
    """One seed of the recipe on `ds`: the example's windows, its two candidates trained with
    early stopping on the validation steps and chosen on their validation RMSE (as its main
    does), then one seqattn.evaluate on the test steps, the baselines fitted on the training
    steps and choosing on the validation steps. Returns the parts, windows, choice and scores."""
    config = module.ExampleConfig(**(module.QUICK if quick else {}), seed=seed)
    train_ds, val_ds, test_ds = split(module, config, ds)
    windows = grid_periodic(module.forecast_set_up(config, train_ds), ds)
    choice = select({"attention": False, "attention + linear path from ridge": True},
                    train=lambda linear: module.train(config, windows, train_ds, val_ds, linear,
                                                      progress=False),
                    score=lambda model: seqattn.evaluate(model, val_ds, windows, baselines=False,
                                                         batch_size=config.batch_size),
                    metric="rmse")
    scores = seqattn.evaluate(choice.model, ds, windows, where=ds.time.isin(test_ds.time),
                              train=ds.time.isin(train_ds.time),
                              validation=ds.time.isin(val_ds.time),
                              batch_size=config.batch_size)
    return {"config": config, "parts": (train_ds, val_ds, test_ds), "windows": windows,
            "choice": choice, "scores": scores}


def years(part):
    return f"{part.time.values[0].year}-{part.time.values[-1].year}"


def rows(quick=False, seeds=None):
    """The sst_forecast recipe on HadCM3's A1B North American air temperature: test RMSE [K]
    one year ahead over the last 53 years (their inputs from the 3 years before), per seed,
    against the baselines seqattn.evaluate fits."""
    module = example("sst_forecast")
    ds = read_hadcm3(hadcm3_path(module))
    seeds = tuple(SEEDS if seeds is None else seeds)
    model_scores, baseline_scores, chosen = [], {}, []
    for seed in seeds:
        start = time.perf_counter()
        run = grid_seed(module, ds, seed, quick)
        rmse = metric_of(run["scores"], "rmse")
        model_scores.append(rmse.pop("model"))
        for name, value in rmse.items():
            baseline_scores.setdefault(name, []).append(value)
        table = run["choice"].table
        validation = {str(c): round(float(v), 3)
                      for c, v in zip(table.candidate.values, table.rmse.values)}
        chosen.append(f"seed {seed}: {run['choice'].name} (validation RMSE {validation})")
        print(f"grids seed {seed}: chosen {run['choice'].name} on validation {validation}; "
              f"test RMSE [K] seqattn {model_scores[-1]:.4f}, " + ", ".join(
                  f"{name} {v[-1]:.4f}" for name, v in baseline_scores.items())
              + f" ({time.perf_counter() - start:.0f} s)", flush=True)
    train_ds, val_ds, test_ds = run["parts"]
    n_test = int(test_ds.sizes["time"]) - module.ExampleConfig().history - 1
    return [Row("sst_forecast.py" + (" --quick" if quick else ""),
                f"iris-sample-data {GRID_FILE} (HadCM3 SRES A1B annual mean 1.5 m air "
                f"temperature, North America {ds.sizes['lat']}x{ds.sizes['lon']}), trained "
                f"{years(train_ds)}, tested on {n_test} years to {test_ds.time.values[-1].year}, "
                "1 year ahead", "rmse", seeds, model_scores, baseline_scores,
                notes=f"chosen: {chosen}")]


if __name__ == "__main__":
    run_alone(rows, "grids", __doc__.split("\n")[0])
