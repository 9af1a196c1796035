"""The OSTIA sea-surface temperature example in its --quick mode, scored by seqattn.evaluate
against the baselines of seqattn.baselines on its inputs. With the linear path (one map per lead
of each patch's inputs) started at the library's ridge on those inputs ("lead token ridge"),
kept there while attention learns the residual, and early stopping that scores the start too,
the model validation chooses beats every baseline, the strongest (climatology: the last month
plus the training years' mean change for the calendar month, per cell) included."""
import numpy as np
import pytest

import seqattn

from test_examples import load_example
from train_tasks import one_numba_thread  # noqa: F401  (tiny shapes run faster on one thread)

pytest.importorskip("iris_sample_data")
pytest.importorskip("h5netcdf")


def test_sst_forecast_quick_beats_the_strongest_baseline():
    example = load_example("sst_forecast")
    result = example.main(["--quick"], progress=False)

    scores = result["scores"]
    baselines = list(scores.predictor.values[1:])
    assert {"persistence", "climatology", "lead token ridge"} <= set(baselines), baselines
    rmse = scores.rmse.squeeze("lead")
    assert np.isfinite(rmse).all(), rmse.values
    strongest = seqattn.evaluation.strongest_baseline(scores)
    assert strongest == "climatology", rmse.to_pandas()
    for baseline in baselines:
        assert rmse.sel(predictor="model") < rmse.sel(predictor=baseline), rmse.to_pandas()
    table = result["choice"].table
    assert table.ran.all() and table.attrs["chosen"] == result["choice"].name
    assert table.rmse.sel(candidate=result["choice"].name) == table.rmse.min()

    sst = result["forecast"]["sst"]
    assert sst.dims == ("lead", "time", "lat", "lon") and sst.attrs["units"] == "K"
    assert int(np.isfinite(sst.isel(lead=0)).any(("lat", "lon")).sum()) == 12  # test months
    # land stays NaN in the forecast, ocean with a full history is forecast
    truth = example.read_sst(example.ostia_path())["sst"]
    last = sst.isel(lead=0, time=-1)
    np.testing.assert_array_equal(np.isfinite(last.values),
                                  np.isfinite(truth.sel(time=last["time"]).values))
