"""benchmarks/transfer_advection.py computes its figures honestly: the advection recipe's quick
path on one seed of the transfer world, with the model's and persistence's latitude-weighted
RMSE per lead recomputed by hand (the model's from seqattn.predict, persistence's from the
simulated truth alone), the test times read by one batches call only (seqattn.evaluate's
scoring), a split in time without overlap, and transfer data that differ from the example's own
in the physics the module names, not in the recipe's seed. No assertion that seqattn wins."""
import dataclasses
import sys
from pathlib import Path

import numpy as np
import pytest

import seqattn
from seqattn.adapters import ForecastWindows
from train_tasks import one_numba_thread  # noqa: F401  (tiny shapes run faster on one thread)

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import transfer_advection  # noqa: E402


def weighted_rmse(predicted, truth, lat):
    """The cos(latitude)-weighted RMSE over every finite (time, lat, lon) value."""
    weights = np.broadcast_to(np.cos(np.deg2rad(np.asarray(lat)))[None, :, None],
                              predicted.shape)
    known = np.isfinite(predicted)
    error = (predicted - truth)[known]
    return float(np.sqrt(np.sum(weights[known] * error ** 2) / np.sum(weights[known])))


def test_transfer_world_is_other_data_of_the_same_kind():
    module = transfer_advection.example("advection_forecast")
    config = module.ExampleConfig(**module.QUICK)
    own = module.simulate(config)
    world = transfer_advection.transfer_data(module, config)
    assert world.tracer.shape == own.tracer.shape
    np.testing.assert_array_equal(world.time.values, own.time.values)
    assert np.isfinite(world.tracer).all() and (world.tracer >= 0).all()
    # easterlies at the equator where the example's air moves east; the jets' cores poleward
    equator = np.abs(world.lat.values) < 5
    assert (world.u.values[equator] < 0).all() and (own.u.values[equator] > 0).all()
    for ds, latitude in ((own, 45), (world, 55)):
        core = ds.lat.values[np.argmax(ds.u.mean("lon").values)]
        assert abs(core) == pytest.approx(latitude, abs=3)
    # the tracer lies elsewhere: the two worlds' fields are unrelated, not a rescaling
    correlation = np.corrcoef(own.tracer.values.ravel(), world.tracer.values.ravel())[0, 1]
    assert abs(correlation) < 0.5, correlation
    # one transfer world for every recipe seed (the seed moves training only)
    again = transfer_advection.transfer_data(module, dataclasses.replace(config, seed=1))
    np.testing.assert_array_equal(again.tracer.values, world.tracer.values)
    # the example's defaults are its own world
    np.testing.assert_array_equal(module.simulate(config, module.Physics()).tracer.values,
                                  own.tracer.values)


def test_quick_seed_is_scored_honestly(monkeypatch):
    read = []  # the time indices each batches call reads
    batches = ForecastWindows.batches

    def spy(self, ds, *args, where=None, **kwargs):
        read.append(np.flatnonzero(where.values) if where is not None
                    else np.arange(ds.sizes["time"]))
        return batches(self, ds, *args, where=where, **kwargs)

    runs = []
    seed_run = transfer_advection.advection_seed

    def keep(module, ds, config):
        runs.append((ds, config, seed_run(module, ds, config)))
        return runs[-1][2]

    monkeypatch.setattr(ForecastWindows, "batches", spy)
    monkeypatch.setattr(transfer_advection, "advection_seed", keep)
    (row,) = transfer_advection.rows(quick=True, seeds=(0,))
    monkeypatch.setattr(ForecastWindows, "batches", batches)
    (ds, config, run), = runs
    assert config.seed == 0 and row.seeds == (0,)

    # the split in time: disjoint, in order, covering every time
    train, valid, test = (np.flatnonzero(p.values) for p in run["parts"])
    assert len(train) and len(valid) and len(test)
    assert train.max() < valid.min() and valid.max() < test.min()
    assert len(train) + len(valid) + len(test) == ds.sizes["time"]
    # the test times are read once, alone: by evaluate's scoring
    reading_test = [r for r in read if np.isin(r, test).any()]
    assert len(reading_test) == 1
    np.testing.assert_array_equal(reading_test[0], test)

    scores = run["scores"]
    leads = scores.lead.values
    assert (leads / np.timedelta64(1, "h")).tolist() == [6, 12]
    assert {"persistence", "climatology", "lead token ridge"} <= set(row.baselines)
    forecast = seqattn.predict(run["model"], ds, run["windows"], where=run["parts"][2],
                               batch_size=config.batch_size)["tracer"]
    truth = ds["tracer"].astype(np.float64)
    first_test_time = ds.time.values[test[0]]
    model_rmse, persistence_rmse = [], []
    for lead, steps in zip(leads, config.leads):
        predicted = forecast.sel(lead=lead).astype(np.float64)
        made = np.isfinite(predicted).all(("lat", "lon")).values
        valid_times = ds.time.values[made]
        # only test initial times with their history in the test period are forecast
        assert (valid_times - lead >= first_test_time).all()
        assert made.sum() == len(test) - config.history - steps
        model_rmse.append(weighted_rmse(predicted.values[made], truth.values[made], ds.lat))
        before = truth.sel(time=valid_times - lead).values
        persistence_rmse.append(weighted_rmse(before, truth.values[made], ds.lat))
    rmse = scores.rmse.transpose("predictor", "lead")
    np.testing.assert_allclose(rmse.sel(predictor="model"), model_rmse, rtol=1e-5)
    np.testing.assert_allclose(rmse.sel(predictor="persistence"), persistence_rmse, rtol=1e-5)
    # the row holds the mean over the leads, the strongest baseline the best of them
    assert row.model[0] == pytest.approx(np.mean(model_rmse), rel=1e-5)
    assert row.baselines["persistence"][0] == pytest.approx(np.mean(persistence_rmse),
                                                            rel=1e-5)
    means = {name: v[0] for name, v in row.baselines.items()}
    assert row.strongest()[0] == min(means, key=means.get)
    assert row.margin() == pytest.approx(min(means.values()) - row.model[0])
