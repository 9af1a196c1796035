"""RDKit molecules as the molecule Dataset that :class:`MoleculeAdapter` reads.

The layout (M molecules padded to the largest, A atoms):

* ``atomic_number`` (molecule, atom) int64, 0 = padding;
* ``positions`` (molecule, atom, xyz) float64 in Angstrom, xyz = ["x", "y", "z"], NaN on padding;
* per-molecule properties (``properties=``) as (molecule,) float64 variables, NaN where a
  molecule has none (a masked target);
* per-atom features (``atom_features=``), float64 with NaN on padding, for the adapter to use
  as token features: ``formal_charge`` (molecule, atom); ``aromatic`` (molecule, atom), 1 or 0;
  ``hydrogens`` (molecule, atom), the number of hydrogens bonded to the atom (explicit and
  implicit); ``degree`` (molecule, atom), the number of atoms bonded to it, hydrogens included;
  ``ring`` (molecule, atom), 1 for an atom in a ring, else 0; ``hybridization`` (molecule,
  atom), the index of the atom's hybridisation in :data:`HYBRIDIZATIONS` (0 s, 1 sp, 2 sp2,
  3 sp3, ...: the order of the number of hybrid orbitals; the CF attributes ``flag_values``
  and ``flag_meanings`` name them). Every feature is one number per atom, so each is one
  token feature.

Coordinates: ``molecule`` is each molecule's index in the input (so dropped molecules leave
gaps), ``smiles`` (molecule) its SMILES (as given to :func:`from_smiles`, RDKit's canonical
SMILES of the input molecule for :func:`from_rdkit` and the file readers of
:mod:`seqattn.readers.molecule_files`), ``conformer`` (molecule) ``"given"`` or
``"embedded"``. Molecules are not periodic: there is no ``cell`` or ``pbc``.

Conformers: a molecule's own 3-D conformer is used as it is; a molecule without one is embedded
with RDKit's ETKDG (version 3), seeded, so the same call gives the same positions, and each
molecule's conformer depends on the seed only (not on the other molecules). Embedding always
runs with hydrogens, which ETKDG needs for sensible geometry; without ``add_hydrogens`` they are
removed afterwards and the other atoms keep their embedded positions. RDKit is optional:
``pip install rdkit`` (or ``seqattn[molecules]``).
"""
import warnings

import numpy as np
import xarray as xr

HYBRIDIZATIONS = ("s", "sp", "sp2", "sp3", "sp3d", "sp3d2", "other")
ATOM_FEATURES = ("formal_charge", "aromatic", "hydrogens", "degree", "ring", "hybridization")
CONFORMER_MODES = ("auto", "embed", "given")
ON_FAILURE = ("raise", "drop")
FEATURE_ATTRS = {"hybridization": {"flag_values": list(range(len(HYBRIDIZATIONS))),
                                   "flag_meanings": " ".join(HYBRIDIZATIONS)}}


def _rdkit():
    try:
        from rdkit import Chem
        from rdkit.Chem import AllChem
    except ImportError:
        raise ImportError("reading RDKit molecules needs RDKit: pip install rdkit (or "
                          "seqattn[molecules])") from None
    return Chem, AllChem


class _Failure(Exception):
    """Why one molecule cannot become an entry of the Dataset (raised or dropped)."""


def from_rdkit(mols, *, properties=(), conformers="auto", seed=0, add_hydrogens=False,
               atom_features=(), on_failure="raise"):
    """The molecule Dataset (module docstring) of RDKit molecules.

    Parameters
    ----------
    mols : iterable of rdkit.Chem.Mol
        A list, an ``SDMolSupplier``; None entries (what RDKit gives for unreadable records)
        are failures. The molecules are not modified.
    properties : sequence of str, or mapping of str to array_like, default ()
        Names of RDKit molecule properties (SDF fields) read as numbers, one (molecule,)
        variable each, NaN where a molecule lacks it; or a mapping name -> per-molecule values
        (one per input molecule, in their order).
    conformers : {"auto", "embed", "given"}, default "auto"
        ``"auto"`` a molecule's 3-D conformer (its default one) when it has one, else an ETKDG
        embedding (a 2-D conformer counts as none); ``"embed"`` embed every molecule;
        ``"given"`` every molecule must have a 3-D conformer.
    seed : int, default 0
        The ETKDG random seed (a non-negative integer).
    add_hydrogens : bool, default False
        Add the implicit hydrogens as atoms (placed on the given conformer, or embedded with
        the rest).
    atom_features : sequence of str, default ()
        Names from :data:`ATOM_FEATURES`, one (molecule, atom) variable each (module
        docstring).
    on_failure : {"raise", "drop"}, default "raise"
        ``"raise"`` a molecule that cannot be used (unreadable, a dummy atom whose atomic
        number 0 would read as padding, non-finite coordinates, an embedding that fails or a
        missing conformer with ``conformers="given"``) is an error naming its index and
        SMILES; ``"drop"`` it is left out with a warning that names it.

    Returns
    -------
    xarray.Dataset
        The molecule Dataset (module docstring).
    """
    Chem, _ = _rdkit()
    mols = list(mols)
    labels = [None if mol is None else Chem.MolToSmiles(mol) for mol in mols]
    return _molecules_dataset(mols, labels, properties, conformers, seed, add_hydrogens,
                              atom_features, on_failure)


