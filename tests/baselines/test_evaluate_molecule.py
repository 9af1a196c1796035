"""seqattn.evaluate end to end through the MoleculeAdapter (batches whose targets are a dict of
groups, a model whose predict returns a dict): the model's RMSE in the table is the one
seqattn.predict's values give on the same molecules, and element counts' is ridge on counts
made by hand, put back in physical units by hand (extensive: plus the fitted per-element
references; intensive: plus the mean); a class target is scored by accuracy likewise."""
import dataclasses
import json

import numpy as np
import pytest

import seqattn
from molecule_helpers import make_structures
from seqattn.adapters import MoleculeAdapter
from seqattn.baselines import ElementCounts
from seqattn.models import build

MODEL = dict(d_model=8, nhead=2, num_layers=1, dim_feedforward=16, bins=8, r_max=3.5,
             cutoff=3.2, seed=1)
PARTS = (0, 30), (30, 45), (45, 60)
TRAIN, VALID, TEST = ({"molecule": slice(a, b)} for a, b in PARTS)
TEST_ROWS = np.arange(*PARTS[2])


def molecules():
    """60 structures of H, C and O (2 to 6 atoms, padding inside some rows), their pair-potential
    energy (extensive), a per-atom mean with noise (intensive) and a size class."""
    rng = np.random.default_rng(4)
    ds = make_structures(sizes=tuple(rng.integers(2, 7, 60)), seed=3, pad_at=(5, 50))
    z = ds["atomic_number"].values
    n = (z > 0).sum(axis=1)
    ds["polarity"] = ("molecule", np.where(z == 8, 1.0, np.where(z == 6, 0.3, 0.0)).sum(axis=1)
                      / n + 0.05 * rng.normal(size=60), {"units": "D"})
    ds["size"] = ("molecule", np.where(n > 4, "large", "small").astype(object))
    return ds


def element_counts(ds, adapter):
    """(molecules, types + 1): atoms of each of the adapter's elements, then all atoms."""
    z = ds["atomic_number"].values
    counts = np.stack([(z == e).sum(axis=1) for e in adapter.atom_types], axis=1)
    return np.concatenate([counts, (z > 0).sum(axis=1)[:, None]], axis=1).astype(float)


def by_hand(ds, adapter, name):
    """ElementCounts fitted on the group's arrays taken out by hand, and its test predictions
    put back in physical units by hand."""
    def arrays(where):
        return [dataclasses.replace(b, targets=b.targets["structure"])
                for b in adapter.batches(ds, where=where, batch_size=64)]
    baseline = ElementCounts().fit(arrays(TRAIN), arrays(VALID))
    counts = element_counts(ds, adapter)[TEST_ROWS]
    normalized = baseline.model.predict(counts)[:, 0]
    stats = adapter.statistics[name]
    offset = (counts[:, :-1] @ np.asarray(stats["reference"])[:, 0] if "reference" in stats
              else stats["mean"][0])
    return baseline, normalized * stats["scale"][0] + offset


def rmse(predicted, truth):
    return float(np.sqrt(np.mean((predicted - truth) ** 2)))


@pytest.mark.parametrize("name, kind", [("energy", "extensive"), ("polarity", "intensive")])
def test_model_and_element_counts_are_scored_in_physical_units(name, kind):
    ds = molecules()
    adapter = MoleculeAdapter().fit(ds, targets={name: kind}, where=TRAIN)
    model = build(adapter.model_config(**MODEL))
    scores = seqattn.evaluate(model, ds, adapter, where=TEST, train=TRAIN, validation=VALID,
                              batch_size=8)
    truth = ds[name].values[TEST_ROWS]
    assert scores.attrs["target"] == name
    assert int(scores.n) == len(TEST_ROWS)
    predicted = seqattn.predict(model, ds, adapter)[name].values[TEST_ROWS]
    assert float(scores.rmse.sel(predictor="model")) == pytest.approx(rmse(predicted, truth),
                                                                      rel=1e-5)
    assert float(scores.bias.sel(predictor="model")) == pytest.approx(
        np.mean(predicted - truth), rel=1e-4, abs=1e-6)
    counts = "element counts ridge"
    assert counts in scores.predictor.values
    baseline, expected = by_hand(ds, adapter, name)
    assert json.loads(scores.chosen.sel(predictor=counts).item())["penalty"] == \
        baseline.chosen["penalty"]
    assert float(scores.rmse.sel(predictor=counts)) == pytest.approx(rmse(expected, truth),
                                                                     rel=1e-5)
    assert float(scores.r2.sel(predictor=counts)) > 0.5, "element counts explain these targets"


def test_class_target_accuracy_matches_predict_and_counts_separate_the_sizes():
    ds = molecules()
    adapter = MoleculeAdapter().fit(ds, targets=["size"], where=TRAIN)
    model = build(adapter.model_config(**MODEL))
    scores = seqattn.evaluate(model, ds, adapter, where=TEST, train=TRAIN, validation=VALID,
                              batch_size=8)
    assert sorted(scores["class"].values) == ["large", "small"]
    truth = ds["size"].values[TEST_ROWS]
    predicted = seqattn.predict(model, ds, adapter)["size"].values[TEST_ROWS]
    assert float(scores.accuracy.sel(predictor="model")) == pytest.approx(
        np.mean(predicted == truth))
    assert int(scores.n) == len(TEST_ROWS)
    # the number of atoms is one of the counts' features: the size class is linear in it
    assert float(scores.accuracy.sel(predictor="element counts logistic")) == 1.0


def test_energy_and_forces_are_evaluated_one_group_at_a_time():
    ds = molecules()
    adapter = MoleculeAdapter().fit(ds, targets={"energy": "energy", "forces": "forces"},
                                    where=TRAIN)
    model = build(adapter.model_config(**MODEL))
    with pytest.raises(ValueError, match="targets='<name>'"):
        seqattn.evaluate(model, ds, adapter, where=TEST, train=TRAIN, validation=VALID)
    scores = seqattn.evaluate(model, ds, adapter, where=TEST, targets="energy", train=TRAIN,
                              validation=VALID, baselines=[ElementCounts()])
    predicted = seqattn.predict(model, ds, adapter)["energy"].values[TEST_ROWS]
    assert list(scores.predictor.values) == ["model", "element counts ridge"]
    assert float(scores.rmse.sel(predictor="model")) == pytest.approx(
        rmse(predicted, ds["energy"].values[TEST_ROWS]), rel=1e-5)


def test_baselines_read_molecule_batches_and_give_the_models_output_key():
    ds = molecules()
    adapter = MoleculeAdapter().fit(ds, targets={"polarity": "intensive", "size": "intensive"},
                                    where=TRAIN)
    train = adapter.batches(ds, targets="polarity", where=TRAIN)
    valid = adapter.batches(ds, targets="polarity", where=VALID)
    fitted = ElementCounts().fit(train, valid)
    assert fitted.group == "structure" and not fitted.layout.classes
    test = adapter.encode(ds, where=TEST)
    (key, values), = fitted.predict(test).items()
    assert key == "structure" and values.shape == (len(TEST_ROWS), 1)
    classes = ElementCounts().fit(adapter.batches(ds, targets="size", where=TRAIN),
                                  adapter.batches(ds, targets="size", where=VALID))
    assert classes.group == "structure_classes" and classes.layout.n_outputs == 2
    assert list(classes.predict(test)) == ["structure_logits"]
    with pytest.raises(ValueError, match="targets=.<name>."):
        ElementCounts().fit(adapter.batches(ds, where=TRAIN), adapter.batches(ds, where=VALID))
