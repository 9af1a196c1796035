"""examples/alloy_forces.py in its quick configuration: EMT energies and forces of Cu-Au
clusters and supercells, the model against the fitted pair potentials on the test structures;
the pair potential's forces against finite differences of its energy."""
import math

import numpy as np
import pytest

from test_examples import load_example
from train_tasks import one_numba_thread  # noqa: F401  (tiny shapes run faster on one thread)


def test_alloy_forces_quick_beats_the_pair_potential(tmp_path):
    """Forces: better than the pair potential at any cutoff. Energies: better than the pair
    potential that sees the same neighbourhood (the model's cutoff); the one that also sees
    the second and third shells is not asserted against (see the example's docstring)."""
    pytest.importorskip("ase")
    pytest.importorskip("matplotlib")
    example = load_example("alloy_forces")
    results = example.main(["--quick", "--out", str(tmp_path)], progress=False)
    model, best, same = (results[k] for k in ("model", "baseline", "baseline_model_cutoff"))
    assert same["cutoff"] == example.QUICK.cutoff and best["cutoff"] in (3.4, 4.5, 5.5)
    for row in (model, best, same, results["mean_predictor_validation"]):
        assert all(math.isfinite(row[k]) and row[k] > 0 for k in ("energy_mae", "force_mae"))
    assert model["force_mae"] < best["force_mae"] and model["force_mae"] < same["force_mae"], \
        results
    assert model["energy_mae"] < same["energy_mae"], results
    assert best["energy_mae"] < results["mean_predictor_validation"]["energy_mae"], results
    assert (tmp_path / "alloy_forces_parity.png").stat().st_size > 0


def test_the_pair_potential_gives_forces_that_are_minus_its_energy_gradient():
    pytest.importorskip("ase")
    from ase.build import bulk

    example = load_example("alloy_forces")
    atoms = bulk("Cu", "fcc", a=3.7, cubic=True).repeat(2)
    atoms.numbers[::3] = 79
    atoms.rattle(0.1, seed=0)
    potential = example.PairPotential(cutoff=4.5)
    potential.weights = np.random.default_rng(0).normal(size=2 + 3 * potential.n_basis)
    energy, forces = potential.predict(atoms)
    step = 1e-5
    for i, axis in ((0, 0), (5, 2), (17, 1)):
        moved = atoms.copy()
        moved.positions[i, axis] += step
        up = potential.predict(moved)[0]
        moved.positions[i, axis] -= 2 * step
        down = potential.predict(moved)[0]
        assert forces[i, axis] == pytest.approx(-(up - down) / (2 * step), rel=1e-5, abs=1e-8)
    assert np.isfinite(energy) and np.abs(forces).max() > 1e-3
