"""The Greensboro station example in its --quick mode (4 epochs) beats every baseline
seqattn.evaluate fits on the model's inputs (persistence, climatology, ridge per lead) at every
lead 1-6 h, and the strongest of them by 3% on the mean over leads. (Its increments are scaled
per lead, lead_scales="rms", chosen on September: without it the loss is dominated by the long
leads, whose increments are largest, and the 1 h lead trailed ridge.)"""
import numpy as np
import pytest

from seqattn.evaluation import strongest_baseline
from test_examples import load_example
from train_tasks import one_numba_thread  # noqa: F401  (tiny shapes run faster on one thread)

pytest.importorskip("pvlib")


def test_station_forecast_quick_beats_the_strongest_library_baseline():
    example = load_example("station_forecast")
    result = example.main(["--quick"], progress=False)

    scores = result["scores"]
    hours = scores.lead.values / np.timedelta64(1, "h")
    assert hours.tolist() == [1, 2, 3, 4, 5, 6]
    assert (scores.n > 2000).all(), scores.n.values  # October-December, every hour
    baselines = list(scores.predictor.values[1:])
    assert {"persistence", "climatology", "lead ridge"} <= set(baselines), baselines
    rmse = scores.rmse
    assert np.isfinite(rmse).all(), rmse.values
    for baseline in baselines:
        beaten = rmse.sel(predictor="model") < rmse.sel(predictor=baseline)
        assert beaten.all(), (baseline, rmse.to_pandas())
    strongest = strongest_baseline(scores)
    mean = rmse.mean("lead")
    assert mean.sel(predictor="model") < 0.97 * mean.sel(predictor=strongest), mean.to_pandas()

    temperature = result["forecast"]["temperature"]
    assert temperature.dims == ("lead", "time", "station")
    assert temperature.attrs["units"] == "degC"
