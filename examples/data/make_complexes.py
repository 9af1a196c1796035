"""Dock measured ligands into their receptors once, so that the protein-ligand example never docks
at run time (issue 41). Resumable: run it again and it continues where it stopped.

Labels are the measured affinities of MoleculeACE's benchmark files (ChEMBL Ki or EC50, with their
published train/test split; MIT); receptors and pocket boxes are dockstring's (Apache-2.0); poses
come from AutoDock Vina (exhaustiveness 1, one pose, seed 0), ligands prepared by RDKit (ETKDG and
MMFF) and meeko. For each target the script writes, under ``examples/data/complexes/``:

* ``<TARGET>_pocket.json``: the receptor's heavy atoms within ``POCKET_MARGIN`` of the box
  (element, atom and residue names, residue number, coordinates in Angstrom, 2 decimals);
* ``<TARGET>.jsonl``: one line per docked ligand: SMILES, the label ``y`` as MoleculeACE gives it
  (-log10 of the measured Ki or EC50 in nM, so pKi = y + 9), the published split, the Vina score
  in kcal/mol, and the pose's heavy atoms (elements, coordinates, bonds as index pairs).

Ligands are capped (``MAX_HEAVY_ATOMS``, ``MAX_ROTATABLE_BONDS``, elements Vina types; no boron,
which crashes Vina) and at most ``PER_TARGET`` are taken per target, in an order drawn once
from a fixed seed, targets interleaved, so a partial run still covers every target.

    pip install --no-deps dockstring moleculeace vina meeko && pip install gemmi
    nice -n 19 python examples/data/make_complexes.py [--per-target 300] [--targets ABL1 F10]

ChEMBL targets (from the ChEMBL ids in MoleculeACE's file names) and dockstring receptors:
CHEMBL1862 ABL1, CHEMBL1871 AR, CHEMBL2034 NR3C1, CHEMBL204 F2 (thrombin), CHEMBL234 DRD3,
CHEMBL244 F10 (factor Xa), CHEMBL2971 JAK2 (Ki); CHEMBL235 PPARG, CHEMBL239 PPARA,
CHEMBL3979 PPARD (EC50).
"""
import argparse
import json
import os
from pathlib import Path

import numpy as np

TARGETS = {"ABL1": "CHEMBL1862_Ki", "AR": "CHEMBL1871_Ki", "NR3C1": "CHEMBL2034_Ki",
           "F2": "CHEMBL204_Ki", "DRD3": "CHEMBL234_Ki", "F10": "CHEMBL244_Ki",
           "JAK2": "CHEMBL2971_Ki", "PPARG": "CHEMBL235_EC50", "PPARA": "CHEMBL239_EC50",
           "PPARD": "CHEMBL3979_EC50"}
OUT = Path(__file__).resolve().parent / "complexes"
PER_TARGET = 300
MAX_HEAVY_ATOMS = 40
MAX_ROTATABLE_BONDS = 8
ELEMENTS = {"C", "N", "O", "S", "P", "F", "Cl", "Br", "I", "H"}
POCKET_MARGIN = 4.0  # Angstrom beyond the docking box
# AutoDock atom types -> elements (receptor PDBQT files type atoms, not elements)
AD_ELEMENTS = {"A": "C", "NA": "N", "NS": "N", "OA": "O", "OS": "O", "SA": "S", "HD": "H",
               "HS": "H"}


def _package_dir(name):
    import importlib.util

    return Path(importlib.util.find_spec(name).submodule_search_locations[0])


def receptor_files(target):
    folder = _package_dir("dockstring") / "resources" / "targets"
    conf = {}
    for line in (folder / f"{target}_conf.txt").read_text().splitlines():
        if "=" in line:
            key, value = line.split("=")
            conf[key.strip()] = float(value)
    center = [conf[f"center_{a}"] for a in "xyz"]
    size = [conf[f"size_{a}"] for a in "xyz"]
    return folder / f"{target}_target.pdbqt", center, size


def ligands(chembl):
    """(smiles, y, split) rows of a MoleculeACE benchmark file, read by path."""
    import csv

    path = _package_dir("MoleculeACE") / "Data" / "benchmark_data" / f"{chembl}.csv"
    with open(path) as f:
        return [(r["smiles"], float(r["y"]), r["split"]) for r in csv.DictReader(f)]


def acceptable(smiles):
    from rdkit import Chem
    from rdkit.Chem import Descriptors

    mol = Chem.MolFromSmiles(smiles)
    return (mol is not None and mol.GetNumHeavyAtoms() <= MAX_HEAVY_ATOMS
            and Descriptors.NumRotatableBonds(mol) <= MAX_ROTATABLE_BONDS
            and {a.GetSymbol() for a in mol.GetAtoms()} <= ELEMENTS)


