"""The structures Dataset that :class:`~seqattn.adapters.MoleculeAdapter` reads, checked and
gathered into host arrays (real atoms first), and the cells the distance kernels see.

* dims ``molecule`` and ``atom`` (structures of different sizes share the ``atom`` dim; the
  rest of a row is padding, anywhere in the row);
* ``atomic_number`` (molecule, atom) integers, 0 = no atom (padding);
* ``positions`` (molecule, atom, xyz) float in Angstrom with coordinate ``xyz = ["x", "y",
  "z"]``; anything (NaN) on padding;
* optionally ``cell`` (molecule, cell_vector, xyz), the lattice vectors as rows, and ``pbc``
  (molecule, xyz) bool, which axes are periodic (all of them when ``cell`` comes without it).

The readers of :mod:`seqattn.readers` (``from_ase``, ``from_rdkit``, ``from_smiles``,
``read_sdf``, ``read_smiles``, ``read_structures``) build it.
"""
from dataclasses import dataclass

import numpy as np
import xarray as xr

ELEMENTS = (
    "H He Li Be B C N O F Ne Na Mg Al Si P S Cl Ar K Ca Sc Ti V Cr Mn Fe Co Ni Cu Zn Ga Ge As "
    "Se Br Kr Rb Sr Y Zr Nb Mo Tc Ru Rh Pd Ag Cd In Sn Sb Te I Xe Cs Ba La Ce Pr Nd Pm Sm Eu Gd "
    "Tb Dy Ho Er Tm Yb Lu Hf Ta W Re Os Ir Pt Au Hg Tl Pb Bi Po At Rn Fr Ra Ac Th Pa U Np Pu Am "
    "Cm Bk Cf Es Fm Md No Lr Rf Db Sg Bh Hs Mt Ds Rg Cn Nh Fl Mc Lv Ts Og").split()
MAX_Z = len(ELEMENTS)
XYZ = ["x", "y", "z"]
MOLECULE, ATOM = "molecule", "atom"
VACUUM = 100.0  # Angstrom added to a non-periodic axis's stand-in lattice vector
OVERLAP = 1e-6  # Angstrom: atoms closer than this are the same place twice


def element_symbol(z):
    return ELEMENTS[z - 1] if 1 <= z <= MAX_Z else f"Z={z}"


def molecule_labels(ds):
    """The labels of ``ds``'s molecule coordinate, or None where it has none."""
    return ds[MOLECULE].values if MOLECULE in ds.coords else None


def molecule_label(labels, i):
    """How error messages name molecule ``i``: its label (``labels``: those of
    :func:`molecule_labels`), or its index where there are none."""
    if labels is not None:
        label = labels[i]
        return f"molecule {label.item() if hasattr(label, 'item') else label!r}"
    return f"molecule {i}"


def check_structures(ds):
    """Raise a clear error when ``ds`` does not hold structures in this module's layout."""
    if not isinstance(ds, xr.Dataset):
        raise TypeError(f"expected an xarray.Dataset of structures (see "
                        f"seqattn.adapters.molecule_layout), got {type(ds).__name__}")
    for name, dims in (("atomic_number", (MOLECULE, ATOM)), ("positions", (MOLECULE, ATOM, "xyz"))):
        if name not in ds.data_vars:
            raise ValueError(f"the dataset has no variable {name!r} (it has "
                             f"{sorted(map(str, ds.data_vars))}); structures need atomic_number "
                             "(molecule, atom) and positions (molecule, atom, xyz)")
        if set(ds[name].dims) != set(dims):
            raise ValueError(f"variable {name!r} has dims {ds[name].dims}; expected {dims}")
    if not np.issubdtype(ds["atomic_number"].dtype, np.integer):
        raise TypeError(f"atomic_number has dtype {ds['atomic_number'].dtype}; expected integers "
                        "(0 = no atom)")
    if ds.sizes["xyz"] != 3:
        raise ValueError(f"the xyz dim has {ds.sizes['xyz']} entries; expected 3 (x, y, z)")
    if "xyz" in ds.coords and list(ds["xyz"].values) != XYZ:
        raise ValueError(f"coordinate xyz is {list(ds['xyz'].values)}; expected {XYZ}")
    z = ds["atomic_number"].values
    if z.size and (z.min() < 0 or z.max() > MAX_Z):
        m, a = np.argwhere((z < 0) | (z > MAX_Z))[0]
        raise ValueError(f"{molecule_label(molecule_labels(ds), m)}, atom {a}: atomic_number "
                         f"{z[m, a]} is out of range; expected 1 .. {MAX_Z}, or 0 for no atom")
    empty = ~(z > 0).any(axis=1)
    if empty.any():
        raise ValueError(f"{molecule_label(molecule_labels(ds), int(np.argmax(empty)))} has no "
                         "atoms (every atomic_number is 0); drop it")
    if "cell" in ds.data_vars:
        if set(ds["cell"].dims) != {MOLECULE, "cell_vector", "xyz"} or \
                ds.sizes["cell_vector"] != 3:
            raise ValueError(f"variable 'cell' has dims {ds['cell'].dims} and sizes "
                             f"{ds['cell'].shape}; expected (molecule, cell_vector, xyz) with 3 "
                             "lattice vectors as rows")
    if "pbc" in ds.data_vars:
        if set(ds["pbc"].dims) != {MOLECULE, "xyz"} or ds["pbc"].dtype != bool:
            raise ValueError(f"variable 'pbc' has dims {ds['pbc'].dims} and dtype "
                             f"{ds['pbc'].dtype}; expected bool (molecule, xyz)")
        if "cell" not in ds.data_vars and ds["pbc"].values.any():
            raise ValueError("pbc says some structures are periodic, but the dataset has no "
                             "'cell' (molecule, cell_vector, xyz) lattice vectors")


