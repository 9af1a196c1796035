"""Forecasting baselines against hand computations: persistence finds the target's own cells,
climatology uses the training batches only, ridge is fitted per lead."""
import numpy as np
import pytest

from baseline_batches import forecast_batch
from seqattn.baselines import Climatology, LeadRidge, Persistence
from seqattn.baselines.forecasting import DAY, YEAR

RNG = np.random.default_rng(1)


def persistent(samples, increments=False):
    """Inputs (channel 0: noise, channel 1: the cell's last value); targets: that value plus a
    small change, or the change alone (increments)."""
    values = RNG.normal(size=(samples, 3, 2))
    change = 0.1 * RNG.normal(size=(samples, 3, 1))
    targets = change if increments else values[..., 1:] + change
    return forecast_batch(values, targets, np.arange(samples), np.ones(samples))


@pytest.mark.parametrize("increments, source", [(False, 1), (True, -1)])
def test_persistence_finds_the_cells_own_channel_or_zero(increments, source):
    fitted = Persistence().fit([persistent(40, increments)], [persistent(10, increments)])
    assert fitted.chosen["source_channel"] == [source]
    test = persistent(5, increments)
    expected = test.values[..., 1:] if source == 1 else np.zeros((5, 3, 1))
    np.testing.assert_array_equal(fitted.predict(test), expected)


def seasonal(hours, offset):
    """One token, a target with an annual cycle plus `offset`; initial times in hours."""
    hours = np.asarray(hours, float)
    valid = (hours + 6) * 3600.0
    targets = offset + np.cos(2 * np.pi * valid / YEAR) + 0.3 * np.sin(2 * np.pi * valid / DAY)
    values = RNG.normal(size=(len(hours), 1, 1))
    return forecast_batch(values, targets[:, None, None], hours, np.full(len(hours), 6))


def test_climatology_is_fitted_on_the_training_batches_only():
    train = seasonal(np.arange(0, 2 * 8766, 5), offset=0.0)       # two years
    validation = seasonal(np.arange(2 * 8766, 3 * 8766, 5), offset=1.0)  # a warmer year
    fitted = Climatology(harmonics=(1,)).fit([train], [validation])
    P = fitted.design(train, 1)[:, 0]
    coef, *_ = np.linalg.lstsq(P, train.targets[:, 0, 0].astype(float), rcond=None)
    test = seasonal(np.arange(3 * 8766, 3 * 8766 + 500, 7), offset=0.0)
    np.testing.assert_allclose(fitted.predict(test)[:, 0, 0], fitted.design(test, 1)[:, 0] @ coef,
                               atol=1e-4)
    np.testing.assert_allclose(fitted.predict(test)[:, 0, 0], test.targets[:, 0, 0], atol=1e-3)


def test_climatology_chooses_its_harmonics_on_validation():
    train = seasonal(np.arange(0, 2 * 8766, 5), offset=0.0)
    validation = seasonal(np.arange(2 * 8766, 3 * 8766, 5), offset=0.0)
    fitted = Climatology().fit([train], [validation])
    assert fitted.chosen["harmonics"] >= 1
    assert fitted.chosen["validation_mse"][0] > 10 * fitted.chosen["validation_mse"][1]


def test_climatology_needs_a_calendar():
    batch = persistent(4)
    del batch.coords["time"]
    with pytest.raises(ValueError, match=r"coordinates \['time', 'lead'\]"):
        Climatology().fit([batch], [batch])


def per_lead(samples):
    """Two leads whose targets are different linear maps of the flattened inputs."""
    values = RNG.normal(size=(samples, 2, 2))
    leads = np.where(np.arange(samples) % 2, 6, 1)
    flat = values.reshape(samples, 4)
    first = flat @ [1.0, 0.0, 0.0, 2.0]
    second = flat @ [0.0, -1.0, 3.0, 0.0]
    targets = np.where(leads == 1, first, second)[:, None, None] * [[1.0], [0.5]]
    return forecast_batch(values, targets, np.arange(samples), leads)


@pytest.mark.parametrize("max_features", [4096, 2])
def test_lead_ridge_fits_each_lead_on_its_own(max_features):
    fitted = LeadRidge(max_features=max_features).fit([per_lead(200)], [per_lead(60)])
    test = per_lead(20)
    if max_features == 4096:  # flattened: every lead's map is recovered
        assert sorted(fitted.chosen["per_lead"]) == [3600.0, 21600.0]
        np.testing.assert_allclose(fitted.predict(test), test.targets, atol=0.05)
    else:  # per token: a token's own inputs cannot carry the other token's value
        assert fitted.name == "lead token ridge"
        assert np.abs(fitted.predict(test) - test.targets).max() > 0.5


def test_lead_ridge_refuses_a_lead_it_never_saw():
    fitted = LeadRidge().fit([per_lead(40)], [per_lead(20)])
    unseen = forecast_batch(np.zeros((1, 2, 2)), np.zeros((1, 2, 1)), [0], [12])
    with pytest.raises(ValueError, match="lead 43200 was not among"):
        fitted.predict(unseen)


def test_climatology_is_fitted_per_lead():
    """Increments grow with the lead: each lead gets its own climatology."""
    hours = np.arange(0, 2000, 3)
    leads = np.where(np.arange(len(hours)) % 2, 6, 1)
    targets = np.where(leads == 6, 2.0, -1.0)[:, None, None] + 0.01 * RNG.normal(
        size=(len(hours), 1, 1))
    data = forecast_batch(RNG.normal(size=(len(hours), 1, 1)), targets, hours, leads)
    fitted = Climatology(harmonics=(0,)).fit([data], [data])
    np.testing.assert_allclose(fitted.predict(data)[:, 0, 0], np.where(leads == 6, 2.0, -1.0),
                               atol=0.01)


def test_lead_ridge_reads_the_hour_of_the_initial_time():
    hours = np.arange(0, 600)
    targets = np.cos(2 * np.pi * hours / 24)[:, None, None]
    data = forecast_batch(RNG.normal(size=(600, 1, 1)), targets, hours, np.ones(600))
    with_hour = LeadRidge().fit([data], [data])
    np.testing.assert_allclose(with_hour.predict(data), targets, atol=0.01)
    without = LeadRidge(time_of_day=False).fit([data], [data])
    assert np.abs(without.predict(data) - targets).mean() > 0.5
