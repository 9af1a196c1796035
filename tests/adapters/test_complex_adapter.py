"""Protein-ligand complexes: the readers (arrays, PDB + SD files through RDKit, the docked
complexes' compact files) cut the pocket around the ligand, and the adapter's tokens and errors."""
import json

import numpy as np
import pytest

from complex_helpers import make_complexes, write_receptor_and_poses
from seqattn.adapters.complex import ComplexAdapter, fingerprint_shares
from seqattn.readers.complexes import (complexes_from_atoms, read_complex, read_docked_complexes,
                                       smiles_atom_indices)


def _within(pocket_xyz, ligand_xyz, cutoff):
    return sum(min(np.linalg.norm(p - q) for q in ligand_xyz) <= cutoff for p in pocket_xyz)


def test_the_pocket_is_the_receptor_atoms_near_the_ligand():
    rng = np.random.default_rng(0)
    site = {"element": ["C"] * 50, "xyz": rng.uniform(-10, 10, (50, 3))}
    ligand = (["C", "O"], np.array([[0.0, 0, 0], [1.2, 0, 0]]))
    ds = complexes_from_atoms([ligand], [site], pocket_cutoff=5.0)
    kept = ds["pocket_xyz"].values[0][ds["pocket_element"].values[0] != ""]
    assert len(kept) == _within(site["xyz"], ligand[1], 5.0) > 0
    assert (np.linalg.norm(kept[:, None] - ligand[1][None], axis=-1).min(axis=1) <= 5.0).all()


def test_a_receptor_and_poses_from_files(tmp_path):
    heavy = write_receptor_and_poses(tmp_path, "GSAK", [("CCO", (0, 0, 0)), ("CCO", (3, 3, 3))])
    ds = read_complex(tmp_path / "receptor.pdb", tmp_path / "poses.sdf", pocket_cutoff=6.0,
                      values={"affinity": [6.0, 5.0]})
    assert ds.sizes["complex"] == 2
    assert list(ds["ligand_element"].values[0][:3]) == ["C", "C", "O"]
    assert ds["smiles"].values[0] == "CCO"
    assert list(ds["ligand_smiles_atom"].values[0][:3]) == [0, 1, 2]
    for i in range(2):
        ligand_xyz = ds["ligand_xyz"].values[i][:3]
        assert (ds["pocket_element"].values[i] != "").sum() == _within(heavy, ligand_xyz, 6.0)
    assert set(ds["pocket_residue"].values[0]) - {""} <= {"GLY", "SER", "ALA", "LYS"}


def test_the_docked_complexes_files(tmp_path):
    pocket = {"element": ["C", "N"], "atom_name": ["CA", "N"], "residue_name": ["ALA", "ALA"],
              "residue_number": [1, 1], "xyz": [[0.0, 0, 0], [30.0, 0, 0]],
              "center": [0, 0, 0], "size": [20, 20, 20], "target": "T"}
    (tmp_path / "T_pocket.json").write_text(json.dumps(pocket))
    pose = {"smiles": "CO", "y": -2.0, "split": "train", "vina": -5.5, "element": ["C", "O"],
            "xyz": [[1.0, 0, 0], [2.0, 0, 0]], "bonds": [[0, 1]]}
    (tmp_path / "T.jsonl").write_text(json.dumps(pose) + "\n")
    ds = read_docked_complexes(tmp_path)
    assert float(ds["affinity"][0]) == pytest.approx(7.0)  # pKi = -log10(nM) + 9
    assert (ds["pocket_element"].values[0] != "").sum() == 1  # the far atom is cut
    assert ds["target"].values[0] == "T" and float(ds["vina"][0]) == pytest.approx(-5.5)
    with pytest.raises(FileNotFoundError, match="U"):
        read_docked_complexes(tmp_path, targets=["U"])


def test_tokens_types_and_errors():
    ds = make_complexes(n=4)
    ds["ligand_element"][0, 0] = "Se"  # an element without its own type
    adapter = ComplexAdapter().fit(ds, targets="affinity")
    batch = adapter.encode(ds)
    other = adapter.ligand_types - 1
    assert batch.tokens[0, 0, other] == 1 and batch.structure.types[0, 0] == other
    present = ds["ligand_element"].values != ""
    assert (batch.key_padding_mask == ~present[:, :batch.tokens.shape[1]]).all()
    with pytest.raises(ValueError, match="targets="):
        ComplexAdapter().fit(ds)
    broken = ds.copy(deep=True)
    broken["ligand_xyz"][1, 0, 0] = np.nan
    with pytest.raises(ValueError, match="ligand_xyz"):
        adapter.batches(broken)
    with pytest.raises(ValueError, match="ligand_elements"):
        ComplexAdapter(ligand_elements="CNO")