def from_smiles(smiles, *, properties=(), seed=0, add_hydrogens=False, atom_features=(),
                on_failure="raise"):
    """The molecule Dataset of SMILES strings, with ETKDG conformers; the options are those of
    :func:`from_rdkit` (``properties`` here a mapping name -> per-molecule values). A SMILES
    that RDKit cannot parse is a failure, raised or dropped by ``on_failure``.

    Parameters
    ----------
    smiles : sequence of str
        The molecules' SMILES (a single string is refused: pass a list).
    properties : mapping of str to array_like, default ()
        name -> per-molecule values, one per SMILES in their order; one (molecule,) variable
        each.
    seed : int, default 0
        The ETKDG random seed (a non-negative integer).
    add_hydrogens : bool, default False
        Add the implicit hydrogens as atoms, embedded with the rest.
    atom_features : sequence of str, default ()
        Names from :data:`ATOM_FEATURES`, one (molecule, atom) variable each.
    on_failure : {"raise", "drop"}, default "raise"
        What a molecule that cannot be used does: an error naming it, or it is left out with a
        warning (as in :func:`from_rdkit`).

    Returns
    -------
    xarray.Dataset
        The molecule Dataset (module docstring).
    """
    Chem, _ = _rdkit()
    if isinstance(smiles, str):
        raise TypeError(f"smiles must be a sequence of SMILES strings, got the single string "
                        f"{smiles!r}; pass [{smiles!r}]")
    smiles = [str(s) for s in smiles]
    mols = [Chem.MolFromSmiles(s) for s in smiles]
    return _molecules_dataset(mols, smiles, properties, "embed", seed, add_hydrogens,
                              atom_features, on_failure)


def _molecules_dataset(mols, labels, properties, conformers, seed, add_hydrogens, atom_features,
                       on_failure):
    """The Dataset of `mols` (None = unreadable), `labels` their SMILES for messages and the
    ``smiles`` coordinate."""
    Chem, AllChem = _rdkit()
    _check_options(conformers, seed, atom_features, on_failure)
    property_values = _property_values(properties, mols, labels)
    kept, failures = [], []
    for index, (mol, label) in enumerate(zip(mols, labels)):
        try:
            kept.append((index, *_prepared(Chem, AllChem, mol, conformers, seed, add_hydrogens)))
        except _Failure as failure:
            if on_failure == "raise":
                raise ValueError(f"molecule {index} (SMILES {label!r}): {failure}; pass "
                                 "on_failure='drop' to leave such molecules out") from None
            failures.append(f"molecule {index} (SMILES {label!r}): {failure}")
    if not kept:
        raise ValueError(f"none of the {len(mols)} molecules could be used"
                         + (f" ({failures[0]})" if failures else ""))
    if failures:
        shown = "; ".join(failures[:5]) + ("; ..." if len(failures) > 5 else "")
        warnings.warn(f"from_rdkit dropped {len(failures)} of {len(mols)} molecules: {shown}",
                      stacklevel=3)
    return _assemble(kept, labels, property_values, atom_features)


def _check_options(conformers, seed, atom_features, on_failure):
    if conformers not in CONFORMER_MODES:
        raise ValueError(f"conformers={conformers!r}; expected one of {CONFORMER_MODES}")
    if on_failure not in ON_FAILURE:
        raise ValueError(f"on_failure={on_failure!r}; expected one of {ON_FAILURE}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer (ETKDG's random seed), got "
                         f"{seed!r}")
    if isinstance(atom_features, str):
        raise TypeError(f"atom_features must be a sequence of names, got the string "
                        f"{atom_features!r}; pass [{atom_features!r}]")
    unknown = [name for name in atom_features if name not in ATOM_FEATURES]
    if unknown:
        raise ValueError(f"unknown atom_features {unknown}; expected names from {ATOM_FEATURES}")


def _property_values(properties, mols, labels):
    """name -> (len(mols),) float64: from a mapping, or read from each molecule's properties."""
    if isinstance(properties, str):
        raise TypeError(f"properties must be a sequence of names or a mapping, got the string "
                        f"{properties!r}; pass [{properties!r}]")
    reserved = {"atomic_number", "positions", *ATOM_FEATURES}
    clashes = [name for name in properties if name in reserved]
    if clashes:
        raise ValueError(f"properties {clashes} would overwrite the Dataset's own variables "
                         f"{sorted(reserved)}; rename them")
    if hasattr(properties, "items"):
        values = {}
        for name, given in properties.items():
            try:
                array = np.asarray(given, dtype=np.float64)
            except (TypeError, ValueError):
                raise ValueError(f"properties[{name!r}] must be numbers, one per molecule") \
                    from None
            if array.shape != (len(mols),):
                raise ValueError(f"properties[{name!r}] has shape {array.shape}; expected one "
                                 f"value per molecule, ({len(mols)},)")
            values[name] = array
        return values
    return {name: np.array([_read_property(mol, name, index, label)
                            for index, (mol, label) in enumerate(zip(mols, labels))])
            for name in properties}


