"""Protein-ligand complexes as the Dataset that :class:`seqattn.adapters.ComplexAdapter` reads.

One sample per complex (a ligand in one pose against its pocket); several poses of a ligand are
several complexes. The Dataset::

    dims      complex, ligand_atom, pocket_atom, xyz
    ligand_element (complex, ligand_atom)   element symbols, "" past a ligand's last atom
    ligand_xyz     (complex, ligand_atom, xyz)  Angstrom, NaN past the last atom
    pocket_element (complex, pocket_atom)   element symbols of the pocket's heavy atoms, ""
    pocket_residue (complex, pocket_atom)   residue names (ALA, ..., HOH), "" past the last
    pocket_xyz     (complex, pocket_atom, xyz)
    ligand_smiles_atom (complex, ligand_atom)  each atom's index in the RDKit molecule of the
                   ``smiles`` coordinate, -1 past the last atom (only where the source has bonds:
                   it lets the adapter compute fingerprints on the pose's atoms)
    <values>       (complex,)               measured labels (an affinity, a class)

and per-complex coordinates (the target, the ligand's SMILES, the published split, a docking
score) when the source has them. The pocket of a complex is the receptor's heavy atoms within
``pocket_cutoff`` Angstrom of any ligand atom, so its size follows the ligand, not the box.

* :func:`read_docked_complexes`: the compact files ``examples/data/make_complexes.py`` writes.
* :func:`read_complex`: a receptor file (PDB through RDKit; PDBQT through meeko) and a ligand
  file (SD through RDKit, every molecule a pose) as complexes.
* :func:`seqattn.readers.complexes_from_atoms`: from arrays, for any other source.
"""
import json
from pathlib import Path

import numpy as np
import xarray as xr

POCKET_CUTOFF = 8.0


def _pocket_within(pocket_xyz, ligand_xyz, cutoff):
    """Indices of pocket atoms within `cutoff` of any ligand atom."""
    gap = np.linalg.norm(pocket_xyz[:, None, :] - ligand_xyz[None, :, :], axis=-1)
    return np.flatnonzero(gap.min(axis=1) <= cutoff)


def smiles_atom_indices(smiles, elements, bonds):
    """Each pose atom's index in ``Chem.MolFromSmiles(smiles)``, found by matching the bond
    graphs (docking tools may reorder a ligand's atoms)."""
    from rdkit import Chem

    template = Chem.MolFromSmiles(smiles)
    if template is None:
        raise ValueError(f"RDKit cannot read the SMILES {smiles!r}")
    pose = Chem.RWMol()
    for element in elements:
        pose.AddAtom(Chem.Atom(str(element)))
    for a, b in bonds:
        pose.AddBond(int(a), int(b), Chem.BondType.SINGLE)
    plain = Chem.RWMol(template)
    for atom in plain.GetAtoms():
        atom.SetIsAromatic(False)
        atom.SetFormalCharge(0)
    for bond in plain.GetBonds():
        bond.SetBondType(Chem.BondType.SINGLE)
        bond.SetIsAromatic(False)
    for mol in (pose, plain):
        mol.UpdatePropertyCache(strict=False)
        Chem.FastFindRings(mol)
    match = plain.GetSubstructMatch(pose)
    if len(match) != len(elements) or template.GetNumAtoms() != len(elements) \
            or template.GetNumBonds() != len(bonds):
        raise ValueError(f"the pose's {len(elements)} atoms and {len(bonds)} bonds are not the "
                         f"heavy-atom graph of {smiles!r}; expected the same molecule")
    return np.asarray(match, dtype=np.int64)


