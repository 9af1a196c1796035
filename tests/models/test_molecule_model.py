"""MoleculeModel: forces are minus the finite-difference gradient of the energy (float64,
periodic and not), the invariances (translation, rotation, permutation, periodic image), the
energy is extensive and padding changes nothing, and the errors for cells too small for the
cutoff. Minimum-image distances against a brute-force image search (triclinic too) are checked
by the kernels' tests (tests/kernels/test_structured_bias_cpu.py against tests/helpers/reference.py)."""
import numpy as np
import pytest

from molecule_helpers import small_model
from seqattn.models import MoleculeModel, MoleculeModelConfig
from seqattn.nn import Structure

TRICLINIC = np.array([[7.0, 0.0, 0.0], [2.1, 6.6, 0.0], [-1.4, 1.7, 7.2]])
ORTHORHOMBIC = np.diag([7.0, 7.5, 8.0])
RNG = np.random.default_rng(0)


def atoms(n=6, B=1, num_types=2, seed=0, spread=3.0):
    rng = np.random.default_rng(seed)
    positions = rng.uniform(0, spread, (B, n, 3))
    types = rng.integers(0, num_types, (B, n)).astype(np.int32)
    tokens = np.eye(num_types)[types]
    return tokens, np.zeros((B, n), bool), positions, types


def run(model, tokens, mask, positions, types, cell=None):
    return model.predict(tokens, mask, structure=Structure(positions=positions, types=types,
                                                           cell=cell))


def energy(model, tokens, mask, positions, types, cell=None):
    return run(model, tokens, mask, positions, types, cell)["structure"][:, 0].sum()


@pytest.mark.parametrize("cell", [None, ORTHORHOMBIC, TRICLINIC],
                         ids=["cluster", "orthorhombic", "triclinic"])
def test_forces_are_minus_the_finite_difference_gradient_of_the_energy(cell):
    model = small_model()
    tokens, mask, positions, types = atoms(n=6, B=2, spread=5.0 if cell is not None else 3.0)
    forces = run(model, tokens, mask, positions, types, cell)["forces"]
    step = 1e-6
    numeric = np.empty_like(forces)
    for index in np.ndindex(forces.shape):
        shifted = positions.copy()
        shifted[index] += step
        up = energy(model, tokens, mask, shifted, types, cell)
        shifted[index] -= 2 * step
        down = energy(model, tokens, mask, shifted, types, cell)
        numeric[index] = -(up - down) / (2 * step)
    np.testing.assert_allclose(forces, numeric, rtol=1e-5, atol=1e-8)
    assert np.abs(forces).max() > 1e-3, "the distance bias must actually move the energy"


def _random_rotation(rng):
    q, r = np.linalg.qr(rng.normal(size=(3, 3)))
    q = q * np.sign(np.diag(r))
    return q if np.linalg.det(q) > 0 else -q


@pytest.mark.parametrize("cell", [None, TRICLINIC], ids=["cluster", "triclinic"])
def test_translation_rotation_and_permutation_leave_the_energy_and_turn_the_forces(cell):
    model = small_model()
    tokens, mask, positions, types = atoms(n=7, spread=5.0)
    out = run(model, tokens, mask, positions, types, cell)
    shifted = run(model, tokens, mask, positions + np.array([0.7, -1.3, 2.2]), types, cell)
    rotation = _random_rotation(RNG)
    turned = run(model, tokens, mask, positions @ rotation.T, types,
                 None if cell is None else cell @ rotation.T)
    order = RNG.permutation(7)
    permuted = run(model, tokens[:, order], mask, positions[:, order], types[:, order], cell)
    for name, other, forces in (("translation", shifted, out["forces"]),
                                ("rotation", turned, out["forces"] @ rotation.T),
                                ("permutation", permuted, out["forces"][:, order])):
        np.testing.assert_allclose(other["structure"], out["structure"], rtol=1e-10,
                                   err_msg=name)
        np.testing.assert_allclose(other["forces"], forces, rtol=1e-8, atol=1e-12, err_msg=name)
    np.testing.assert_allclose(permuted["atoms"], out["atoms"][:, order], rtol=1e-10)


def test_moving_an_atom_by_a_lattice_vector_changes_nothing():
    model = small_model()
    tokens, mask, positions, types = atoms(n=6, spread=6.0)
    out = run(model, tokens, mask, positions, types, TRICLINIC)
    moved = positions.copy()
    moved[0, 2] += TRICLINIC[1] - 2 * TRICLINIC[2]
    moved[0, 4] -= TRICLINIC[0]
    again = run(model, tokens, mask, moved, types, TRICLINIC)
    np.testing.assert_allclose(again["structure"], out["structure"], rtol=1e-10)
    np.testing.assert_allclose(again["forces"], out["forces"], rtol=1e-8, atol=1e-12)
    np.testing.assert_allclose(again["atoms"], out["atoms"], rtol=1e-10)


def test_the_energy_is_extensive_and_padding_changes_nothing():
    model = small_model()
    tokens, mask, positions, types = atoms(n=4)
    alone = run(model, tokens, mask, positions, types)
    far = positions + np.array([20.0, 0, 0])  # beyond the cutoff: no interaction
    pair = run(model, np.concatenate([tokens, tokens], 1), np.zeros((1, 8), bool),
               np.concatenate([positions, far], 1), np.concatenate([types, types], 1))
    np.testing.assert_allclose(pair["structure"], 2 * alone["structure"], rtol=1e-10)
    # the same molecule padded to 6 atoms next to a molecule of 6
    big_tokens, _, big_positions, big_types = atoms(n=6, seed=3)
    padded_tokens = np.concatenate([np.pad(tokens, ((0, 0), (0, 2), (0, 0))), big_tokens])
    padded_mask = np.array([[False] * 4 + [True] * 2, [False] * 6])
    padded = run(model, padded_tokens, padded_mask,
                 np.concatenate([np.pad(positions, ((0, 0), (0, 2), (0, 0))), big_positions]),
                 np.concatenate([np.pad(types, ((0, 0), (0, 2))), big_types]))
    np.testing.assert_allclose(padded["structure"][:1], alone["structure"], rtol=1e-10)
    np.testing.assert_allclose(padded["forces"][:1, :4], alone["forces"], rtol=1e-8,
                               atol=1e-12)
    assert np.all(padded["forces"][0, 4:] == 0)


