"""examples/dna_binding.py in its quick configuration: real peak sequences, the model against
every baseline seqattn.evaluate fits on its k-mer tokens (logistic regression on the k-mer
frequencies, nearest neighbour) and KmerCounts on the same peaks' bases, on the held-out files,
and the motif check's figures."""
import dataclasses
import importlib.util
import math

import numpy as np
import pytest

from seqattn.adapters import GenomeAdapter
from seqattn.data.model_call import ModelCall
from seqattn.evaluation import strongest_baseline
from seqattn.models import build
from test_examples import load_example
from train_tasks import one_numba_thread  # noqa: F401  (tiny shapes run faster on one thread)

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("janggu") is None,
    reason="the example's data are janggu's resources: pip install --no-deps janggu")

KMER_ROWS = ("k-mer counts logistic (KmerCounts, k on validation)",
             "k-mer counts logistic (KmerCounts, strand-symmetric, k on validation)")


def logit_difference(outputs):
    return outputs[:, 1] - outputs[:, 0]


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
    assert all(row in baselines for row in KMER_ROWS), baselines
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

    # KmerCounts' rows were scored beside the model called on the peaks' bases: the same
    # outputs as on its own k-mer tokens
    model, adapter = results["model"], results["adapter"]
    ds = example.load(example.QUICK)
    test = ds.part == "test"
    on_tokens = np.concatenate([ModelCall(model)(b) for b in adapter.batches(
        ds, where=test, batch_size=64, shuffle=False).epoch(0)])
    bases = example.base_adapter(ds)
    on_bases = np.concatenate([ModelCall(example.OnBases(model, adapter))(b) for b in
                               bases.batches(ds, where=test, batch_size=64,
                                             shuffle=False).epoch(0)])
    np.testing.assert_allclose(on_bases, on_tokens, rtol=1e-6, atol=1e-6)


def test_path_weights_carry_the_kmer_counts_logistic():
    """A model whose linear path is set to path_weights(KmerCounts) and whose head is zeroed
    predicts, on the model's 6-mer tokens, what the baseline predicts on the bases, up to the
    k-mers near the peaks' ends that a bag of 6-mers cannot place."""
    pytest.importorskip("sklearn")
    example = load_example("dna_binding")
    ds = example.load(dataclasses.replace(example.QUICK, n_train=150))
    bases = example.base_adapter(ds)
    adapter = GenomeAdapter(tokens="ids", k=6, ambiguous="token").fit(
        ds, targets="factor", where=ds.part == "train")
    test = ds.part == "test"
    for sizes in ((3, 4, 5, 6), (3,)):
        baseline = example.kmer_counts(ds, bases, sizes)
        model = build(adapter.model_config(task="classification", d_model=8, nhead=1,
                                           num_layers=1, dim_feedforward=8, pooling="mean",
                                           linear=True))
        model.start_from_linear(*example.path_weights(baseline, 6))
        found = logit_difference(np.concatenate([ModelCall(model)(b) for b in adapter.batches(
            ds, where=test, batch_size=64, shuffle=False).epoch(0)]))
        expected = logit_difference(np.concatenate([baseline.predict(b) for b in bases.batches(
            ds, where=test, batch_size=64, shuffle=False).epoch(0)]))
        assert np.corrcoef(found, expected)[0, 1] > 0.998, (sizes, baseline.chosen["k"])
        assert np.abs(found - expected).max() < 0.25 * expected.std(), (sizes, baseline.chosen)
    with pytest.raises(ValueError, match="with k at most 2"):
        example.path_weights(baseline, 2)  # a 3-mer's count is no sum of 2-mer counts