@dataclass
class HostArrays:
    """A checked structures Dataset's arrays on the host, molecule first, for cutting batches
    without xarray: ``atomic_number`` (M, A), ``positions`` (M, A, 3), ``cell`` (M, 3, 3) and
    ``pbc`` (M, 3) or None, ``labels`` (M,) the molecule coordinate or None (error messages
    name molecules by it), ``variables`` name -> (M, ...) other variables (atom dim second)."""

    atomic_number: np.ndarray
    positions: np.ndarray
    cell: np.ndarray
    pbc: np.ndarray
    labels: np.ndarray
    variables: dict

    @classmethod
    def of(cls, ds, variables=()):
        """The arrays of ``ds`` and of its ``variables``."""
        cell = pbc = None
        if "cell" in ds.data_vars:
            cell = ds["cell"].transpose(MOLECULE, "cell_vector", "xyz").values
            pbc = (ds["pbc"].transpose(MOLECULE, "xyz").values if "pbc" in ds.data_vars
                   else np.ones((ds.sizes[MOLECULE], 3), bool))
        return cls(ds["atomic_number"].transpose(MOLECULE, ATOM).values,
                   ds["positions"].transpose(MOLECULE, ATOM, "xyz").values, cell, pbc,
                   molecule_labels(ds),
                   {name: _molecule_first(ds[name]).values for name in variables})

    def rows(self, rows):
        """The molecules ``rows`` (indices), as HostArrays."""
        def cut(values):
            return None if values is None else values[rows]
        return HostArrays(cut(self.atomic_number), cut(self.positions), cut(self.cell),
                          cut(self.pbc), cut(self.labels),
                          {name: values[rows] for name, values in self.variables.items()})


def _molecule_first(da):
    """``da`` with dims molecule, atom (where it has one), then the rest in their order."""
    return da.transpose(MOLECULE, ATOM, ...) if ATOM in da.dims else da.transpose(MOLECULE, ...)


@dataclass
class Structures:
    """Host arrays of some structures, real atoms first: z (B, N), order (B, N) the atoms'
    indices along the Dataset's atom dim, pad (B, N), positions (B, N, 3) (0 on padding), cell
    (B, 3, 3) and pbc (B, 3) or None, labels (B,) the molecule labels or None."""

    z: np.ndarray
    order: np.ndarray
    pad: np.ndarray
    positions: np.ndarray
    cell: np.ndarray
    pbc: np.ndarray
    labels: np.ndarray = None


def per_atom(values, order):
    """values (B, A, ...) gathered at the atom indices ``order`` (B, N)."""
    index = order.reshape(order.shape + (1,) * (values.ndim - 2))
    return np.take_along_axis(values, index, axis=1)


def gather(ds):
    """The structures of ``ds`` (already checked by :func:`check_structures`), real atoms first
    and trimmed to the largest; NaN positions of a real atom are an error."""
    return gather_host(HostArrays.of(ds))


