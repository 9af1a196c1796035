"""ComplexModel: gradients of every parameter and of the ligand tokens against float64 finite
differences, and the physics it must respect: a rigid motion of the whole complex changes
nothing, moving the ligand against its pocket does, and pocket atoms beyond the cutoff are not
seen."""
import dataclasses

import numpy as np
import pytest

from complex_helpers import make_complexes
from gradcheck import check_module_gradients
from seqattn.adapters.complex import ComplexAdapter
from seqattn.models import build

SIZES = dict(d_model=8, nhead=2, num_layers=1, dim_feedforward=8, bins=6, r_max=6.0)


def _setup(dtype="float32", **options):
    ds = make_complexes(n=6, seed=2)
    adapter = ComplexAdapter(dtype=dtype).fit(ds, targets="affinity")
    batch = adapter.encode(ds)
    model = build(adapter.model_config(**{**SIZES, **options}))
    return ds, adapter, batch, model


@pytest.mark.parametrize("pooling", ["mean", "sum"])
def test_complex_model_gradients_match_finite_differences(pooling):
    _, _, batch, model = _setup("float64", pooling=pooling)

    def call(inputs):
        return model(inputs, batch.key_padding_mask, structure=batch.structure)

    check_module_gradients(model, call, lambda dout: {"inputs": model.backward(dout)},
                           {"inputs": batch.tokens.astype(np.float64)}, samples=4)


def _moved(structure, ligand=None, pocket=None):
    return dataclasses.replace(
        structure,
        positions=structure.positions if ligand is None else ligand(structure.positions),
        key_positions=structure.key_positions if pocket is None
        else pocket(structure.key_positions))


def _predict(model, batch, structure):
    model.eval()
    return np.asarray(model(batch.tokens, batch.key_padding_mask, structure=structure))


def test_only_distances_matter_and_the_pocket_is_seen():
    _, _, batch, model = _setup("float64")
    rotation, _ = np.linalg.qr(np.random.default_rng(0).standard_normal((3, 3)))

    def rigid(x):
        return x @ rotation.T + np.array([3.0, -1.0, 2.0])

    before = _predict(model, batch, batch.structure)
    after = _predict(model, batch, _moved(batch.structure, rigid, rigid))
    np.testing.assert_allclose(after, before, rtol=1e-9, atol=1e-12)
    shifted = _predict(model, batch, _moved(batch.structure, lambda x: x + 1.5))
    assert np.abs(shifted - before).max() > 1e-4
    far = _predict(model, batch, _moved(batch.structure, pocket=lambda x: x + 100.0))
    gone = dataclasses.replace(batch.structure, pocket_mask=np.ones_like(
        batch.structure.pocket_mask))
    np.testing.assert_allclose(far, _predict(model, batch, gone), rtol=1e-9, atol=1e-12)


def test_contributions_add_up_to_the_prediction():
    ds, adapter, _, model = _setup()
    predicted = adapter.predict(model, ds)["affinity"].values
    terms = adapter.contributions(model, ds)
    np.testing.assert_allclose(terms.sum("ligand_atom").values + adapter.target_scale["mean"],
                               predicted, rtol=1e-5, atol=1e-5)
    assert np.isnan(terms.values[ds["ligand_element"].values == ""]).all()


def test_config_errors_name_the_field():
    _, adapter, _, _ = _setup()
    with pytest.raises(ValueError, match="pooling"):
        build(adapter.model_config(pooling="max"))
    with pytest.raises(ValueError, match="num_layers"):
        build(adapter.model_config(num_layers=0))


