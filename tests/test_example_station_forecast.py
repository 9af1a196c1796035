"""The Greensboro station example in its --quick mode beats all three baselines at every lead."""
import math

import pytest

from test_examples import load_example
from train_tasks import one_numba_thread  # noqa: F401  (tiny shapes run faster on one thread)

pytest.importorskip("pvlib")


def test_station_forecast_quick_beats_its_baselines_at_every_lead():
    example = load_example("station_forecast")
    result = example.main(["--quick"], progress=False)

    table = result["table"]
    assert sorted(table) == [1, 2, 3, 4, 5, 6]
    for lead, row in table.items():
        assert row["n"] > 2000, (lead, row)  # October-December, every hour
        assert all(math.isfinite(row[name]) for name in ("seqattn", "ridge", "persistence",
                                                         "yesterday")), row
        for baseline in ("ridge", "persistence", "yesterday"):
            assert row["seqattn"] < row[baseline], (lead, baseline, row)

    temperature = result["forecast"]["temperature"]
    assert temperature.dims == ("lead", "time", "station")
    assert temperature.attrs["units"] == "degC"
