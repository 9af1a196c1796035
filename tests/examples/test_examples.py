"""The example pipelines run end to end in a tiny configuration (their full runs are the
project's main job, not tests)."""
import importlib.util
import math
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
    assert sorted(scores) == ["12h", "6h"]
    for lead, row in scores.items():
        for name in ("model", "persistence", "climatology", "model/persistence"):
            assert math.isfinite(row[name]) and row[name] >= 0, (lead, name, row)
        assert row["n_forecasts"] > 0
    loss = result["history"]["loss"]
    assert loss[-1] < loss[0], loss

    truth, predicted = result["truth"], result["forecast"]
    for dim in ("lat", "lon", "time"):
        np.testing.assert_array_equal(predicted[dim].values, truth[dim].values, err_msg=dim)
    assert predicted["tracer"].dims == ("lead", "time", "lat", "lon")
    assert predicted["tracer"].attrs["units"] == truth["tracer"].attrs["units"]
    # every valid time with a full history is forecast, and only those are
    forecast_times = np.isfinite(predicted["tracer"]).all(("lat", "lon")).sum("time")
    assert forecast_times.values.tolist() == [row["n_forecasts"] for row in scores.values()]

    # the saved model and set-up forecast the same Dataset identically
    model = seqattn.load(tmp_path / "model")
    windows = seqattn.load(tmp_path / "windows")
    again = seqattn.predict(model, truth, windows, batch_size=config.batch_size)
    np.testing.assert_array_equal(again["tracer"].values, predicted["tracer"].values)