def gather_host(host):
    """:func:`gather` of the molecules of ``host`` (:class:`HostArrays`)."""
    z_all = host.atomic_number
    real = z_all > 0
    n = real.sum(axis=1)
    order = np.argsort(~real, axis=1, kind="stable")[:, :n.max()]
    pad = np.arange(order.shape[1])[None, :] >= n[:, None]
    z = np.where(pad, 0, np.take_along_axis(z_all, order, axis=1))
    positions = per_atom(host.positions, order)
    missing = ~np.isfinite(positions).all(axis=-1) & ~pad
    if missing.any():
        b, i = np.argwhere(missing)[0]
        raise ValueError(f"{molecule_label(host.labels, b)}, atom {order[b, i]} "
                         f"({element_symbol(z[b, i])}) has no position (NaN or inf); give "
                         "every atom a position, or drop the structure")
    positions = np.where(pad[..., None], 0.0, positions).astype(np.float64)
    cell = None if host.cell is None else host.cell.astype(np.float64)
    return Structures(z, order, pad, positions, cell, host.pbc, host.labels)


def check_cells(s):
    for b in np.flatnonzero(s.pbc.any(axis=1)):
        vectors = s.cell[b][s.pbc[b]]
        ok = np.isfinite(vectors).all()
        if ok:  # the periodic lattice vectors must span as many dimensions as they are
            ok = np.linalg.matrix_rank(vectors, tol=1e-8 * max(1.0, np.abs(vectors).max())) \
                == len(vectors)
        if not ok:
            raise ValueError(f"{molecule_label(s.labels, b)} is periodic along "
                             f"{[a for a, p in zip(XYZ, s.pbc[b]) if p]} but its cell "
                             f"{s.cell[b].tolist()} is singular or not finite there; give "
                             "independent lattice vectors as rows")


def check_overlaps(s):
    """Two atoms at one place (zero distance, in periodic cells up to a lattice vector)."""
    r = s.positions[:, :, None, :] - s.positions[:, None, :, :]  # (B, N, N, 3)
    if s.cell is not None:
        periodic = s.pbc.any(axis=1)
        if periodic.any():
            cells = np.where(periodic[:, None, None], s.cell, np.eye(3))
            inverse = np.linalg.inv(cells)
            frac = np.einsum("bijk,bkl->bijl", r, inverse)
            frac = frac - np.where(s.pbc[:, None, None, :] & periodic[:, None, None, None],
                                   np.round(frac), 0.0)
            r = np.einsum("bijl,blk->bijk", frac, cells)
    distance = np.linalg.norm(r, axis=-1)
    pair = ~s.pad[:, :, None] & ~s.pad[:, None, :]
    pair &= np.triu(np.ones(distance.shape[1:], bool), 1)[None]
    close = pair & (distance < OVERLAP)
    if close.any():
        b, i, j = np.argwhere(close)[0]
        raise ValueError(f"{molecule_label(s.labels, b)}: atoms {s.order[b, i]} and "
                         f"{s.order[b, j]} ({element_symbol(s.z[b, i])}, "
                         f"{element_symbol(s.z[b, j])}) are at the same place (distance "
                         f"{distance[b, i, j]:.2g} A); remove the duplicate")


def _unit(v):
    return v / np.linalg.norm(v)


def batch_cell(s):
    """(B, 3, 3) cells for the kernels, or None when no structure is periodic: non-periodic
    axes get long perpendicular stand-in vectors (see the module docstring)."""
    if s.cell is None or not s.pbc.any():
        return None
    cells = np.empty((len(s.z), 3, 3))
    for b in range(len(s.z)):
        real = s.positions[b][~s.pad[b]]
        length = 2 * float(np.ptp(real, axis=0).max(initial=0.0)) + VACUUM
        periodic = [s.cell[b, k] for k in range(3) if s.pbc[b, k]]
        if len(periodic) == 0:
            stand_ins = list(np.eye(3))
        elif len(periodic) == 1:
            a = _unit(periodic[0])
            helper = np.eye(3)[np.argmin(np.abs(a))]
            u = _unit(np.cross(a, helper))
            stand_ins = [u, np.cross(a, u)]
        elif len(periodic) == 2:
            stand_ins = [_unit(np.cross(*periodic))]
        else:
            stand_ins = []
        stand_ins = iter(stand_ins)
        for k in range(3):
            cells[b, k] = s.cell[b, k] if s.pbc[b, k] else length * next(stand_ins)
    return cells
