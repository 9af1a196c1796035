"""select: the validation metric decides (in its direction), ties go to the earlier candidate, a
NaN never wins, the table keeps every candidate, the time budget stops new candidates."""
import time

import numpy as np
import pytest
import xarray as xr

from seqattn.train.select import select

SCORES = {"a": {"rmse": 2.0, "r2": 0.1}, "b": {"rmse": 1.0, "r2": 0.3},
          "c": {"rmse": 1.0, "r2": 0.5}, "d": {"rmse": np.nan, "r2": np.nan}}


def run(metric, **options):
    return select({name: name for name in SCORES}, train=lambda config: f"model {config}",
                  score=lambda model: SCORES[model.split()[1]], metric=metric, **options)


def test_the_lowest_error_wins_and_a_tie_goes_to_the_earlier_candidate():
    choice = run("rmse")
    assert (choice.name, choice.model) == ("b", "model b")
    assert choice.table.attrs["chosen"] == "b"
    np.testing.assert_array_equal(choice.table.rmse.values, [2.0, 1.0, 1.0, np.nan])
    assert choice.table.ran.values.all()


def test_a_score_where_higher_is_better_picks_the_highest():
    assert run("r2").name == "c"
    assert run("rmse", mode="max").name == "a"


def test_an_unknown_metric_needs_its_direction():
    with pytest.raises(ValueError, match="mode='min'"):
        run("pinball")


def test_the_time_budget_stops_new_candidates_but_the_first_always_runs():
    def slow(config):
        time.sleep(0.05)
        return config
    choice = select(["x", "y", "z"], train=slow, score=lambda m: {"loss": {"x": 3, "y": 1,
                                                                           "z": 0}[m]},
                    metric="loss", time_budget=0.08)
    assert choice.table.ran.values.tolist() == [True, False, False]
    assert choice.name == "0"
    assert np.isnan(choice.table.loss.values[1:]).all()


def test_the_model_row_of_an_evaluation_is_read():
    scores = xr.Dataset({"rmse": (("predictor", "lead"), [[1.0, 3.0], [0.5, 0.5]])},
                        coords={"predictor": ["model", "persistence"], "lead": [1, 2]})
    choice = select({"only": 1}, train=lambda c: c, score=lambda m: scores, metric="rmse")
    assert choice.table.rmse.values.tolist() == [2.0]