def write_pocket(target, receptor, center, size):
    from meeko import PDBQTMolecule

    path = OUT / f"{target}_pocket.json"
    if path.exists():
        return
    atoms = PDBQTMolecule.from_file(str(receptor), skip_typing=True).atoms()
    xyz = np.asarray([a["xyz"] for a in atoms], dtype=np.float64)
    low = np.asarray(center) - np.asarray(size) / 2 - POCKET_MARGIN
    high = np.asarray(center) + np.asarray(size) / 2 + POCKET_MARGIN
    kept = [i for i in range(len(atoms)) if np.all((xyz[i] >= low) & (xyz[i] <= high))
            and AD_ELEMENTS.get(atoms[i]["atom_type"], atoms[i]["atom_type"]) != "H"]
    path.write_text(json.dumps({
        "target": target, "center": center, "size": size,
        "element": [AD_ELEMENTS.get(atoms[i]["atom_type"], atoms[i]["atom_type"]) for i in kept],
        "atom_name": [str(atoms[i]["name"]) for i in kept],
        "residue_name": [str(atoms[i]["resname"]) for i in kept],
        "residue_number": [int(atoms[i]["resid"]) for i in kept],
        "xyz": np.round(xyz[kept], 2).tolist()}))


def dock(vina, smiles):
    """(Vina score, pose as an RDKit molecule without hydrogens) of `smiles`."""
    from meeko import MoleculePreparation, PDBQTMolecule, PDBQTWriterLegacy, RDKitMolCreate
    from rdkit import Chem
    from rdkit.Chem import AllChem

    mol = Chem.AddHs(Chem.MolFromSmiles(smiles))
    if AllChem.EmbedMolecule(mol, randomSeed=0) != 0:
        return None
    AllChem.MMFFOptimizeMolecule(mol)
    text, ok, _ = PDBQTWriterLegacy.write_string(MoleculePreparation().prepare(mol)[0])
    if not ok:
        return None
    vina.set_ligand_from_string(text)
    vina.dock(exhaustiveness=1, n_poses=1)
    score = float(vina.energies(n_poses=1)[0][0])
    pose = RDKitMolCreate.from_pdbqt_mol(PDBQTMolecule(vina.poses(n_poses=1), is_dlg=False,
                                                       skip_typing=True))[0]
    return score, Chem.RemoveHs(pose)


def record(smiles, y, split, score, pose):
    xyz = pose.GetConformer().GetPositions()
    return {"smiles": smiles, "y": y, "split": split, "vina": round(score, 3),
            "element": [a.GetSymbol() for a in pose.GetAtoms()],
            "xyz": np.round(xyz, 2).tolist(),
            "bonds": [[b.GetBeginAtomIdx(), b.GetEndAtomIdx()] for b in pose.GetBonds()]}


def plan(targets, per_target):
    """Per target, the ligands to dock in order (a fixed draw, capped), without those done."""
    rng = np.random.default_rng(0)
    todo = {}
    for target in targets:
        rows = [r for r in ligands(TARGETS[target]) if acceptable(r[0])]
        rows = [rows[i] for i in rng.permutation(len(rows))[:per_target]]
        path = OUT / f"{target}.jsonl"
        done = set()
        if path.exists():
            done = {json.loads(line)["smiles"] for line in path.read_text().splitlines() if line}
        todo[target] = [r for r in rows if r[0] not in done]
    return todo


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--targets", nargs="*", default=list(TARGETS))
    parser.add_argument("--per-target", type=int, default=PER_TARGET)
    args = parser.parse_args()
    from vina import Vina

    OUT.mkdir(exist_ok=True)
    todo = plan(args.targets, args.per_target)
    engines = {}
    for target in args.targets:
        receptor, center, size = receptor_files(target)
        write_pocket(target, receptor, center, size)
        if todo[target]:
            engines[target] = Vina(sf_name="vina", cpu=1, seed=0, verbosity=0)
            engines[target].set_receptor(str(receptor))
            engines[target].compute_vina_maps(center=center, box_size=size)
    for i in range(max((len(rows) for rows in todo.values()), default=0)):
        for target, rows in todo.items():
            if i >= len(rows):
                continue
            smiles, y, split = rows[i]
            docked = dock(engines[target], smiles)
            if docked is None:
                continue
            with open(OUT / f"{target}.jsonl", "a") as f:
                f.write(json.dumps(record(smiles, y, split, *docked)) + "\n")
                f.flush()
                os.fsync(f.fileno())
        print(f"round {i + 1}: {sum(min(i + 1, len(r)) for r in todo.values())} ligands",
              flush=True)


if __name__ == "__main__":
    main()
