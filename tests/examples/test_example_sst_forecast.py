"""The OSTIA sea-surface temperature example in its --quick mode beats its baselines."""
import math

import numpy as np
import pytest

from test_examples import load_example
from train_tasks import one_numba_thread  # noqa: F401  (tiny shapes run faster on one thread)

pytest.importorskip("iris_sample_data")
pytest.importorskip("h5netcdf")


def test_sst_forecast_quick_beats_persistence_and_climatology():
    example = load_example("sst_forecast")
    result = example.main(["--quick"], progress=False)

    scores = result["scores"]
    assert scores["n_months"] == 12
    assert all(math.isfinite(scores[name]) for name in ("seqattn", "persistence", "climatology"))
    assert scores["seqattn"] < scores["persistence"], scores
    assert scores["seqattn"] < scores["climatology"], scores

    sst = result["forecast"]["sst"]
    assert sst.dims == ("lead", "time", "lat", "lon") and sst.attrs["units"] == "K"
    # land stays NaN in the forecast, ocean with a full history is forecast
    truth = example.read_sst(example.ostia_path())["sst"]
    last = sst.isel(lead=0, time=-1)
    np.testing.assert_array_equal(np.isfinite(last.values),
                                  np.isfinite(truth.sel(time=last["time"]).values))
