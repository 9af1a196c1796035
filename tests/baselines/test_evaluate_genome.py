"""seqattn.evaluate end to end through the GenomeAdapter (on the protocol): the model's AUROC in
the table is the one computed from seqattn.predict's probabilities, and the k-mer baseline finds
a planted motif that pooled base frequencies cannot see."""
import numpy as np
from sklearn.metrics import roc_auc_score

import seqattn
from seqattn.adapters import GenomeAdapter
from seqattn.evaluation import strongest_baseline
from seqattn.models import build
from seqattn.readers import from_sequences

TRAIN, VALID, TEST = ({"record": slice(a, b)} for a, b in ((0, 80), (80, 120), (120, 160)))


def motif_records():
    rng = np.random.default_rng(0)
    sequences, labels = {}, []
    for i in range(160):
        bases = list(rng.choice(list("ACGT"), 40))
        if i % 2:
            at = int(rng.integers(0, 34))
            bases[at:at + 6] = "GATTAC"
        sequences[f"r{i}"] = "".join(bases)
        labels.append(i % 2)
    ds = from_sequences(sequences)
    ds["bound"] = ("record", np.array(labels, np.int64))
    return ds


def test_genome_scores_match_predict_and_the_kmer_baseline_finds_the_motif():
    ds = motif_records()
    adapter = GenomeAdapter(tokens="ids", k=1).fit(ds, targets="bound", where=TRAIN)
    model = build(adapter.model_config(task="classification", d_model=16, nhead=2,
                                       num_layers=1, dim_feedforward=16))
    scores = seqattn.evaluate(model, ds, adapter, where=TEST, train=TRAIN, validation=VALID)
    predicted = seqattn.predict(model, ds, adapter).isel(TEST)
    by_predict = roc_auc_score(ds.bound.isel(TEST).values,
                               predicted.bound_probability.sel({"class": 1}).values)
    assert abs(float(scores.auroc.sel(predictor="model")) - by_predict) < 1e-6
    assert int(scores.n) == 40
    kmer = [p for p in scores.predictor.values if p.endswith("-mer logistic")]
    assert len(kmer) == 1
    assert strongest_baseline(scores, "auroc") == kmer[0]
    assert float(scores.auroc.sel(predictor=kmer[0])) > 0.85
    assert float(scores.auroc.sel(predictor="pooled logistic")) < 0.7
