"""Protein-ligand complexes: the readers (arrays, PDB + SD files through RDKit, the docked
complexes' compact files) cut the pocket around the ligand, and the adapter's tokens and errors."""
import json

import numpy as np
import pytest

from complex_helpers import make_complexes
from seqattn.adapters.complex import ComplexAdapter
from seqattn.readers.complexes import complexes_from_atoms, read_complex, read_docked_complexes


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
    from rdkit import Chem
    from rdkit.Chem import AllChem

    receptor = Chem.AddHs(Chem.MolFromSequence("GSAK"))
    AllChem.EmbedMolecule(receptor, randomSeed=1)
    Chem.MolToPDBFile(Chem.RemoveHs(receptor), str(tmp_path / "receptor.pdb"))
    centre = receptor.GetConformer().GetPositions().mean(axis=0)
    writer = Chem.SDWriter(str(tmp_path / "poses.sdf"))
    for shift in (0.0, 3.0):
        ligand = Chem.AddHs(Chem.MolFromSmiles("CCO"))
        AllChem.EmbedMolecule(ligand, randomSeed=0)
        conformer = ligand.GetConformer()
        for i in range(ligand.GetNumAtoms()):
            conformer.SetAtomPosition(i, conformer.GetAtomPosition(i) + type(
                conformer.GetAtomPosition(i))(*(centre + shift)))
        writer.write(ligand)
    writer.close()
    ds = read_complex(tmp_path / "receptor.pdb", tmp_path / "poses.sdf", pocket_cutoff=6.0,
                      values={"affinity": [6.0, 5.0]})
    assert ds.sizes["complex"] == 2
    assert list(ds["ligand_element"].values[0][:3]) == ["C", "C", "O"]
    heavy = Chem.RemoveHs(receptor).GetConformer().GetPositions()
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
