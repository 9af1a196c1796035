"""from_rdkit / from_smiles / read_sdf / read_smiles: RDKit molecules and files as the molecule
Dataset (layout, padding, given and embedded conformers, seeded reproducibility, per-atom
features, failures)."""
import sys

import numpy as np
import pytest
import xarray as xr

pytest.importorskip("rdkit")
from rdkit import Chem  # noqa: E402
from rdkit.Chem import AllChem  # noqa: E402
from rdkit.Geometry import Point3D  # noqa: E402

from seqattn.adapters import from_rdkit, from_smiles  # noqa: E402
from seqattn.readers.rdkit_molecules import HYBRIDIZATIONS  # noqa: E402


def with_conformer(smiles, xyz):
    """A molecule from `smiles` with one 3-D conformer at the (A, 3) positions `xyz`."""
    mol = Chem.MolFromSmiles(smiles)
    conformer = Chem.Conformer(mol.GetNumAtoms())
    for i, (x, y, z) in enumerate(xyz):
        conformer.SetAtomPosition(i, Point3D(x, y, z))
    conformer.Set3D(True)
    mol.AddConformer(conformer)
    return mol


def bond_lengths(ds, row, mol):
    xyz = ds["positions"].values[row]
    return np.array([np.linalg.norm(xyz[b.GetBeginAtomIdx()] - xyz[b.GetEndAtomIdx()])
                     for b in mol.GetBonds()])


def test_layout_and_padding():
    ds = from_smiles(["CCO", "c1ccccc1O"], properties={"energy": [1.5, -2.0]})
    assert dict(ds.sizes) == {"molecule": 2, "atom": 7, "xyz": 3}
    assert ds["atomic_number"].dims == ("molecule", "atom")
    assert ds["positions"].dims == ("molecule", "atom", "xyz")
    assert ds["energy"].dims == ("molecule",)
    assert ds["atomic_number"].dtype == np.int64
    assert list(ds["xyz"].values) == ["x", "y", "z"]
    assert list(ds["molecule"].values) == [0, 1]
    assert list(ds["smiles"].values) == ["CCO", "c1ccccc1O"]
    assert list(ds["conformer"].values) == ["embedded", "embedded"]
    np.testing.assert_array_equal(ds["atomic_number"].values,
                                  [[6, 6, 8, 0, 0, 0, 0], [6, 6, 6, 6, 6, 6, 8]])
    positions = ds["positions"].values
    assert np.isnan(positions[0, 3:]).all() and np.isfinite(positions[0, :3]).all()
    assert np.isfinite(positions[1]).all()
    np.testing.assert_array_equal(ds["energy"].values, [1.5, -2.0])


def test_a_given_conformer_is_used_as_it_is_and_the_molecule_is_left_alone():
    xyz = [[0.1, 0.2, 0.3], [1.5, -0.4, 0.7], [2.2, 0.9, -1.1]]
    mol = with_conformer("CCO", xyz)
    ds = from_rdkit([mol])
    np.testing.assert_array_equal(ds["positions"].values[0], xyz)
    assert ds["conformer"].values[0] == "given"
    # conformers="embed" replaces it in the Dataset, not in the caller's molecule
    embedded = from_rdkit([mol], conformers="embed")
    assert embedded["conformer"].values[0] == "embedded"
    assert not np.allclose(embedded["positions"].values[0], xyz)
    assert mol.GetNumConformers() == 1 and mol.GetNumAtoms() == 3
    np.testing.assert_array_equal(mol.GetConformer().GetPositions(), xyz)


def test_hydrogens_added_on_a_given_conformer_sit_next_to_their_atoms():
    xyz = [[0.0, 0.0, 0.0], [1.43, 0.0, 0.0]]  # methanol's C and O
    ds = from_rdkit([with_conformer("CO", xyz)], add_hydrogens=True)
    numbers = ds["atomic_number"].values[0]
    np.testing.assert_array_equal(numbers, [6, 8, 1, 1, 1, 1])
    np.testing.assert_array_equal(ds["positions"].values[0, :2], xyz)
    mol = Chem.AddHs(Chem.MolFromSmiles("CO"))
    lengths = bond_lengths(ds, 0, mol)
    hydrogen_bonds = [b.GetIdx() for b in mol.GetBonds()
                      if 1 in (b.GetBeginAtom().GetAtomicNum(), b.GetEndAtom().GetAtomicNum())]
    assert np.all((lengths[hydrogen_bonds] > 0.9) & (lengths[hydrogen_bonds] < 1.2))


