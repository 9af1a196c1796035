"""benchmarks/transfer_grids.py computes its figures honestly: the sst_forecast recipe's quick
path on one seed of HadCM3's A1B North American air temperature (data the recipe was not fixed
on), with the model's and persistence's RMSE recomputed by hand, the test years read by one
batches call only (seqattn.evaluate's scoring), the parts disjoint in time and the row reporting
what was computed. No assertion that seqattn wins."""
import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

from train_tasks import one_numba_thread  # noqa: F401  (tiny shapes run faster on one thread)

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import transfer_grids  # noqa: E402

for package in ("iris_sample_data", "h5netcdf"):
    if importlib.util.find_spec(package) is None:
        pytest.skip(f"the grids transfer set needs {package}: pip install iris-sample-data "
                    "h5netcdf", allow_module_level=True)


@pytest.fixture(scope="module")
def module():
    return transfer_grids.example("sst_forecast")


@pytest.fixture(scope="module")
def ds(module):
    return transfer_grids.read_hadcm3(transfer_grids.hadcm3_path(module))


def forecast_years(model, part, windows):
    """The years seqattn.predict forecasts on `part` (each forecast lies on its target time)."""
    sst = transfer_grids.seqattn.predict(model, part, windows)["sst"].isel(lead=0)
    return [t.year for t in sst.time.values[np.isfinite(sst).any(("lat", "lon")).values]]


def test_the_transfer_data_are_not_the_recipes(module, ds):
    own = module.read_sst(module.ostia_path())
    assert transfer_grids.hadcm3_path(module) != module.ostia_path()
    assert ds.sizes == {"time": 240, "lat": 37, "lon": 49}
    assert float(ds.lat.min()) > float(own.lat.max())  # 15N-60N, not the recipe's 5S-5N
    assert ds.sst.attrs["units"] == own.sst.attrs["units"] == "K"
    assert np.isfinite(ds.sst.values).all() and 250 < float(ds.sst.mean()) < 300


def test_padding_wraps_only_a_grid_that_closes(module, ds):
    config = module.ExampleConfig(**module.QUICK)
    own = module.read_sst(module.ostia_path())
    band = transfer_grids.grid_periodic(module.forecast_set_up(config, own.isel(time=slice(36))),
                                        own)
    box = transfer_grids.grid_periodic(module.forecast_set_up(config, ds.isel(time=slice(160))),
                                       ds)
    assert band.adapter.periodic == ("lon",) and box.adapter.periodic == ()


def test_quick_seed_is_scored_honestly(module, ds, monkeypatch):
    from seqattn.adapters import ForecastWindows

    seen = []  # the years each batches call can read, in order
    batches = ForecastWindows.batches

    def spy(self, data, *args, where=None, **kwargs):
        times = data.time if where is None else data.time.where(where, drop=True)
        seen.append({t.year for t in times.values})
        return batches(self, data, *args, where=where, **kwargs)

    monkeypatch.setattr(ForecastWindows, "batches", spy)
    run = transfer_grids.grid_seed(module, ds, seed=0, quick=True)
    monkeypatch.setattr(ForecastWindows, "batches", batches)
    scores, windows, model = run["scores"], run["windows"], run["choice"].model
    train_ds, val_ds, test_ds = run["parts"]

    # the parts forecast disjoint, consecutive years: 160, 27 and 53 of 240 (the recipe's 36, 6
    # and 12 of its 54 months), the test the last 53
    parts = [forecast_years(model, part, windows) for part in run["parts"]]
    assert [len(p) for p in parts] == [157, 27, 53]  # the first 3 years are inputs only
    assert parts[0][-1] < parts[1][0] and parts[1][-1] < parts[2][0]
    assert parts[2] == list(range(2047, 2100)) and parts[0][0] == 1863

    # the test years are read once, by evaluate's scoring call, then the baselines read the
    # training and validation parts
    test_years = set(parts[2])
    reading_test = [i for i, years in enumerate(seen) if years & test_years]
    assert len(reading_test) == 1
    assert seen[reading_test[0]] == {t.year for t in test_ds.time.values}
    assert seen[reading_test[0] + 1:] == [{t.year for t in p.time.values}
                                          for p in (train_ds, val_ds)]
    assert int(scores["n"].squeeze("lead")) == 53 * 37 * 49  # every cell of every test year

    # the model's RMSE from seqattn.predict on the test years, by hand
    truth = ds.sst.astype(np.float64)
    forecast = transfer_grids.seqattn.predict(model, test_ds, windows)["sst"].isel(lead=0)
    forecast = forecast.sel(time=forecast.time.values[-53:]).astype(np.float64)
    by_hand = np.sqrt(np.mean((forecast - truth.sel(time=forecast.time)).values ** 2))
    rmse = transfer_grids.metric_of(scores, "rmse")
    assert rmse["model"] == pytest.approx(by_hand, rel=1e-5)

    # persistence: each test year forecast as the year before, by hand
    before = truth.isel(time=slice(-54, -1)).values
    assert rmse["persistence"] == pytest.approx(
        np.sqrt(np.mean((truth.isel(time=slice(-53, None)).values - before) ** 2)), rel=1e-5)
    assert {"persistence", "climatology", "lead token ridge"} <= set(rmse)

    # the row reports these figures, and the choice validation made
    (row,) = transfer_grids.rows(quick=True, seeds=(0,))
    assert row.model == [pytest.approx(rmse.pop("model"), rel=1e-6)]
    assert row.baselines == {name: [pytest.approx(v, rel=1e-6)] for name, v in rmse.items()}
    table = run["choice"].table
    assert table.rmse.sel(candidate=run["choice"].name) == table.rmse.min()
    assert run["choice"].name in row.notes
