"""examples/splice_site_mpra.py in its quick configuration: measured splice sites, the model
against every baseline seqattn.evaluate fits on its inputs (the additive and pairwise ridge
models of MAVE-NN among them) on the published test part, and the map."""
import importlib.util

import numpy as np
import pytest

from seqattn.evaluation import strongest_baseline
from test_examples import load_example
from train_tasks import one_numba_thread  # noqa: F401  (tiny shapes run faster on one thread)

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("mavenn") is None,
    reason="the example's data are MAVE-NN's resources: pip install --no-deps mavenn")


def test_splice_site_quick_beats_the_strongest_library_baseline(tmp_path):
    for package in ("sklearn", "scipy", "matplotlib"):
        pytest.importorskip(package)
    example = load_example("splice_site_mpra")
    results = example.main(["--quick", "--out", str(tmp_path)], progress=False)

    scores = results["scores"]
    assert int(scores.n) == 6078  # the published test part
    r2 = scores.r2.to_series()
    assert {"additive ridge", "pairwise ridge"} <= set(r2.index), r2
    assert 0.1 < r2["additive ridge"] < r2["pairwise ridge"], r2
    strongest = strongest_baseline(scores)
    assert r2["model"] > r2[strongest], r2
    assert r2["model"] == r2.max(), r2
    assert np.isfinite(scores.spearman).all()
    assert results["consensus"]["measured_cells"] > 9  # the wild type's cells and some mutants
    assert (tmp_path / "splice_site_single_mutants.png").stat().st_size > 0
    figure = results["figure"]  # the two heat maps, their colour bar and the two logos
    assert len(figure.axes) == 5
    predicted_logo, measured_logo = (ax for ax in figure.axes if "logo" in ax.get_title())
    assert len(predicted_logo.patches) == 36  # a letter for every cell of the predicted map
    assert 0 < len(measured_logo.patches) <= results["consensus"]["measured_cells"]
    for ax in (predicted_logo, measured_logo):  # gains above the axis, losses below, in view
        low, high = ax.get_ylim()
        boxes = [patch.get_path().get_extents() for patch in ax.patches]
        assert low <= min(box.y0 for box in boxes) < 0 < max(box.y1 for box in boxes) <= high