def complexes_from_atoms(ligands, pockets, values=None, coords=None, pocket_cutoff=POCKET_CUTOFF,
                         smiles_atoms=None):
    """The complex Dataset from per-complex atoms.

    Parameters
    ----------
    ligands : list of tuple
        One ``(elements, xyz)`` per complex: the ligand's heavy atoms, element symbols (n,) and
        positions (n, 3) in Angstrom.
    pockets : list of dict
        One per complex, with ``element`` (m,), ``xyz`` (m, 3) and optionally ``residue``
        (m,): the whole receptor or a box of it, cut to ``pocket_cutoff`` here.
    values : dict, optional
        Name -> (n_complexes,) labels (an affinity, a class); default None (no labels).
    coords : dict, optional
        Name -> (n_complexes,) per-complex coordinates (target, smiles, ...); default None.
    pocket_cutoff : float, default 8.0
        Distance in Angstrom: a pocket keeps the atoms this close to any ligand atom.
    smiles_atoms : list of numpy.ndarray, optional
        One (n,) int array per complex: each ligand atom's index in the molecule of the
        complex's ``smiles`` coordinate (stored as ``ligand_smiles_atom``); default None.

    Returns
    -------
    xarray.Dataset
        The complex Dataset (dims complex, ligand_atom, pocket_atom, xyz) of the module
        docstring, padded to the largest ligand and pocket.
    """
    if len(ligands) != len(pockets):
        raise ValueError(f"ligands has {len(ligands)} complexes but pockets has {len(pockets)}")
    if not len(ligands):
        raise ValueError("no complexes: ligands is empty")
    if not pocket_cutoff > 0:
        raise ValueError(f"pocket_cutoff = {pocket_cutoff!r}; expected a positive distance in "
                         "Angstrom")
    if smiles_atoms is not None and len(smiles_atoms) != len(ligands):
        raise ValueError(f"smiles_atoms has {len(smiles_atoms)} complexes but ligands has "
                         f"{len(ligands)}")
    cut = []
    for i, ((elements, xyz), pocket) in enumerate(zip(ligands, pockets)):
        xyz = np.asarray(xyz, dtype=np.float64).reshape(-1, 3)
        if len(elements) != len(xyz) or not len(xyz):
            raise ValueError(f"complex {i}: the ligand has {len(elements)} elements and "
                             f"{len(xyz)} positions; expected one position per atom, at least one")
        pocket_xyz = np.asarray(pocket["xyz"], dtype=np.float64).reshape(-1, 3)
        kept = _pocket_within(pocket_xyz, xyz, pocket_cutoff)
        residues = pocket.get("residue", [""] * len(pocket_xyz))
        cut.append((list(elements), xyz, [pocket["element"][j] for j in kept],
                    [residues[j] for j in kept], pocket_xyz[kept]))
    n = max(len(c[0]) for c in cut)
    m = max(max(len(c[2]) for c in cut), 1)
    count = len(cut)
    ligand_element = np.full((count, n), "", dtype="<U2")
    ligand_xyz = np.full((count, n, 3), np.nan, dtype=np.float32)
    pocket_element = np.full((count, m), "", dtype="<U2")
    pocket_residue = np.full((count, m), "", dtype="<U3")
    pocket_xyz = np.full((count, m, 3), np.nan, dtype=np.float32)
    for i, (elements, xyz, p_elements, p_residues, p_xyz) in enumerate(cut):
        ligand_element[i, :len(elements)] = elements
        ligand_xyz[i, :len(elements)] = xyz
        pocket_element[i, :len(p_elements)] = p_elements
        pocket_residue[i, :len(p_residues)] = p_residues
        pocket_xyz[i, :len(p_elements)] = p_xyz
    data = {"ligand_element": (("complex", "ligand_atom"), ligand_element),
            "ligand_xyz": (("complex", "ligand_atom", "xyz"), ligand_xyz, {"units": "Angstrom"}),
            "pocket_element": (("complex", "pocket_atom"), pocket_element),
            "pocket_residue": (("complex", "pocket_atom"), pocket_residue),
            "pocket_xyz": (("complex", "pocket_atom", "xyz"), pocket_xyz, {"units": "Angstrom"})}
    if smiles_atoms is not None:
        order = np.full((count, n), -1, dtype=np.int32)
        for i, index in enumerate(smiles_atoms):
            if len(index) != len(cut[i][0]):
                raise ValueError(f"complex {i}: smiles_atoms has {len(index)} indices for "
                                 f"{len(cut[i][0])} ligand atoms; expected one per atom")
            order[i, :len(index)] = index
        data["ligand_smiles_atom"] = (("complex", "ligand_atom"), order)
    for name, value in (values or {}).items():
        data[name] = ("complex", np.asarray(value))
    coordinates = {"xyz": ["x", "y", "z"]}
    coordinates.update({name: ("complex", np.asarray(value)) for name, value in
                        (coords or {}).items()})
    return xr.Dataset(data, coords=coordinates,
                      attrs={"pocket_cutoff": float(pocket_cutoff)})


def read_docked_complexes(folder, targets=None, pocket_cutoff=POCKET_CUTOFF):
    """The complexes in `folder` (``<TARGET>.jsonl`` poses and ``<TARGET>_pocket.json``, as
    ``examples/data/make_complexes.py`` writes them), for `targets` (default: every target
    there). Values: ``affinity`` = pKi or pEC50 (-log10 of the molar value); coordinates
    ``target``, ``smiles``, ``split`` (the published one) and ``vina`` (kcal/mol).

    Parameters
    ----------
    folder : str or pathlib.Path
        The folder holding the targets' files.
    targets : list of str, optional
        The targets to read; default None, every target with a pocket file in `folder`.
    pocket_cutoff : float, default 8.0
        Distance in Angstrom: a pocket keeps the receptor atoms this close to any ligand atom.

    Returns
    -------
    xarray.Dataset
        The complex Dataset (see :func:`seqattn.readers.complexes_from_atoms`), one complex
        per pose.
    """
    folder = Path(folder)
    if targets is None:
        targets = sorted(p.name[:-len("_pocket.json")] for p in folder.glob("*_pocket.json"))
    ligands, pockets, rows, order = [], [], [], []
    for target in targets:
        pocket_path, poses_path = folder / f"{target}_pocket.json", folder / f"{target}.jsonl"
        for path in (pocket_path, poses_path):
            if not path.exists():
                raise FileNotFoundError(f"target {target!r} has no {path.name} in {folder}")
        pocket = json.loads(pocket_path.read_text())
        pocket = {"element": pocket["element"], "xyz": pocket["xyz"],
                  "residue": pocket["residue_name"]}
        for line in poses_path.read_text().splitlines():
            if line.strip():
                pose = json.loads(line)
                ligands.append((pose["element"], pose["xyz"]))
                order.append(smiles_atom_indices(pose["smiles"], pose["element"], pose["bonds"]))
                pockets.append(pocket)
                rows.append((target, pose["smiles"], pose["split"], pose["vina"],
                             pose["y"] + 9.0))
    if not rows:
        raise ValueError(f"no docked complexes for targets {list(targets)} in {folder}")
    target, smiles, split, vina, affinity = (np.asarray(c) for c in zip(*rows))
    ds = complexes_from_atoms(ligands, pockets, values={"affinity": affinity.astype(np.float32)},
                              coords={"target": target, "smiles": smiles, "split": split,
                                      "vina": vina.astype(np.float32)},
                              pocket_cutoff=pocket_cutoff, smiles_atoms=order)
    ds["affinity"].attrs.update(units="-log10(M)", long_name="pKi or pEC50")
    ds["vina"].attrs.update(units="kcal/mol")
    return ds


