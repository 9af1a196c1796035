"""examples/dna_binding.py in its quick configuration: real peak sequences, the model against
every baseline seqattn.evaluate fits on its k-mer tokens (logistic regression on the k-mer
frequencies, nearest neighbour, KmerCounts on the bases the tokens hold), on the held-out
files, and the motif check's figures."""
import importlib.util
import math

import numpy as np
import pytest

from seqattn.adapters import GenomeAdapter
from seqattn.baselines import KmerCounts
from seqattn.evaluation import strongest_baseline
from test_examples import load_example
from train_tasks import one_numba_thread  # noqa: F401  (tiny shapes run faster on one thread)

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("janggu") is None,
    reason="the example's data are janggu's resources: pip install --no-deps janggu")

def kmer_rows(names):
    """The KmerCounts rows ("5-mer logistic", "4-mer strand-symmetric logistic"), plain first."""
    plain = [n for n in names if n.endswith("-mer logistic")]
    symmetric = [n for n in names if n.endswith("-mer strand-symmetric logistic")]
    return plain + symmetric


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
    assert len(kmer_rows(baselines)) == 2, baselines
    auroc = scores.auroc.to_series()
    assert ((auroc > 0.5) & (auroc <= 1)).all() and np.isfinite(scores.accuracy).all(), auroc
    strongest = strongest_baseline(scores, "auroc")
    assert auroc["model"] > auroc[strongest], auroc
    assert auroc["model"] == auroc.max(), auroc
    # the choice was made among every candidate, on validation
    table = results["validation"]
    assert table.ran.all() and results["choice"] == table.attrs["chosen"]
    assert list(table.candidate.values) == [f"k=6, {v}" for v in example.VARIANTS]
    for factor, row in results["motifs"].items():
        assert all(math.isfinite(v) for v in row.values()), (factor, row)
    assert (tmp_path / "dna_binding_mutagenesis.png").stat().st_size > 0

    # KmerCounts' rows, fitted on the bases the model's k-mer ids hold, are those of
    # KmerCounts fitted on the same peaks' single bases, scored here by hand
    from sklearn.metrics import roc_auc_score

    from seqattn.data.targets import softmax

    ds = example.load(example.QUICK)
    bases = GenomeAdapter(tokens="ids", k=1, ambiguous="token").fit(
        ds, targets="factor", where=ds.part == "train")
    parts = {p: list(bases.batches(ds, where=ds.part == p, batch_size=256, shuffle=False)
                     .epoch(0)) for p in ("train", "validation", "test")}
    labels = np.concatenate([b.targets for b in parts["test"]])
    for symmetric, row in zip((False, True), kmer_rows(baselines)):
        fitted = KmerCounts(strand_symmetric=symmetric).fit(parts["train"], parts["validation"],
                                                            n_classes=2)
        assert fitted.name == row
        logits = np.concatenate([fitted.predict(b) for b in parts["test"]])
        by_hand = roc_auc_score(labels, softmax(logits)[:, 1])
        assert abs(float(scores.auroc.sel(predictor=row)) - by_hand) < 1e-12, row
