"""Small generated protein-ligand complexes for the complex tests: a pocket of atoms on a
sphere shell, ligands of a few atoms inside it, and an 'affinity' that counts close
ligand-pocket contacts of polar atoms (a stand-in for the physics), so that where the ligand
sits against the pocket decides the label."""
import numpy as np

from seqattn.readers.complexes import complexes_from_atoms

ELEMENTS = np.array(["C", "N", "O", "S"])
RESIDUES = np.array(["ALA", "SER", "ASP", "LYS", "HOH", "XYZ"])


def pocket(rng, size=40):
    direction = rng.standard_normal((size, 3))
    radius = rng.uniform(4.0, 6.0, size)[:, None]
    return {"element": list(rng.choice(ELEMENTS, size, p=[0.6, 0.15, 0.2, 0.05])),
            "residue": list(rng.choice(RESIDUES, size)),
            "xyz": direction / np.linalg.norm(direction, axis=1, keepdims=True) * radius}


def contacts(ligand_elements, ligand_xyz, site):
    polar = np.isin(ligand_elements, ["N", "O"])
    site_polar = np.isin(site["element"], ["N", "O"])
    gap = np.linalg.norm(ligand_xyz[:, None] - site["xyz"][None], axis=-1)
    return float(((gap < 3.5) & polar[:, None] & site_polar[None]).sum())


def make_complexes(n=40, seed=0, offset=1.5):
    """n complexes over two pockets; the first half is 'train' and carries an offset in its
    labels, so statistics of the training half differ from the rest."""
    rng = np.random.default_rng(seed)
    sites = [pocket(rng), pocket(rng)]
    ligands, pockets, affinity, target = [], [], [], []
    for i in range(n):
        site = sites[i % 2]
        atoms = int(rng.integers(4, 9))
        elements = rng.choice(["C", "N", "O", "Cl"], atoms, p=[0.5, 0.2, 0.25, 0.05])
        centre = rng.normal(scale=1.5, size=3)
        xyz = centre + rng.normal(scale=1.2, size=(atoms, 3))
        ligands.append((list(elements), xyz))
        pockets.append(site)
        affinity.append(5.0 + 0.5 * contacts(elements, xyz, site) + rng.normal(scale=0.1)
                        + (offset if i < n // 2 else 0.0))
        target.append("P1" if i % 2 == 0 else "P2")
    split = np.where(np.arange(n) < n // 2, "train", "test")
    ds = complexes_from_atoms(ligands, pockets,
                              values={"affinity": np.asarray(affinity, np.float32)},
                              coords={"target": np.asarray(target), "split": split},
                              pocket_cutoff=8.0)
    ds["affinity"].attrs["units"] = "-log10(M)"
    return ds


def write_receptor_and_poses(folder, sequence, poses):
    """Files as a docking run leaves them, written with RDKit: ``receptor.pdb``, the peptide
    `sequence` embedded (seed 1) without hydrogens, and ``poses.sdf``, for each (smiles, shift)
    of `poses` the ligand embedded (seed: its index) and moved to the receptor's centre plus
    `shift` (Angstrom, a 3-vector). Returns the receptor's heavy-atom positions."""
    from rdkit import Chem
    from rdkit.Chem import AllChem
    from rdkit.Geometry import Point3D

    receptor = Chem.AddHs(Chem.MolFromSequence(sequence))
    AllChem.EmbedMolecule(receptor, randomSeed=1)
    heavy = Chem.RemoveHs(receptor)
    Chem.MolToPDBFile(heavy, str(folder / "receptor.pdb"))
    centre = receptor.GetConformer().GetPositions().mean(axis=0)
    writer = Chem.SDWriter(str(folder / "poses.sdf"))
    for i, (smiles, shift) in enumerate(poses):
        ligand = Chem.AddHs(Chem.MolFromSmiles(smiles))
        AllChem.EmbedMolecule(ligand, randomSeed=i)
        conformer = ligand.GetConformer()
        for j in range(ligand.GetNumAtoms()):
            moved = np.asarray(conformer.GetAtomPosition(j)) + centre + np.asarray(shift)
            conformer.SetAtomPosition(j, Point3D(*moved))
        writer.write(ligand)
    writer.close()
    return heavy.GetConformer().GetPositions()