def _molecules_in_pockets(n=6, seed=3):
    """Small real molecules (with SMILES and atom order) in two generated pockets."""
    from rdkit import Chem
    from rdkit.Chem import AllChem

    from complex_helpers import pocket
    from seqattn.readers.complexes import complexes_from_atoms

    rng = np.random.default_rng(seed)
    sites = [pocket(rng), pocket(rng)]
    smiles = ["OCC(=O)N", "c1ccccc1O", "CC(C)Cl", "NC(=O)c1ccncc1", "CCOC", "FC(F)C=O"]
    ligands, order = [], []
    for i in range(n):
        mol = Chem.AddHs(Chem.MolFromSmiles(smiles[i % len(smiles)]))
        AllChem.EmbedMolecule(mol, randomSeed=i)
        mol = Chem.RemoveHs(mol)
        ligands.append(([a.GetSymbol() for a in mol.GetAtoms()],
                        mol.GetConformer().GetPositions() - [0.5, 0, 0]))
        order.append(np.arange(mol.GetNumAtoms()))
    return complexes_from_atoms(
        ligands, [sites[i % 2] for i in range(n)],
        values={"affinity": rng.normal(6.0, 1.0, n).astype(np.float32)},
        coords={"target": np.array(["P1", "P2"] * (n // 2)),
                "smiles": np.array([smiles[i % len(smiles)] for i in range(n)])},
        smiles_atoms=order)


def _linear_setup(dtype="float64", bits=32):
    ds = _molecules_in_pockets()
    adapter = ComplexAdapter(dtype=dtype, group="target", fingerprint_bits=bits).fit(
        ds, targets="affinity")
    model = build(adapter.model_config(**SIZES))
    return ds, adapter, adapter.encode(ds), model


def test_gradients_with_the_linear_path_match_finite_differences():
    _, _, batch, model = _linear_setup()
    rng = np.random.default_rng(0)
    model.set_linear_path(rng.normal(size=(2, 32)), rng.normal(size=2))
    for p in (model.head.weight, model.head.bias):  # the head starts at zero: move it off
        p.data[...] = rng.normal(scale=0.3, size=p.shape)

    def call(inputs):
        return model(inputs, batch.key_padding_mask, structure=batch.structure)

    check_module_gradients(model, call, lambda dout: {"inputs": model.backward(dout)},
                           {"inputs": batch.tokens.astype(np.float64)}, samples=4)


def test_a_fresh_model_with_a_linear_path_is_that_linear_model():
    from rdkit import Chem
    from rdkit.Chem import rdFingerprintGenerator

    ds, adapter, _, model = _linear_setup()
    rng = np.random.default_rng(1)
    coefficients, intercepts = rng.normal(size=(2, 32)), np.array([5.0, 7.0])
    adapter.set_linear_path(model, coefficients, intercepts)
    generator = rdFingerprintGenerator.GetMorganGenerator(radius=2, fpSize=32)
    prints = np.stack([generator.GetFingerprintAsNumPy(Chem.MolFromSmiles(s))
                       for s in ds["smiles"].values])
    group = (ds["target"].values == "P2").astype(int)
    expected = (prints * coefficients[group]).sum(axis=1) + intercepts[group]
    # predictions come back in the label's float32: a few of its rounding steps
    np.testing.assert_allclose(adapter.predict(model, ds)["affinity"].values, expected,
                               rtol=4 * np.finfo(np.float32).eps, atol=0)
    terms = adapter.contributions(model, ds)  # float32 too: a rounding per atom
    np.testing.assert_allclose(terms.sum("ligand_atom").values + adapter.target_scale["mean"],
                               expected, rtol=16 * np.finfo(np.float32).eps, atol=0)


def test_linear_path_errors_name_the_field():
    _, adapter, _, model = _linear_setup()
    with pytest.raises(ValueError, match="offsets"):
        model.set_linear_path(np.zeros((2, 32)), np.zeros(3))
    with pytest.raises(ValueError, match="weights"):
        model.set_linear_path(np.zeros((2, 16)), np.zeros(2))
    with pytest.raises(ValueError, match="fingerprint_bits"):
        build(dataclasses.replace(adapter.model_config(), fingerprint_bits=-2))
    with pytest.raises(ValueError, match="out_features"):
        build(dataclasses.replace(adapter.model_config(), out_features=2))
    _, _, batch, plain = _setup("float64")
    with pytest.raises(ValueError, match="no linear path"):
        plain.set_linear_path(np.zeros((1, 1)), np.zeros(1))