def test_a_cell_too_small_for_the_cutoff_or_a_missing_structure_is_an_error():
    model = small_model()
    tokens, mask, positions, types = atoms(n=3)
    with pytest.raises(ValueError, match="structure 0 .* lattice-plane spacing 2.5 .* cutoff"):
        run(model, tokens, mask, positions, types, np.diag([5.0, 8.0, 8.0]))
    with pytest.raises(ValueError, match="needs structure=Structure"):
        model.predict(tokens, mask)
    with pytest.raises(ValueError, match="forces=True .* structure_outputs >= 1"):
        MoleculeModel(MoleculeModelConfig(num_types=2, structure_outputs=0, atom_outputs=1))


def test_intensive_outputs_and_class_logits_are_means_over_the_atoms():
    """A structure next to a far copy of itself: the summed output doubles, the averaged one
    and the class logits (averaged too) stay; padding changes neither."""
    model = small_model(structure_outputs=2, structure_pooling=("sum", "mean"),
                        structure_classes=(3,), atom_classes=(2,))
    tokens, mask, positions, types = atoms(n=4)
    alone = run(model, tokens, mask, positions, types)
    assert alone["structure"].shape == (1, 2) and alone["structure_logits"].shape == (1, 3)
    assert alone["atoms"].shape == (1, 4, 1) and alone["atom_logits"].shape == (1, 4, 2)
    far = positions + np.array([20.0, 0, 0])
    pair = run(model, np.concatenate([tokens, tokens], 1), np.zeros((1, 8), bool),
               np.concatenate([positions, far], 1), np.concatenate([types, types], 1))
    np.testing.assert_allclose(pair["structure"][:, 0], 2 * alone["structure"][:, 0],
                               rtol=1e-10)
    np.testing.assert_allclose(pair["structure"][:, 1], alone["structure"][:, 1], rtol=1e-10)
    np.testing.assert_allclose(pair["structure_logits"], alone["structure_logits"], rtol=1e-10)
    padded = run(model, np.pad(tokens, ((0, 0), (0, 2), (0, 0))),
                 np.array([[False] * 4 + [True] * 2]),
                 np.pad(positions, ((0, 0), (0, 2), (0, 0))), np.pad(types, ((0, 0), (0, 2))))
    np.testing.assert_allclose(padded["structure"], alone["structure"], rtol=1e-10)
    np.testing.assert_allclose(padded["structure_logits"], alone["structure_logits"],
                               rtol=1e-10)


@pytest.mark.parametrize("options, match", [
    (dict(structure_pooling=("mean",)), "the energy, which is extensive"),
    (dict(structure_pooling=("sum", "mean")), "for each of the 1 structure outputs"),
    (dict(structure_classes=(1,)), "structure_classes = \\(1,\\)"),
])
def test_bad_pooling_and_classes_are_named(options, match):
    with pytest.raises(ValueError, match=match):
        MoleculeModel(MoleculeModelConfig(num_types=2, **options))


def test_without_forces_the_model_predicts_outputs_only():
    model = small_model(forces=False, structure_outputs=2, atom_outputs=3)
    tokens, mask, positions, types = atoms(n=5, B=2)
    out = run(model, tokens, mask, positions, types)
    assert set(out) == {"structure", "atoms"}
    assert out["structure"].shape == (2, 2) and out["atoms"].shape == (2, 5, 3)
    with_forces = run(small_model(structure_outputs=2, atom_outputs=3), tokens, mask,
                      positions, types)
    np.testing.assert_allclose(out["structure"], with_forces["structure"], rtol=1e-12)


def test_predicting_forces_leaves_the_parameter_gradients_alone():
    model = small_model()
    for p in model.parameters():
        p.grad[...] = 0.5
    run(model, *atoms(n=5))
    for name, p in model.named_parameters():
        assert np.all(p.grad == 0.5), f"{name}.grad changed"


def test_the_model_on_the_gpu_gives_the_cpu_outputs_and_forces():
    """Inputs on the device (the CUDA simulator in CI; a triclinic cell, the widest path): the
    anchors' types go to the device with the positions (they stayed on the host, and the
    attention refused arrays on two devices)."""
    from numba import cuda

    model = small_model()
    tokens, mask, positions, types = atoms(n=5, B=2, spread=5.0)
    cells = np.broadcast_to(TRICLINIC, (2, 3, 3)).copy()
    expected = run(model, tokens, mask, positions, types, cells)
    on_gpu = MoleculeModel(model.config).to("cuda").load_state_dict(model.state_dict())
    device = {name: cuda.to_device(np.ascontiguousarray(a))
              for name, a in (("tokens", tokens), ("mask", mask), ("positions", positions),
                              ("types", types))}
    got = run(on_gpu, device["tokens"], device["mask"], device["positions"], device["types"],
              cuda.to_device(cells))
    for name in ("structure", "atoms", "forces"):
        value = got[name].copy_to_host() if hasattr(got[name], "copy_to_host") else got[name]
        np.testing.assert_allclose(value, expected[name], rtol=1e-10, atol=1e-12)
