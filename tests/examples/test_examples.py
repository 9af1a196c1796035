"""The example pipelines run end to end in a tiny configuration (their full runs are the
project's main job, not tests)."""
import importlib.util
from pathlib import Path

import numpy as np

import seqattn

from train_tasks import one_numba_thread  # noqa: F401  (tiny shapes run faster on one thread)

EXAMPLES = Path(__file__).resolve().parent.parent.parent / "examples"


def load_example(name):
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_advection_forecast_runs_end_to_end(tmp_path):
    example = load_example("advection_forecast")
    config = example.ExampleConfig(nlat=8, nlon=16, days=16, spinup_days=4, d_model=16, nhead=2,
                                   num_layers=1, dim_feedforward=32, fourier_frequencies=4,
                                   epochs=4, batch_size=8)
    result = example.main(["--save", str(tmp_path)], config=config, progress=False)

    scores = result["scores"]
    assert (scores.lead.values / np.timedelta64(1, "h")).tolist() == [6, 12]
    predictors = scores.predictor.values.tolist()
    assert predictors[0] == "model"
    assert {"persistence", "climatology"} <= set(predictors[1:]), predictors
    rmse = scores.rmse.transpose("predictor", "lead").values
    assert np.isfinite(rmse).all() and (rmse >= 0).all(), scores.rmse.to_pandas()
    assert np.isfinite(scores.rmse_skill.sel(predictor="model")).all(), scores.rmse_skill.values
    assert (scores.n > 0).all(), scores.n.values
    loss = result["history"]["loss"]
    assert loss[-1] < loss[0], loss

    truth, predicted = result["truth"], result["forecast"]
    for dim in ("lat", "lon", "time"):
        np.testing.assert_array_equal(predicted[dim].values, truth[dim].values, err_msg=dim)
    assert predicted["tracer"].dims == ("lead", "time", "lat", "lon")
    assert predicted["tracer"].attrs["units"] == truth["tracer"].attrs["units"]
    # every initial time of the test period with its history there is forecast at each lead
    # whose valid time is in the data, and only those; each of their cells is scored
    _, _, test = example.split_in_time(truth, config.train_fraction, config.validation_fraction)
    forecast = np.isfinite(predicted["tracer"]).all(("lat", "lon"))
    expected = [int(test.sum()) - config.history - lead for lead in config.leads]
    assert forecast.sum("time").values.tolist() == expected
    first_test_time = truth.time.values[test.values][0]
    for lead in predicted.lead.values:
        valid = predicted.time.values[forecast.sel(lead=lead).values]
        assert (valid - lead >= first_test_time).all(), lead
    cells = truth.sizes["lat"] * truth.sizes["lon"]
    np.testing.assert_array_equal(forecast.sum("time").values * cells, scores.n.values)

    # the saved model and set-up forecast the test period identically
    model = seqattn.load(tmp_path / "model")
    windows = seqattn.load(tmp_path / "windows")
    again = seqattn.predict(model, truth, windows, where=test, batch_size=config.batch_size)
    np.testing.assert_array_equal(again["tracer"].values, predicted["tracer"].values)
