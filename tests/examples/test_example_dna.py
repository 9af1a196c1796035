"""examples/dna_binding.py in its quick configuration: real peak sequences, the model against
every baseline seqattn.evaluate fits on its k-mer tokens (logistic regression on the k-mer
frequencies, nearest neighbour) on the held-out files, and the motif check's figures."""
import importlib.util
import math

import numpy as np
import pytest

from seqattn.evaluation import strongest_baseline
from test_examples import load_example
from train_tasks import one_numba_thread  # noqa: F401  (tiny shapes run faster on one thread)

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("janggu") is None,
    reason="the example's data are janggu's resources: pip install --no-deps janggu")


def test_dna_binding_quick_beats_the_strongest_library_baseline(tmp_path):
    for package in ("sklearn", "pyjaspar", "matplotlib"):
        pytest.importorskip(package)
    example = load_example("dna_binding")
    results = example.main(["--quick", "--out", str(tmp_path)], progress=False)

    scores = results["scores"]
    assert int(scores.n) == 200  # the two held-out files
    baselines = list(scores.predictor.values[1:])
    assert "pooled logistic" in baselines, baselines
    assert any(b.endswith("nearest neighbour") for b in baselines), baselines
    auroc = scores.auroc.to_series()
    assert ((auroc > 0.5) & (auroc <= 1)).all() and np.isfinite(scores.accuracy).all(), auroc
    strongest = strongest_baseline(scores, "auroc")
    assert auroc["model"] > auroc[strongest], auroc
    assert auroc["model"] == auroc.max(), auroc
    for factor, row in results["motifs"].items():
        assert all(math.isfinite(v) for v in row.values()), (factor, row)
    assert (tmp_path / "dna_binding_mutagenesis.png").stat().st_size > 0
