"""benchmarks/transfer_alloys.py computes its figures honestly: the alloy recipe's quick path (its
structure counts and epochs cut down to fit a test) on one seed of Ni-Pt, with the model's and
a pair potential's test errors recomputed by hand from their predictions, the transfer data
checked to be Ni-Pt (not the recipe's Cu-Au) and split without overlap, and the test
structures read by the adapter only where they are scored. No assertion that seqattn wins."""
import dataclasses
import sys
from pathlib import Path

import numpy as np
import pytest

from train_tasks import one_numba_thread  # noqa: F401  (tiny shapes run faster on one thread)

pytest.importorskip("ase", reason="the alloy transfer set is computed with ASE: pip install ase")

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import transfer_alloys  # noqa: E402

SMALL = dict(n_clusters=18, n_supercells=18, epochs=3, late_epochs=2)


def small_config(module, **changes):
    return dataclasses.replace(module.QUICK, **{**SMALL, **changes})


def test_quick_seed_is_scored_honestly(monkeypatch):
    from seqattn.adapters import MoleculeAdapter

    seen = []  # the structures (molecule labels) each adapter selection reads, in order
    select = MoleculeAdapter.select

    def spy(self, ds, where, *args, **kwargs):
        selected = select(self, ds, where, *args, **kwargs)
        seen.append(set(selected.molecule.values.tolist()))
        return selected

    monkeypatch.setattr(MoleculeAdapter, "select", spy)
    module = transfer_alloys.example("alloy_forces")
    config = small_config(module, seed=0)
    run = transfer_alloys.alloy_seed(module, config, transfer_alloys.fcc_lattice())
    figures = transfer_alloys.seed_figures(module, run)
    structures, parts = run["structures"], run["parts"]

    # the transfer data: Ni-Pt from the example's generator, not its Cu-Au
    elements = {int(z) for a in structures for z in a.numbers}
    assert elements == set(transfer_alloys.ELEMENTS) == {28, 78}
    assert not elements & set(module.LATTICE)
    own = module.make_structures(config, np.random.default_rng(config.seed))
    assert {int(z) for a in own for z in a.numbers} == {29, 79}
    assert [len(a) for a in own] == [len(a) for a in structures]  # the same shapes and sizes
    assert transfer_alloys.smallest_half_spacing(structures) > config.cutoff

    # the split: disjoint parts covering every structure, the test share the recipe's
    indices = np.concatenate([parts[p] for p in ("train", "validation", "test")])
    assert sorted(indices.tolist()) == list(range(len(structures)))
    assert len(parts["test"]) == int(config.test_share * len(structures))

    # the test structures are read only by the two scoring reads (evaluate's and predict's),
    # each of them all of the test structures and nothing else
    test_labels = set(run["ds"].molecule.values[parts["test"]].tolist())
    reading_test = [labels for labels in seen if labels & test_labels]
    assert reading_test == [test_labels, test_labels]

    # the model's errors by hand from seqattn.predict on the test structures
    test = [structures[i] for i in parts["test"]]
    out = transfer_alloys.seqattn.predict(run["model"], run["ds"].isel(molecule=parts["test"]),
                                          run["adapter"])
    per_atom, per_structure, force_errors = [], [], []
    for k, atoms in enumerate(test):
        error = abs(float(out["energy"].values[k]) - atoms.get_potential_energy())
        per_structure.append(error)
        per_atom.append(error / len(atoms))
        force_errors.append(np.abs(out["forces"].values[k, :len(atoms)]
                                   - atoms.get_forces()).ravel())
    assert figures["energy MAE per atom (meV/atom)"]["model"] == pytest.approx(
        1e3 * np.mean(per_atom), rel=1e-6)
    assert figures["energy MAE per structure (eV)"]["model"] == pytest.approx(
        np.mean(per_structure), rel=1e-6)
    assert figures["force MAE (meV/A)"]["model"] == pytest.approx(
        1e3 * np.mean(np.concatenate(force_errors)), rel=1e-6)

    # the pair potential chosen by the model's criterion: refitted on the training structures
    # with its validation choice, its test errors by hand
    chosen = run["pair"]["baseline"][2]
    potential = module.PairPotential(chosen["cutoff"], elements=transfer_alloys.ELEMENTS).fit(
        [structures[i] for i in parts["train"]], chosen["force_weight"], chosen["ridge"])
    predicted = [potential.predict(a) for a in test]
    label = transfer_alloys.PAIR_POTENTIALS["baseline"]
    assert figures["energy MAE per atom (meV/atom)"][label] == pytest.approx(1e3 * np.mean(
        [abs(e - a.get_potential_energy()) / len(a) for (e, _), a in zip(predicted, test)]))
    assert figures["force MAE (meV/A)"][label] == pytest.approx(1e3 * np.mean(np.concatenate(
        [np.abs(f - a.get_forces()).ravel() for (_, f), a in zip(predicted, test)])))

    # seqattn.baselines are scored per atom and per structure on the same test structures
    baselines = set(figures["energy MAE per structure (eV)"]) - {"model"} - set(
        transfer_alloys.PAIR_POTENTIALS.values())
    assert any(name.startswith("element counts") for name in baselines)
    assert baselines < set(figures["energy MAE per atom (meV/atom)"])
    assert int(run["scores"].n) == len(test)
    for values in figures.values():
        assert all(np.isfinite(v) and v > 0 for v in values.values())


def test_per_atom_metric_divides_each_structure_by_its_own_size():
    from ase.build import bulk
    from ase.calculators.singlepoint import SinglePointCalculator

    test = []
    for n, energy in ((1, -1.0), (2, -3.0), (4, -2.0)):
        atoms = bulk("Cu", "fcc", a=3.6).repeat((n, 1, 1))
        atoms.calc = SinglePointCalculator(atoms, energy=energy)
        test.append(atoms)
    metric = transfer_alloys.per_atom_metric(test)
    target = np.array([-1.0, -3.0, -2.0])
    assert metric(target, target + np.array([1.0, 1.0, -2.0])) == pytest.approx(
        1e3 * (1.0 + 0.5 + 0.5) / 3)
    with pytest.raises(ValueError, match="order"):
        metric(target[::-1], target[::-1])


def test_a_cutoff_reaching_past_the_minimum_image_is_refused():
    from ase.build import bulk

    cell = bulk("Cu", "fcc", a=3.6, orthorhombic=True).repeat((2, 3, 2))
    lengths = np.diag(cell.cell.array)
    assert transfer_alloys.smallest_half_spacing([cell]) == pytest.approx(lengths.min() / 2)
    module = transfer_alloys.example("alloy_forces")
    config = small_config(module, n_clusters=1, n_supercells=2, cutoff=4.5)
    with pytest.raises(ValueError, match="minimum image"):
        transfer_alloys.alloy_seed(module, config, transfer_alloys.fcc_lattice())
