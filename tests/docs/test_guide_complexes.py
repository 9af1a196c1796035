"""The molecules page's protein-ligand block runs as the page shows it, on a receptor (a small
peptide) and four ligand poses that the test writes with RDKit."""
import numpy as np

from page_blocks import GUIDE, run_block


def _write_receptor_and_poses(folder):
    from rdkit import Chem
    from rdkit.Chem import AllChem
    from rdkit.Geometry import Point3D

    receptor = Chem.AddHs(Chem.MolFromSequence("GSAKD"))
    AllChem.EmbedMolecule(receptor, randomSeed=1)
    Chem.MolToPDBFile(Chem.RemoveHs(receptor), str(folder / "receptor.pdb"))
    centre = receptor.GetConformer().GetPositions().mean(axis=0)
    writer = Chem.SDWriter(str(folder / "poses.sdf"))
    for i, smiles in enumerate(["CCO", "CC(=O)N", "c1ccccc1O", "CCN"]):
        ligand = Chem.AddHs(Chem.MolFromSmiles(smiles))
        AllChem.EmbedMolecule(ligand, randomSeed=i)
        conformer = ligand.GetConformer()
        for j in range(ligand.GetNumAtoms()):
            p = conformer.GetAtomPosition(j)
            conformer.SetAtomPosition(j, Point3D(p.x + centre[0] + i, p.y + centre[1],
                                                 p.z + centre[2]))
        writer.write(ligand)
    writer.close()


def test_the_complex_block_runs_as_written(tmp_path, monkeypatch):
    _write_receptor_and_poses(tmp_path)
    monkeypatch.chdir(tmp_path)
    namespace = {"pk": np.array([6.0, 7.5, 5.2, 6.8], np.float32),
                 "train": np.array([True, True, True, False])}
    run_block(GUIDE / "molecules.md", "## Protein-ligand complexes", namespace)
    out, atoms, ds = namespace["out"], namespace["atoms"], namespace["ds"]
    assert out["affinity"].dims == ("complex",) and out.sizes["complex"] == 4
    assert np.isfinite(out["affinity"]).all()
    assert atoms.dims == ("complex", "ligand_atom")
    mean = namespace["adapter"].target_scale["mean"]
    np.testing.assert_allclose(atoms.sum("ligand_atom") + mean, out["affinity"], rtol=1e-5,
                               atol=1e-5)