def test_pocket_types_are_counted_after_the_ligand_types():
    ds = make_complexes(n=4)
    adapter = ComplexAdapter().fit(ds, targets="affinity")
    batch = adapter.encode(ds)
    first = ds["pocket_element"].values[0, 0]
    assert batch.structure.key_types[0, 0] == adapter.ligand_types \
        + adapter.pocket_elements.index(first)


def _docked(tmp_path, smiles_list):
    """A docked-complexes folder with one pose per SMILES, written with the atoms in reverse
    order (docking tools may reorder them)."""
    from rdkit import Chem
    from rdkit.Chem import AllChem

    pocket = {"element": ["C", "N", "O"], "atom_name": ["CA", "N", "O"],
              "residue_name": ["ALA", "ALA", "SER"], "residue_number": [1, 1, 2],
              "xyz": [[4.0, 0, 0], [0.0, 4, 0], [0.0, 0, 4]], "center": [0, 0, 0],
              "size": [20, 20, 20], "target": "T"}
    (tmp_path / "T_pocket.json").write_text(json.dumps(pocket))
    lines = []
    for k, smiles in enumerate(smiles_list):
        mol = Chem.AddHs(Chem.MolFromSmiles(smiles))
        AllChem.EmbedMolecule(mol, randomSeed=0)
        mol = Chem.RemoveHs(mol)
        reverse = list(range(mol.GetNumAtoms()))[::-1]
        mol = Chem.RenumberAtoms(mol, reverse)
        lines.append(json.dumps({
            "smiles": smiles, "y": -float(k), "split": "train", "vina": -5.0,
            "element": [a.GetSymbol() for a in mol.GetAtoms()],
            "xyz": mol.GetConformer().GetPositions().tolist(),
            "bonds": [[b.GetBeginAtomIdx(), b.GetEndAtomIdx()] for b in mol.GetBonds()]}))
    (tmp_path / "T.jsonl").write_text("\n".join(lines) + "\n")
    return read_docked_complexes(tmp_path)


def test_pose_atoms_are_matched_to_the_smiles_atoms(tmp_path):
    from rdkit import Chem

    ds = _docked(tmp_path, ["OCC(=O)N", "c1ccc(Cl)cc1C#N"])
    for i, smiles in enumerate(ds["smiles"].values):
        template = [a.GetSymbol() for a in Chem.MolFromSmiles(smiles).GetAtoms()]
        order = ds["ligand_smiles_atom"].values[i]
        elements = ds["ligand_element"].values[i]
        assert [template[j] for j in order[order >= 0]] == list(elements[elements != ""])
        assert sorted(order[order >= 0]) == list(range(len(template)))
    with pytest.raises(ValueError, match="graph"):
        smiles_atom_indices("CCO", ["C", "C", "O"], [(0, 1)])


def test_fingerprint_shares_add_up_to_the_fingerprint_whatever_the_atom_order(tmp_path):
    from rdkit import Chem
    from rdkit.Chem import rdFingerprintGenerator

    smiles = ["OCC(=O)N", "c1ccc(Cl)cc1C#N"]
    ds = _docked(tmp_path, smiles)
    adapter = ComplexAdapter(group="target", fingerprint_bits=256).fit(ds, targets="affinity")
    batch = adapter.encode(ds)
    generator = rdFingerprintGenerator.GetMorganGenerator(radius=2, fpSize=256)
    for i, s in enumerate(smiles):
        expected = generator.GetFingerprintAsNumPy(Chem.MolFromSmiles(s))
        np.testing.assert_allclose(batch.structure.fingerprint[i].sum(axis=0), expected,
                                   atol=1e-6)
    # pose atom 0 is the SMILES' last atom (the poses were written reversed)
    last = Chem.MolFromSmiles(smiles[0]).GetNumAtoms() - 1
    shares = fingerprint_shares(smiles[0], [last], 256, 2)[0]
    np.testing.assert_allclose(batch.structure.fingerprint[0, 0], shares, atol=1e-6)
    assert adapter.groups == ("T",)
    np.testing.assert_array_equal(batch.structure.group[..., 0], ~batch.key_padding_mask)


def test_groups_are_fitted_saved_and_unknown_ones_named():
    ds = make_complexes(n=6)
    adapter = ComplexAdapter(group="target").fit(ds, targets="affinity",
                                                 where={"complex": [0, 2, 4]})
    assert adapter.groups == ("P1",)
    again = ComplexAdapter.from_dict(adapter.to_dict())
    assert again.groups == ("P1",) and again.group == "target"
    with pytest.raises(ValueError, match="P2"):
        adapter.encode(ds)
    with pytest.raises(ValueError, match="smiles"):
        ComplexAdapter(fingerprint_bits=64).fit(ds, targets="affinity")
    with pytest.raises(ValueError, match="fingerprint_bits"):
        ComplexAdapter(fingerprint_bits=-1)
    with pytest.raises(ValueError, match="group"):
        ComplexAdapter(group=3)
