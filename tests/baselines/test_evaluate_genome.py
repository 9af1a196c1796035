"""seqattn.evaluate end to end through the GenomeAdapter (on the protocol): the model's AUROC in
the table is the one computed from seqattn.predict's probabilities, and the k-mer baseline finds
a planted motif that pooled base frequencies cannot see."""
import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

import seqattn
from seqattn.adapters import GenomeAdapter
from seqattn.evaluation import strongest_baseline
from seqattn.models import build
from seqattn.readers import from_sequences

TRAIN, VALID, TEST = ({"record": slice(a, b)} for a, b in ((0, 80), (80, 120), (120, 160)))


def motif_records(length=40):
    rng = np.random.default_rng(0)
    sequences, labels = {}, []
    for i in range(160):
        bases = list(rng.choice(list("ACGT"), length))
        if i % 2:
            at = int(rng.integers(0, length - 6))
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


def varied_records():
    """Sequences of 30-40 bases, some with an N, some lowercase: padding and unknown bases."""
    rng = np.random.default_rng(1)
    sequences = {}
    for i in range(60):
        bases = list(rng.choice(list("ACGT"), int(rng.integers(30, 41))))
        if i % 5 == 0:
            bases[int(rng.integers(0, len(bases)))] = "N"
        sequences[f"r{i}"] = "".join(bases)
    ds = from_sequences(sequences)
    ds["bound"] = ("record", np.arange(60) % 2)
    return ds


def test_kmer_counts_read_kmer_ids_as_the_bases_they_hold():
    """On 6-mer ids (stride 1) KmerCounts counts what it counts on the single bases, for every
    sequence without an N; on one with an N only the bases whose every 6-mer holds it are
    lost. With a stride the partial last 6-mer's bases are lost, never misread."""
    from seqattn.baselines.dna import bases, kmer_frequencies

    ds = varied_records()
    single = GenomeAdapter(tokens="ids", k=1, ambiguous="token").fit(ds, targets="bound")
    batch_of = {k: next(iter(GenomeAdapter(tokens="ids", k=k, stride=s, ambiguous="token").fit(
        ds, targets="bound").batches(ds, batch_size=60, shuffle=False)))
        for k, s in ((6, 1), (4, 4))}
    on_bases = bases(next(iter(single.batches(ds, batch_size=60, shuffle=False))))
    read = bases(batch_of[6], token_k=6)
    has_n = np.arange(60) % 5 == 0
    width = min(read.shape[1], on_bases.shape[1])
    np.testing.assert_array_equal(read[~has_n, :width], on_bases[~has_n, :width])
    assert (read[~has_n, width:] == -1).all() and (on_bases[~has_n, width:] == -1).all()
    agree = (read[has_n, :width] == on_bases[has_n, :width]) | (read[has_n, :width] == -1)
    assert agree.all()  # a base read back is the base; unknown near the N
    for k in (3, 5):
        np.testing.assert_array_equal(kmer_frequencies(read[~has_n], k, True).toarray(),
                                      kmer_frequencies(on_bases[~has_n], k, True).toarray())
    strided = bases(batch_of[4], token_k=4, token_stride=4)
    width = min(strided.shape[1], on_bases.shape[1])
    known = strided[:, :width] >= 0
    np.testing.assert_array_equal(strided[:, :width][known], on_bases[:, :width][known])
    assert known.sum() >= 0.85 * (on_bases >= 0).sum()


def test_a_kmer_model_is_scored_against_kmer_counts_and_can_start_from_them():
    """evaluate's default baselines for a 6-mer model hold KmerCounts on the bases its ids
    hold, equal to KmerCounts fitted on the single bases; warm_start puts that fit in the
    model's linear path, which then predicts what the baseline does (up to the k-mers near
    the ends that a bag of 6-mers cannot place: 5 of 200 bases here)."""
    from seqattn.baselines import KmerCounts, warm_start
    from seqattn.data.model_call import ModelCall

    ds = motif_records(length=200)
    adapter = GenomeAdapter(tokens="ids", k=6).fit(ds, targets="bound", where=TRAIN)
    single = GenomeAdapter(tokens="ids", k=1).fit(ds, targets="bound", where=TRAIN)
    model = build(adapter.model_config(task="classification", d_model=8, nhead=1,
                                       num_layers=1, dim_feedforward=8, linear=True))
    scores = seqattn.evaluate(model, ds, adapter, where=TEST, train=TRAIN, validation=VALID)
    on_single = seqattn.evaluate(model, ds, single, where=TEST, train=TRAIN,
                                 validation=VALID, baselines=[KmerCounts()])
    (name,) = [p for p in scores.predictor.values if p.endswith("-mer logistic")]
    assert float(scores.auroc.sel(predictor=name)) == float(on_single.auroc[1])
    assert on_single.predictor.values[1] == name

    def parts(a, where):
        return a.batches(ds, where=where, batch_size=40, shuffle=False)

    for sizes in ((3, 4, 5, 6), (3,)):
        baseline = KmerCounts(sizes, token_k=6).fit(parts(adapter, TRAIN),
                                                    parts(adapter, VALID))
        warm_start(model, baseline)
        found = np.concatenate([ModelCall(model)(b) for b in parts(adapter, TEST).epoch(0)])
        expected = np.concatenate([baseline.predict(b) for b in parts(adapter, TEST).epoch(0)])
        found, expected = (x[:, 1] - x[:, 0] for x in (found, expected))
        assert np.corrcoef(found, expected)[0, 1] > 0.99, (sizes, baseline.chosen["k"])
        assert np.abs(found - expected).max() < 0.25 * expected.std(), baseline.chosen
    pairs = GenomeAdapter(tokens="ids", k=2).fit(ds, targets="bound", where=TRAIN)
    longer = KmerCounts((3,), token_k=2).fit(parts(pairs, TRAIN), parts(pairs, VALID))
    with pytest.raises(ValueError, match="k at most token_k=2"):
        longer.on_token_frequencies()  # a 3-mer's count is no sum of 2-mer counts
