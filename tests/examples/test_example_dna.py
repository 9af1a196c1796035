"""examples/dna_binding.py in its quick configuration: real peak sequences, the model against
the GC and 4-mer baselines on the held-out files, and the motif check's figures."""
import importlib.util
import math

import pytest

from test_examples import load_example
from train_tasks import one_numba_thread  # noqa: F401  (tiny shapes run faster on one thread)

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("janggu") is None,
    reason="the example's data are janggu's resources: pip install --no-deps janggu")


def test_dna_binding_quick_beats_the_kmer_baseline(tmp_path):
    for package in ("sklearn", "pyjaspar", "matplotlib"):
        pytest.importorskip(package)
    example = load_example("dna_binding")
    results = example.main(["--quick", "--out", str(tmp_path)], progress=False)

    baselines, model = results["baselines"], results["model"]
    assert set(baselines) == {"GC content", "4-mer logistic regression"}
    for row in (*baselines.values(), model):
        assert 0.5 < row["auroc"] <= 1 and 0 <= row["accuracy"] <= 1, row
    assert model["auroc"] > baselines["4-mer logistic regression"]["auroc"], results
    assert model["auroc"] > baselines["GC content"]["auroc"], results
    for factor, row in results["motifs"].items():
        assert all(math.isfinite(v) for v in row.values()), (factor, row)
    assert (tmp_path / "dna_binding_mutagenesis.png").stat().st_size > 0