def _read_property(mol, name, index, label):
    if mol is None or not mol.HasProp(name):
        return np.nan
    text = mol.GetProp(name)
    try:
        return float(text)
    except ValueError:
        raise ValueError(f"molecule {index} (SMILES {label!r}): property {name!r} is "
                         f"{text!r}, not a number") from None


def _prepared(Chem, AllChem, mol, conformers, seed, add_hydrogens):
    """(the molecule whose atoms become tokens, their (A, 3) positions, conformer source);
    raises _Failure. Works on copies: RDKit's embedding changes a molecule in place."""
    if mol is None:
        raise _Failure("RDKit could not read it")
    dummies = [atom.GetIdx() for atom in mol.GetAtoms() if atom.GetAtomicNum() == 0]
    if dummies:
        raise _Failure(f"atom {dummies[0]} is a dummy atom (atomic number 0, which marks "
                       "padding in the molecule Dataset)")
    has_3d = mol.GetNumConformers() > 0 and mol.GetConformer().Is3D()
    if conformers == "given" and not has_3d:
        raise _Failure("it has no 3-D conformer (conformers='given'); pass conformers='auto' "
                       "to embed one")
    if has_3d and conformers != "embed":
        work = Chem.AddHs(mol, addCoords=True) if add_hydrogens else Chem.Mol(mol)
        positions, source = work.GetConformer().GetPositions(), "given"
    else:
        with_hydrogens = _embedded(Chem, AllChem, mol, seed)
        work = with_hydrogens if add_hydrogens else mol
        # AddHs appends the hydrogens after the molecule's own atoms, whose indices it keeps
        positions = with_hydrogens.GetConformer().GetPositions()[:work.GetNumAtoms()]
        source = "embedded"
    bad = np.flatnonzero(~np.isfinite(positions).all(axis=1))
    if bad.size:
        raise _Failure(f"atom {bad[0]} has non-finite coordinates {positions[bad[0]].tolist()}")
    return work, positions, source


def _embedded(Chem, AllChem, mol, seed):
    """A copy of `mol` with hydrogens and one ETKDG conformer; from random starting coordinates
    when the default start fails (RDKit's advice for large or strained molecules)."""
    with_hydrogens = Chem.AddHs(mol)
    for random_start in (False, True):
        params = AllChem.ETKDGv3()
        params.randomSeed = int(seed)
        params.useRandomCoords = random_start
        if AllChem.EmbedMolecule(with_hydrogens, params) >= 0:
            return with_hydrogens
    raise _Failure(f"ETKDG found no 3-D conformer (seed {seed}, also from random coordinates)")


def _atom_feature(name, atom):
    if name == "formal_charge":
        return atom.GetFormalCharge()
    if name == "aromatic":
        return float(atom.GetIsAromatic())
    if name == "hydrogens":
        return atom.GetTotalNumHs(includeNeighbors=True)
    if name == "degree":
        return atom.GetTotalDegree()
    if name == "ring":
        return float(atom.IsInRing())
    kind = str(atom.GetHybridization()).lower()
    return HYBRIDIZATIONS.index(kind if kind in HYBRIDIZATIONS else "other")


def _assemble(kept, labels, property_values, atom_features):
    """The Dataset of ``kept`` = [(input index, molecule, positions, source), ...]."""
    size = max(mol.GetNumAtoms() for _, mol, _, _ in kept)
    count = len(kept)
    atomic_number = np.zeros((count, size), dtype=np.int64)
    positions = np.full((count, size, 3), np.nan)
    features = {name: np.full((count, size), np.nan) for name in atom_features}
    for row, (_, mol, xyz, _) in enumerate(kept):
        atoms = list(mol.GetAtoms())
        atomic_number[row, :len(atoms)] = [atom.GetAtomicNum() for atom in atoms]
        positions[row, :len(atoms)] = xyz
        for name, values in features.items():
            values[row, :len(atoms)] = [_atom_feature(name, atom) for atom in atoms]
    index = np.array([i for i, _, _, _ in kept], dtype=np.int64)
    variables = {
        "atomic_number": (("molecule", "atom"), atomic_number),
        "positions": (("molecule", "atom", "xyz"), positions, {"units": "Angstrom"}),
    }
    for name, values in features.items():
        variables[name] = (("molecule", "atom"), values, FEATURE_ATTRS.get(name, {}))
    for name, values in property_values.items():
        variables[name] = ("molecule", values[index])
    coords = {"molecule": index, "xyz": ["x", "y", "z"],
              "smiles": ("molecule", [labels[i] for i in index]),
              "conformer": ("molecule", [source for _, _, _, source in kept])}
    return xr.Dataset(variables, coords=coords)