def test_embedded_geometry_is_chemical_and_hydrogens_are_removed_in_place():
    smiles = ["CC(=O)Nc1ccc(O)cc1"]
    heavy = from_smiles(smiles, seed=3)
    full = from_smiles(smiles, seed=3, add_hydrogens=True)
    mol = Chem.MolFromSmiles(smiles[0])
    assert heavy.sizes["atom"] == mol.GetNumAtoms()
    assert full.sizes["atom"] == Chem.AddHs(mol).GetNumAtoms()
    assert (full["atomic_number"].values[0, mol.GetNumAtoms():] == 1).all()
    # the heavy atoms keep the positions they had in the embedding with hydrogens
    np.testing.assert_array_equal(heavy["positions"].values[0],
                                  full["positions"].values[0, :mol.GetNumAtoms()])
    lengths = bond_lengths(heavy, 0, mol)
    assert np.all((lengths > 1.15) & (lengths < 1.6)), lengths


def test_seeded_embedding_is_reproducible_and_independent_of_the_other_molecules():
    smiles = ["CCCCO", "OCC(N)C(=O)O"]
    first = from_smiles(smiles, seed=11)["positions"].values
    np.testing.assert_array_equal(first, from_smiles(smiles, seed=11)["positions"].values)
    other_seed = from_smiles(smiles, seed=12)["positions"].values
    assert not np.allclose(first[np.isfinite(first)], other_seed[np.isfinite(other_seed)])
    alone = from_smiles(smiles[1:], seed=11)["positions"].values
    np.testing.assert_array_equal(alone[0], first[1])


def test_properties_read_from_the_molecules():
    mols = [with_conformer("C", [[0.0, 0.0, 0.0]]) for _ in range(3)]
    mols[0].SetProp("dG", "-3.25")
    mols[2].SetProp("dG", "1")
    ds = from_rdkit(mols, properties=["dG"])
    np.testing.assert_array_equal(ds["dG"].values, [-3.25, np.nan, 1.0])
    mols[1].SetProp("dG", "high")
    with pytest.raises(ValueError, match=r"molecule 1 .*'dG' is 'high', not a number"):
        from_rdkit(mols, properties=["dG"])


def test_atom_features():
    names = ["formal_charge", "aromatic", "hydrogens", "degree", "ring", "hybridization"]
    ds = from_smiles(["C[NH3+]", "c1ccccc1C"], atom_features=names)
    np.testing.assert_array_equal(ds["formal_charge"].values[0, :2], [0, 1])
    np.testing.assert_array_equal(ds["aromatic"].values[1], [1, 1, 1, 1, 1, 1, 0])
    np.testing.assert_array_equal(ds["hydrogens"].values[0, :2], [3, 3])
    np.testing.assert_array_equal(ds["hydrogens"].values[1], [1, 1, 1, 1, 1, 0, 3])
    np.testing.assert_array_equal(ds["degree"].values[0, :2], [4, 4])
    np.testing.assert_array_equal(ds["degree"].values[1], [3, 3, 3, 3, 3, 3, 4])
    np.testing.assert_array_equal(ds["ring"].values[1], [1, 1, 1, 1, 1, 1, 0])
    hybridization = ds["hybridization"]
    codes = dict(zip(hybridization.attrs["flag_meanings"].split(),
                     hybridization.attrs["flag_values"]))
    assert list(codes) == list(HYBRIDIZATIONS)
    np.testing.assert_array_equal(hybridization.values[0, :2], [codes["sp3"]] * 2)
    np.testing.assert_array_equal(hybridization.values[1], [codes["sp2"]] * 6 + [codes["sp3"]])
    # explicit hydrogens (added as atoms) count like implicit ones
    explicit = from_smiles(["C[NH3+]"], add_hydrogens=True, atom_features=names)
    np.testing.assert_array_equal(explicit["hydrogens"].values[0], [3, 3, 0, 0, 0, 0, 0, 0])
    np.testing.assert_array_equal(explicit["degree"].values[0], [4, 4, 1, 1, 1, 1, 1, 1])


def test_failures_name_the_molecule_or_drop_it():
    smiles = ["CCO", "C1CC", "*CC", "O"]
    with pytest.raises(ValueError, match=r"molecule 1 \(SMILES 'C1CC'\): RDKit could not"):
        from_smiles(smiles)
    with pytest.raises(ValueError, match=r"molecule 1 \(SMILES 'C\*'\): atom 1 is a dummy"):
        from_smiles(["CCO", "C*"])
    with pytest.warns(UserWarning, match=r"dropped 2 of 4 molecules: molecule 1 .*molecule 2"):
        ds = from_smiles(smiles, properties={"y": [1.0, 2.0, 3.0, 4.0]}, on_failure="drop")
    assert list(ds["molecule"].values) == [0, 3]
    assert list(ds["smiles"].values) == ["CCO", "O"]
    np.testing.assert_array_equal(ds["y"].values, [1.0, 4.0])
    with pytest.raises(ValueError, match="none of the 1 molecules"):
        from_smiles(["C1CC"], on_failure="drop")