def _receptor_atoms(path):
    """(elements, residue names, xyz) of a receptor's heavy atoms."""
    path = Path(path)
    if path.suffix.lower() == ".pdbqt":
        from meeko import PDBQTMolecule

        from_types = {"A": "C", "NA": "N", "NS": "N", "OA": "O", "OS": "O", "SA": "S",
                      "HD": "H", "HS": "H"}
        atoms = PDBQTMolecule.from_file(str(path), skip_typing=True).atoms()
        elements = [from_types.get(a["atom_type"], a["atom_type"]) for a in atoms]
        keep = [i for i, e in enumerate(elements) if e != "H"]
        return ([elements[i] for i in keep], [str(atoms[i]["resname"]) for i in keep],
                np.asarray([atoms[i]["xyz"] for i in keep], dtype=np.float64))
    from rdkit import Chem

    receptor = Chem.MolFromPDBFile(str(path), removeHs=True, sanitize=False)
    if receptor is None:
        raise ValueError(f"RDKit could not read the receptor {path}; expected a PDB file")
    atoms = [a for a in receptor.GetAtoms() if a.GetAtomicNum() > 1]
    xyz = receptor.GetConformer().GetPositions()[[a.GetIdx() for a in atoms]]
    return ([a.GetSymbol() for a in atoms],
            [a.GetPDBResidueInfo().GetResidueName().strip() if a.GetPDBResidueInfo() else ""
             for a in atoms], xyz)


def read_complex(receptor, ligand, pocket_cutoff=POCKET_CUTOFF, values=None):
    """Complexes of one receptor (a PDB or PDBQT file) with the poses in `ligand` (an SD file;
    each molecule in it is one complex), with each ligand's SMILES as a coordinate. `values`:
    name -> one label per pose, optional.

    Parameters
    ----------
    receptor : str or pathlib.Path
        The receptor file: PDB (read with RDKit) or PDBQT (read with meeko); its heavy atoms
        make the pockets.
    ligand : str or pathlib.Path
        An SD file of 3-D poses, each molecule one complex.
    pocket_cutoff : float, default 8.0
        Distance in Angstrom: a pocket keeps the receptor atoms this close to any ligand atom.
    values : dict, optional
        Name -> one label per pose; default None (no labels).

    Returns
    -------
    xarray.Dataset
        The complex Dataset (see :func:`seqattn.readers.complexes_from_atoms`) with
        coordinates ``ligand`` (the poses' names) and ``smiles``.
    """
    from rdkit import Chem

    elements, residues, xyz = _receptor_atoms(receptor)
    poses = [m for m in Chem.SDMolSupplier(str(ligand), removeHs=True)]
    if any(m is None for m in poses) or not poses:
        raise ValueError(f"RDKit could not read every molecule of {ligand}; expected an SD "
                         "file with 3-D poses")
    pocket = {"element": elements, "xyz": xyz, "residue": residues}
    names = [m.GetProp("_Name") if m.HasProp("_Name") else "" for m in poses]
    elements = [[a.GetSymbol() for a in m.GetAtoms()] for m in poses]
    smiles = [Chem.MolToSmiles(m) for m in poses]
    order = [smiles_atom_indices(s, e, [(b.GetBeginAtomIdx(), b.GetEndAtomIdx())
                                        for b in m.GetBonds()])
             for s, e, m in zip(smiles, elements, poses)]
    return complexes_from_atoms(
        [(e, m.GetConformer().GetPositions()) for e, m in zip(elements, poses)],
        [pocket] * len(poses), values=values,
        coords={"ligand": np.asarray(names), "smiles": np.asarray(smiles)},
        pocket_cutoff=pocket_cutoff, smiles_atoms=order)
