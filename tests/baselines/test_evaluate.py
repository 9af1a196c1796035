"""seqattn.evaluate: the model and the baselines on the same samples, scored over the whole set in
physical units, per lead and per class, through small protocol adapters of the tests' own."""
import json

import numpy as np
import pandas as pd
import pytest
import xarray as xr
from sklearn.metrics import roc_auc_score

import seqattn
from evaluation_adapters import SeriesAdapter, StationForecastAdapter
from seqattn.baselines import NearestNeighbour, PooledFeatures
from seqattn.evaluation import strongest_baseline, table

RNG = np.random.default_rng(7)
LEADS = (1, 2, 3)


def station(hours=600):
    time = pd.date_range("2020-01-01", periods=hours, freq="h")
    daily = 5 * np.cos(2 * np.pi * np.arange(hours) / 24)
    noise = np.zeros(hours)
    for i in range(1, hours):  # weather: an AR(1) departure from the daily cycle
        noise[i] = 0.9 * noise[i - 1] + 0.5 * RNG.normal()
    return xr.Dataset({"x": ("time", 10 + daily + noise)}, coords={"time": time})


def persistence_model(tokens, key_padding_mask):
    return tokens[..., -1:]


def test_scores_are_per_lead_in_physical_units_on_the_same_samples():
    ds = station()
    adapter = StationForecastAdapter(leads=LEADS).fit(ds, where=slice(0, 400))
    test = slice(500, 600)
    scores = seqattn.evaluate(persistence_model, ds, adapter, where=test, batch_size=16,
                              train=slice(0, 400), validation=slice(400, 500))
    assert list(scores.predictor.values[:1]) == ["model"]
    assert {"persistence", "climatology", "lead ridge"} <= set(scores.predictor.values)
    x = ds.x.values
    for i, lead in enumerate(LEADS):
        starts = np.arange(500, 600 - lead)
        expected = np.sqrt(np.mean((x[starts + lead] - x[starts]) ** 2))
        assert scores.rmse.sel(predictor="model").isel(lead=i) == pytest.approx(expected,
                                                                                rel=1e-5)
        assert int(scores.n.isel(lead=i)) == len(starts)
    # the model is persistence: the persistence baseline scores exactly the same
    np.testing.assert_allclose(scores.rmse.sel(predictor="model"),
                               scores.rmse.sel(predictor="persistence"), rtol=1e-6)
    assert scores.rmse.sel(predictor="lead ridge").mean() < scores.rmse.sel(
        predictor="model").mean(), "a daily cycle: ridge on the history beats persistence"
    assert strongest_baseline(scores) in ("lead ridge", "climatology")
    assert (scores.rmse_skill.sel(predictor="model") < 0).all()
    assert isinstance(table(scores), pd.DataFrame)
    assert table(scores).index.names == ["predictor", "lead"]


def labelled(samples, steps=12):
    labels = RNG.integers(0, 2, samples)
    x = RNG.normal(size=(samples, steps)) + np.where(labels, 0.7, 0.0)[:, None]
    return xr.Dataset({"x": (("sample", "step"), x),
                       "y": ("sample", np.where(labels, "storm", "calm"))},
                      coords={"sample": np.arange(samples)})


def mean_model(tokens, key_padding_mask):
    mean = tokens[..., 0].mean(axis=1)
    return np.stack([-mean, mean], axis=1)


def test_auroc_and_accuracy_are_over_the_whole_set_not_means_over_batches():
    ds = labelled(240)
    adapter = SeriesAdapter().fit(ds, targets="y", where=slice(0, 120))
    scores = seqattn.evaluate(mean_model, ds, adapter, where=slice(160, 240), batch_size=8,
                              baselines=False)
    assert list(scores["class"].values) == ["calm", "storm"]
    labels = (ds.y.values[160:] == "storm").astype(int)
    mean = ((ds.x.values[160:] - adapter.mean) / adapter.std).mean(axis=1)
    assert float(scores.auroc.sel(predictor="model")) == pytest.approx(
        roc_auc_score(labels, mean), rel=1e-6)
    assert float(scores.accuracy.sel(predictor="model")) == pytest.approx(
        np.mean((mean > 0) == labels))
    recall = scores.recall.sel(predictor="model")
    assert float(recall.sel({"class": "storm"})) == pytest.approx(np.mean(mean[labels == 1] > 0))
    assert int(scores.n) == 80


def test_baselines_are_fitted_on_train_and_chosen_on_validation():
    ds = labelled(240)
    adapter = SeriesAdapter().fit(ds, targets="y", where=slice(0, 120))
    scores = seqattn.evaluate(mean_model, ds, adapter, where=slice(160, 240),
                              baselines=[PooledFeatures(), NearestNeighbour()],
                              train=slice(0, 120), validation=slice(120, 160))
    assert list(scores.predictor.values[:2]) == ["model", "pooled logistic"]
    assert scores.predictor.values[2].endswith("nearest neighbour")
    train = list(adapter.batches(ds, where=slice(0, 120), batch_size=64))
    valid = list(adapter.batches(ds, where=slice(120, 160), batch_size=64))
    by_hand = PooledFeatures().fit(train, valid)
    chosen = json.loads(scores.chosen.sel(predictor="pooled logistic").item())
    assert chosen["C"] == by_hand.chosen["C"]
    assert list(chosen["validation_log_loss"].values()) == list(
        by_hand.chosen["validation_log_loss"].values())


def test_fitted_baselines_are_used_as_they_are():
    ds = labelled(200)
    adapter = SeriesAdapter().fit(ds, targets="y", where=slice(0, 100))
    fitted = PooledFeatures().fit(adapter.batches(ds, where=slice(0, 100)),
                                  adapter.batches(ds, where=slice(100, 150)))
    scores = seqattn.evaluate(mean_model, ds, adapter, where=slice(150, 200),
                              baselines=[fitted])
    assert list(scores.predictor.values) == ["model", "pooled logistic"]


def test_baselines_need_training_and_validation_samples():
    ds = labelled(60)
    adapter = SeriesAdapter().fit(ds, targets="y")
    with pytest.raises(ValueError, match="train=None, validation=None"):
        seqattn.evaluate(mean_model, ds, adapter)


def regression(samples):
    x = RNG.normal(size=(samples, 6))
    return xr.Dataset({"x": (("sample", "step"), x),
                       "y": ("sample", 100 + 20 * x.mean(axis=1) + RNG.normal(size=samples))},
                      coords={"sample": np.arange(samples)})


def test_values_per_sample_come_back_in_the_targets_units():
    ds = regression(300)
    adapter = SeriesAdapter().fit(ds, targets="y", where=slice(0, 200))

    def constant(tokens, key_padding_mask):  # predicts the training mean, in normalized units
        return np.zeros((len(tokens), 1))
    scores = seqattn.evaluate(constant, ds, adapter, where=slice(250, 300),
                              train=slice(0, 200), validation=slice(200, 250))
    y = ds.y.values[250:]
    assert float(scores.bias.sel(predictor="model")) == pytest.approx(
        adapter.target_mean - y.mean(), rel=1e-6)
    assert float(scores.r2.sel(predictor="pooled ridge")) > 0.8