def test_a_2d_conformer_counts_as_none():
    flat = Chem.MolFromSmiles("CC")
    AllChem.Compute2DCoords(flat)
    mols = [with_conformer("CO", [[0, 0, 0], [1.4, 0, 0]]), flat]
    assert list(from_rdkit(mols)["conformer"].values) == ["given", "embedded"]
    with pytest.raises(ValueError, match=r"molecule 1 \(SMILES 'CC'\): it has no 3-D conformer"):
        from_rdkit(mols, conformers="given")


def test_an_embedding_that_fails_is_retried_from_random_coordinates_then_reported(monkeypatch):
    tried = []

    def fails(mol, params):
        tried.append(params.useRandomCoords)
        return -1

    monkeypatch.setattr(AllChem, "EmbedMolecule", fails)
    with pytest.raises(ValueError, match=r"molecule 0 \(SMILES 'CCO'\): ETKDG found no 3-D "
                                         r"conformer \(seed 5"):
        from_smiles(["CCO"], seed=5)
    assert tried == [False, True]


@pytest.mark.parametrize("call, message", [
    (lambda: from_smiles("CCO"), "sequence of SMILES strings"),
    (lambda: from_smiles(["C"], seed=-1), "seed must be a non-negative integer"),
    (lambda: from_smiles(["C"], atom_features=["charge"]), r"unknown atom_features \['charge'\]"),
    (lambda: from_smiles(["C"], on_failure="skip"), "on_failure='skip'"),
    (lambda: from_rdkit([Chem.MolFromSmiles("C")], conformers="2d"), "conformers='2d'"),
    (lambda: from_smiles(["C", "O"], properties={"y": [1.0]}), r"properties\['y'\] has shape"),
    (lambda: from_smiles(["C"], properties={"positions": [1.0]}), "would overwrite"),
])
def test_bad_arguments_are_named(call, message):
    with pytest.raises((TypeError, ValueError), match=message):
        call()


def test_without_rdkit_the_error_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "rdkit", None)
    with pytest.raises(ImportError, match=r"seqattn\[molecules\]"):
        from_smiles(["C"])


def test_sd_files_are_read_by_path_with_their_coordinates_and_fields(tmp_path):
    import gzip

    from seqattn.readers import read_sdf

    mols = [with_conformer("CO", [[0.0, 0.0, 0.0], [1.43, 0.0, 0.0]]),
            with_conformer("CN", [[0.0, 0.0, 0.0], [0.0, 1.47, 0.0]])]
    mols[0].SetProp("dG", "-5.1")
    writer = Chem.SDWriter(str(tmp_path / "two.sdf"))
    for mol in mols:
        writer.write(mol)
    writer.close()
    ds = read_sdf(tmp_path / "two.sdf", properties=["dG"])
    np.testing.assert_array_equal(ds["atomic_number"].values, [[6, 8], [6, 7]])
    np.testing.assert_allclose(ds["positions"].values[1, 1], [0.0, 1.47, 0.0], atol=1e-4)
    assert list(ds["conformer"].values) == ["given", "given"]
    np.testing.assert_array_equal(ds["dG"].values, [-5.1, np.nan])
    with open(tmp_path / "two.sdf", "rb") as plain, gzip.open(tmp_path / "two.sdf.gz", "wb") as gz:
        gz.write(plain.read())
    xr.testing.assert_identical(read_sdf(tmp_path / "two.sdf.gz", properties=["dG"]), ds)
    with pytest.raises(FileNotFoundError, match="'.*none.sdf' is not a file; expected an SD"):
        read_sdf(tmp_path / "none.sdf")


def test_smiles_files_are_read_by_path_with_named_columns(tmp_path):
    from seqattn.readers import read_smiles

    (tmp_path / "set.smi").write_text("smiles\tname\tdG\nCCO\tethanol\t-5.0\nC1CC\tbroken\t1.0\n"
                                      "c1ccccc1\tbenzene\t-0.9\n")
    with pytest.warns(UserWarning, match="dropped 1 of 3 molecules: molecule 1"):
        ds = read_smiles(tmp_path / "set.smi", delimiter="\t", title_line=True,
                         properties=["dG"], on_failure="drop", seed=3)
    assert list(ds["molecule"].values) == [0, 2]
    assert list(ds["smiles"].values) == ["CCO", "c1ccccc1"]
    np.testing.assert_array_equal(ds["dG"].values, [-5.0, -0.9])
    expected = from_smiles(["CCO", "c1ccccc1"], seed=3)
    np.testing.assert_array_equal(ds["positions"].values, expected["positions"].values)
    with pytest.raises(ValueError, match="properties=\\['dG'\\] name columns, but title_line"):
        read_smiles(tmp_path / "set.smi", properties=["dG"])
