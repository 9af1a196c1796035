"""ASE structures (``ase.Atoms``, and every file format ``ase.io`` reads: XYZ, extxyz, CIF,
POSCAR, ...) as the structures Dataset that :class:`seqattn.adapters.MoleculeAdapter` reads
(its layout is described in :mod:`seqattn.adapters.molecule_layout`). ASE is optional:
``pip install ase``."""
import numpy as np
import xarray as xr

XYZ = ["x", "y", "z"]


def _ase():
    try:
        import ase
        import ase.io
    except ImportError:
        raise ImportError("reading ASE structures needs ASE: pip install ase") from None
    return ase


def _calculated(atoms, getter):
    """``getter(atoms)`` or None when the structure has no calculator or it lacks the value."""
    if atoms.calc is None:
        return None
    try:
        return np.asarray(getter(atoms))
    except Exception:  # ASE raises PropertyNotImplementedError, RuntimeError... when absent
        return None


def from_ase(structures, energy="energy", forces="forces"):
    """The structures Dataset of ASE ``Atoms``.

    Parameters
    ----------
    structures : ase.Atoms or an iterable of them
        The structures; they are not modified.
    energy, forces : str or None
        Names of the variables that take each structure's potential energy (molecule,) in eV
        and forces (molecule, atom, xyz) in eV/Angstrom from its calculator, NaN for a
        structure without them; None leaves the variable out (it is left out as well when no
        structure has the value).

    Returns
    -------
    xarray.Dataset
        ``atomic_number`` (molecule, atom) (0 on padding), ``positions`` (molecule, atom, xyz)
        in Angstrom, and when a structure is periodic ``cell`` (molecule, cell_vector, xyz)
        and ``pbc`` (molecule, xyz); coordinates ``molecule`` (the input order), ``atom``,
        ``xyz``.
    """
    ase = _ase()
    if isinstance(structures, ase.Atoms):
        structures = [structures]
    structures = list(structures)
    if not structures:
        raise ValueError("structures is empty; expected at least one ase.Atoms")
    for i, atoms in enumerate(structures):
        if not isinstance(atoms, ase.Atoms):
            raise TypeError(f"structure {i} is a {type(atoms).__name__}; expected ase.Atoms")
        if len(atoms) == 0:
            raise ValueError(f"structure {i} has no atoms")
    M, A = len(structures), max(len(a) for a in structures)
    z = np.zeros((M, A), np.int64)
    positions = np.full((M, A, 3), np.nan)
    cell = np.zeros((M, 3, 3))
    pbc = np.zeros((M, 3), bool)
    energies = np.full(M, np.nan)
    force_values = np.full((M, A, 3), np.nan)
    for i, atoms in enumerate(structures):
        n = len(atoms)
        z[i, :n] = atoms.numbers
        positions[i, :n] = atoms.positions
        cell[i], pbc[i] = np.asarray(atoms.cell), atoms.pbc
        e = _calculated(atoms, lambda a: a.get_potential_energy())
        energies[i] = np.nan if e is None else float(e)
        f = _calculated(atoms, lambda a: a.get_forces())
        if f is not None:
            force_values[i, :n] = f
    data = {"atomic_number": (("molecule", "atom"), z),
            "positions": (("molecule", "atom", "xyz"), positions, {"units": "Angstrom"})}
    if pbc.any():
        data["cell"] = (("molecule", "cell_vector", "xyz"), cell, {"units": "Angstrom"})
        data["pbc"] = (("molecule", "xyz"), pbc)
    if energy is not None and np.isfinite(energies).any():
        data[energy] = (("molecule",), energies, {"units": "eV"})
    if forces is not None and np.isfinite(force_values).any():
        data[forces] = (("molecule", "atom", "xyz"), force_values, {"units": "eV/Angstrom"})
    return xr.Dataset(data, coords={"molecule": np.arange(M), "atom": np.arange(A), "xyz": XYZ})


def read_structures(path, index=":", format=None, energy="energy", forces="forces"):
    """The structures Dataset of a file that ``ase.io.read`` reads: ``from_ase(ase.io.read(path,
    index, format))``.

    Parameters
    ----------
    path : str or os.PathLike
        The file (an extended XYZ, a trajectory, any format ASE reads).
    index : str or int, default ":"
        The frames, as ASE selects them (``":"`` every frame, ``"-1"`` the last).
    format : str or None, default None
        ASE's name of the format; None: from the file's name.
    energy, forces : str or None, default "energy", "forces"
        Names of the variables that take each structure's energy and forces from its
        calculator, as in :func:`from_ase`; None leaves the variable out.

    Returns
    -------
    xarray.Dataset
        The structures Dataset, as :func:`from_ase` returns it.
    """
    ase = _ase()
    return from_ase(ase.io.read(path, index=index, format=format), energy=energy, forces=forces)
