"""examples/splice_site_mpra.py in its quick configuration: measured splice sites, the model
against the additive and pairwise ridge models on the published test part, and the map."""
import importlib.util

import pytest

from test_examples import load_example
from train_tasks import one_numba_thread  # noqa: F401  (tiny shapes run faster on one thread)

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("mavenn") is None,
    reason="the example's data are MAVE-NN's resources: pip install --no-deps mavenn")


def test_splice_site_quick_beats_the_pairwise_model(tmp_path):
    for package in ("sklearn", "scipy", "matplotlib"):
        pytest.importorskip(package)
    example = load_example("splice_site_mpra")
    results = example.main(["--quick", "--out", str(tmp_path)], progress=False)

    baselines, model = results["baselines"], results["model"]
    assert set(baselines) == {"additive (ridge)", "pairwise (ridge)"}
    assert 0.1 < baselines["additive (ridge)"]["r2"] < baselines["pairwise (ridge)"]["r2"]
    assert model["r2"] > baselines["pairwise (ridge)"]["r2"], results
    assert results["consensus"]["measured_cells"] > 9  # the wild type's cells and some mutants
    assert (tmp_path / "splice_site_single_mutants.png").stat().st_size > 0
