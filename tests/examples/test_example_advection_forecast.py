"""The advection example (the README's main job) in its --quick mode, scored by
seqattn.evaluate with latitude weights against the baselines of seqattn.baselines on its inputs.
The model's linear path has one map per lead of each patch's inputs, the function class of the
library's ridge on each patch's history per lead ("lead token ridge"), and starts at that very
fitted ridge: the test checks that the starting model predicts what the ridge does on every
test sample. Attending to its west and east neighbours, it beats every baseline at both leads,
the strongest among them, that ridge, included, in the mean RMSE over the quick run's seed and
two more (each seed simulates its own world and trains its own model). The 6 h margin is the
smaller one: without the weights' moving average, which epoch early stopping kept followed the
floating-point rounding of the CPU and BLAS at hand, and one seed's 6 h forecast won or lost
against the ridge from one machine kind to another (BENCHMARKS.md, "CPUs with AVX2 but not
AVX-512")."""
import dataclasses

import numpy as np
import pytest

import seqattn
from test_examples import load_example
from train_tasks import one_numba_thread  # noqa: F401  (tiny shapes run faster on one thread)
from seqattn.baselines import LeadRidge, warm_start

pytestmark = pytest.mark.slow  # minutes in all: the file runs first (tests/conftest.py)


def test_advection_quick_starts_at_the_ridge_and_beats_the_strongest_baseline():
    example = load_example("advection_forecast")
    result = example.main(["--quick"], progress=False)

    scores = result["scores"]
    hours = scores.lead.values / np.timedelta64(1, "h")
    assert hours.tolist() == [6, 12]
    baselines = list(scores.predictor.values[1:])
    assert {"persistence", "climatology", "lead token ridge"} <= set(baselines), baselines
    rmse = scores.rmse
    assert np.isfinite(rmse).all(), rmse.values
    assert seqattn.evaluation.strongest_baseline(scores) == "lead token ridge", rmse.to_pandas()
    quick = example.ExampleConfig(**example.QUICK)
    per_seed = [rmse] + [
        example.main(["--quick"], progress=False,
                     config=dataclasses.replace(quick, seed=seed))["scores"].rmse
        for seed in (1, 2)]
    mean = sum(per_seed) / len(per_seed)
    for baseline in baselines:
        beaten = mean.sel(predictor="model") < mean.sel(predictor=baseline)
        assert beaten.all(), (baseline, [r.to_pandas() for r in per_seed])

    truth, predicted = result["truth"], result["forecast"]
    assert predicted["tracer"].dims == ("lead", "time", "lat", "lon")
    assert predicted["tracer"].attrs["units"] == truth["tracer"].attrs["units"]
    # every test time with a full history there is forecast, and only those
    forecast = np.isfinite(predicted["tracer"]).all(("lat", "lon"))
    cells = truth.sizes["lat"] * truth.sizes["lon"]
    np.testing.assert_array_equal(forecast.sum("time").values * cells, scores.n.values)

    # the model started from the scored ridge (before any training) is that ridge, sample by
    # sample, on the test period
    config = example.ExampleConfig(**example.QUICK)
    windows = result["windows"]
    ridge = next(b for b in result["baselines"] if isinstance(b, LeadRidge))
    assert ridge.name == "lead token ridge"
    start = warm_start(example.build_model(config, windows, ridge), ridge)
    _, _, test = example.split_in_time(truth, config.train_fraction, config.validation_fraction)
    for batch in windows.batches(truth, where=test, batch_size=64):
        np.testing.assert_allclose(start(batch.tokens, batch.key_padding_mask,
                                         coords=batch.coords),
                                   ridge.predict(batch), rtol=1e-4, atol=1e-4)
