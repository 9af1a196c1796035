"""The Greensboro station example in its --quick mode (4 epochs) beats persistence, the same
hour yesterday and the ridge regression on the model's inputs at every lead 1-6 h. (Its
increments are scaled per lead, lead_scales="rms", chosen on September: without it the loss is
dominated by the long leads, whose increments are largest, and the 1 h lead trailed ridge.)"""
import math

import pytest

from test_examples import load_example
from train_tasks import one_numba_thread  # noqa: F401  (tiny shapes run faster on one thread)

pytest.importorskip("pvlib")


def test_station_forecast_quick_beats_its_baselines():
    example = load_example("station_forecast")
    result = example.main(["--quick"], progress=False)

    table = result["table"]
    assert sorted(table) == [1, 2, 3, 4, 5, 6]
    for lead, row in table.items():
        assert row["n"] > 2000, (lead, row)  # October-December, every hour
        assert all(math.isfinite(row[name]) for name in ("seqattn", "ridge", "persistence",
                                                         "yesterday")), row
        for baseline in ("persistence", "yesterday", "ridge"):
            assert row["seqattn"] < row[baseline], (lead, baseline, row)
    mean = {name: sum(row[name] for row in table.values()) / len(table)
            for name in ("seqattn", "ridge")}
    assert mean["seqattn"] < 0.97 * mean["ridge"], mean

    temperature = result["forecast"]["temperature"]
    assert temperature.dims == ("lead", "time", "station")
    assert temperature.attrs["units"] == "degC"
