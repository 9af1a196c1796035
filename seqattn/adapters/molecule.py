"""MoleculeAdapter: molecules and periodic structures as sets of atom tokens, and per-structure
and per-atom predictions (energies, forces, charges, any property) back on the Dataset.

**Structures as a Dataset** (what :func:`from_ase` builds, and RDKit readers too):

* dims ``molecule`` and ``atom`` (structures of different sizes share the ``atom`` dim; the
  rest of a row is padding);
* ``atomic_number`` (molecule, atom) integers, 0 = no atom (padding);
* ``positions`` (molecule, atom, xyz) float in Angstrom with coordinate ``xyz = ["x", "y",
  "z"]``; NaN (or anything) on padding;
* optionally ``cell`` (molecule, cell_vector, xyz), the lattice vectors as rows, and ``pbc``
  (molecule, xyz) bool, which axes are periodic (all of them when ``cell`` comes without it);
* targets: a variable with dims (molecule, ...) is per structure (``energy`` (molecule)), one
  with dims (molecule, atom, ...) per atom (``forces`` (molecule, atom, xyz), charges); NaN
  marks a missing target, which counts for nothing in the loss.

**Batches** (:meth:`MoleculeAdapter.batches`, :meth:`MoleculeAdapter.encode`): B structures,
each trimmed to the largest of the batch (N atoms), real atoms first in their Dataset order:

* ``tokens`` (B, N, F): a one-hot row of the atom's element (T = ``num_types`` columns, in the
  order of ``elements``), then the ``atom_features`` variables, normalized; 0 on padding;
* ``key_padding_mask`` (B, N) True on padding; ``coords["atom"]`` (B, N) the atom's index along
  the Dataset's ``atom`` dim (NaN on padding); ``placement.starts[:, 0]`` the molecule index;
* ``structure``: a :class:`seqattn.nn.Structure` with ``positions`` (B, N, 3) (0 on padding),
  ``types`` (B, N) int32 (the element's index in ``elements``; 0 on padding) and, when a
  structure of the batch is periodic, ``cell`` (B, 3, 3). A non-periodic axis (or a whole
  cluster in a batch with periodic structures) gets a lattice vector perpendicular to the
  others, longer than twice the structure's extent plus ``VACUUM``, so its minimum image is
  the direct displacement;
* ``targets`` (None when the Dataset has none): a dict of normalized host arrays, NaN where
  missing: ``"structure"`` (B, S) the per-structure targets (``energy`` first, then the others,
  each flattened over its extra dims), ``"atoms"`` (B, N, A) the per-atom ones (not forces),
  ``"forces"`` (B, N, 3).

**Normalization** (computed by :meth:`MoleculeAdapter.fit` on training data). Per-structure
targets are extensive: ``(y - sum_i reference[element_i]) / scale``, the references fitted by
least squares on the structures' compositions; ``scale`` is the root mean square of the force
components when forces are given (forces are divided by the same scale, since F = -dE/dx), else
the standard deviation of the residual per atom. Per-atom targets use a :class:`Normalizer`.
Predictions are put back in physical units: :meth:`MoleculeAdapter.predict`.
"""
from dataclasses import dataclass

import numpy as np
import xarray as xr

from ..nn.structured_bias import Structure
from ..data.batch import Batch, Placement, Template
from ..data.batching import check_epoch
from ..data.normalize import Normalizer
from ..data.persistence import Persistable

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


def _molecule_label(ds, i):
    """How error messages name molecule ``i``: its coordinate label, or its index."""
    if MOLECULE in ds.coords:
        label = ds[MOLECULE].values[i]
        return f"molecule {label.item() if hasattr(label, 'item') else label!r}"
    return f"molecule {i}"


# ---- the Dataset layout ------------------------------------------------------------------------


def check_structures(ds):
    """Raise a clear error when ``ds`` does not hold structures in this module's layout."""
    if not isinstance(ds, xr.Dataset):
        raise TypeError(f"expected an xarray.Dataset of structures (see "
                        f"seqattn.adapters.molecule), got {type(ds).__name__}")
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
        raise ValueError(f"{_molecule_label(ds, m)}, atom {a}: atomic_number {z[m, a]} is out of "
                         f"range; expected 1 .. {MAX_Z}, or 0 for no atom")
    empty = ~(z > 0).any(axis=1)
    if empty.any():
        raise ValueError(f"{_molecule_label(ds, int(np.argmax(empty)))} has no atoms (every "
                         "atomic_number is 0); drop it")
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
class _Structures:
    """Host arrays of some structures, real atoms first: z (B, N), order (B, N) the atoms'
    indices along the Dataset's atom dim, pad (B, N), positions (B, N, 3) (0 on padding), cell
    (B, 3, 3) and pbc (B, 3) or None."""

    z: np.ndarray
    order: np.ndarray
    pad: np.ndarray
    positions: np.ndarray
    cell: np.ndarray
    pbc: np.ndarray


def _per_atom(values, order):
    """values (B, A, ...) gathered at the atom indices ``order`` (B, N)."""
    index = order.reshape(order.shape + (1,) * (values.ndim - 2))
    return np.take_along_axis(values, index, axis=1)


def _read(ds):
    """The structures of ``ds`` (already checked by :func:`check_structures`), real atoms first
    and trimmed to the largest; NaN positions of a real atom are an error."""
    z_all = ds["atomic_number"].transpose(MOLECULE, ATOM).values
    real = z_all > 0
    n = real.sum(axis=1)
    order = np.argsort(~real, axis=1, kind="stable")[:, :n.max()]
    pad = np.arange(order.shape[1])[None, :] >= n[:, None]
    z = np.where(pad, 0, np.take_along_axis(z_all, order, axis=1))
    positions = _per_atom(ds["positions"].transpose(MOLECULE, ATOM, "xyz").values, order)
    missing = ~np.isfinite(positions).all(axis=-1) & ~pad
    if missing.any():
        b, i = np.argwhere(missing)[0]
        raise ValueError(f"{_molecule_label(ds, b)}, atom {order[b, i]} "
                         f"({element_symbol(z[b, i])}) has no position (NaN or inf); give "
                         "every atom a position, or drop the structure")
    positions = np.where(pad[..., None], 0.0, positions).astype(np.float64)
    cell = pbc = None
    if "cell" in ds.data_vars:
        cell = ds["cell"].transpose(MOLECULE, "cell_vector", "xyz").values.astype(np.float64)
        pbc = (ds["pbc"].transpose(MOLECULE, "xyz").values if "pbc" in ds.data_vars
               else np.ones((len(z), 3), bool))
    return _Structures(z, order, pad, positions, cell, pbc)


def _check_cells(ds, s):
    for b in np.flatnonzero(s.pbc.any(axis=1)):
        vectors = s.cell[b][s.pbc[b]]
        ok = np.isfinite(vectors).all()
        if ok:  # the periodic lattice vectors must span as many dimensions as they are
            ok = np.linalg.matrix_rank(vectors, tol=1e-8 * max(1.0, np.abs(vectors).max())) \
                == len(vectors)
        if not ok:
            raise ValueError(f"{_molecule_label(ds, b)} is periodic along "
                             f"{[a for a, p in zip(XYZ, s.pbc[b]) if p]} but its cell "
                             f"{s.cell[b].tolist()} is singular or not finite there; give "
                             "independent lattice vectors as rows")


def _check_overlaps(ds, s):
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
        raise ValueError(f"{_molecule_label(ds, b)}: atoms {s.order[b, i]} and "
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


# ---- the adapter -------------------------------------------------------------------------------


class MoleculeAdapter(Persistable):
    """Structures Dataset <-> atom-token batches; see the module docstring.

    ``energy``: the name of the per-structure variable whose negative gradient the forces are
    (or any extensive per-structure target); ``forces``: the per-atom (molecule, atom, xyz)
    variable that is minus its gradient (needs ``energy``); ``targets``: other per-structure or
    per-atom variables. ``atom_features``: per-atom float variables appended to the one-hot
    element in the tokens. ``elements`` (atomic numbers) is set by :meth:`fit` (the elements of
    the training data) unless given; ``statistics`` and ``normalizer`` are fitted state.
    """

    def __init__(self, energy=None, forces=None, targets=(), atom_features=(), elements=None,
                 layout=None, statistics=None, dtype="float32", normalizer=None,
                 feature_widths=None):
        for name, value in (("targets", targets), ("atom_features", atom_features)):
            if isinstance(value, str):
                raise TypeError(f"{name} must be a list of variable names, e.g. [{value!r}], "
                                "not a string")
        if forces is not None and energy is None:
            raise ValueError(f"forces={forces!r} are minus the gradient of an energy: give "
                             "energy= too (the per-structure variable they derive from)")
        if normalizer is not None and not isinstance(normalizer, Normalizer):
            raise TypeError(f"normalizer must be a Normalizer, got {type(normalizer).__name__}")
        self.energy, self.forces = energy, forces
        self.targets = list(targets)
        self.atom_features = list(atom_features)
        names = [n for n in (energy, forces) if n is not None] + self.targets
        if len(set(names)) != len(names):
            raise ValueError(f"a target is named twice in energy, forces and targets: {names}")
        self.elements = None if elements is None else [int(z) for z in elements]
        if self.elements is not None:
            bad = [z for z in self.elements if not 1 <= z <= MAX_Z]
            if bad or len(set(self.elements)) != len(self.elements):
                raise ValueError(f"elements must be distinct atomic numbers 1 .. {MAX_Z}, got "
                                 f"{elements}")
        self.layout = layout  # name -> {"per_atom": bool, "dims": [...], "shape": [...]}
        self.statistics = statistics  # per-structure target -> {"reference", "scale"}
        self.dtype = np.dtype(dtype)
        self.normalizer = normalizer
        self.feature_widths = feature_widths  # atom feature -> token columns (its extra dims)

    def config(self):
        return {"energy": self.energy, "forces": self.forces, "targets": self.targets,
                "atom_features": self.atom_features, "elements": self.elements,
                "layout": self.layout, "statistics": self.statistics, "dtype": self.dtype.name,
                "feature_widths": self.feature_widths}

    # ---- what models are built with --------------------------------------------------------

    @property
    def variables(self):
        """Every target variable (energy and forces first)."""
        return [n for n in (self.energy, self.forces) if n is not None] + self.targets

    def _fitted(self):
        if self.elements is None or self.layout is None:
            raise RuntimeError("the MoleculeAdapter is not fitted: call adapter.fit(ds) on the "
                               "training structures first")

    @property
    def num_types(self):
        self._fitted()
        return len(self.elements)

    @property
    def in_features(self):
        self._fitted()
        return self.num_types + sum(self.feature_widths[n] for n in self.atom_features)

    @property
    def structure_targets(self):
        """Per-structure targets in the order of the model's structure outputs."""
        self._fitted()
        return [n for n in self.variables if not self.layout[n]["per_atom"]]

    @property
    def atom_targets(self):
        """Per-atom targets (forces apart) in the order of the model's atom outputs."""
        self._fitted()
        return [n for n in self.variables if self.layout[n]["per_atom"] and n != self.forces]

    def _width(self, name):
        return int(np.prod(self.layout[name]["shape"], dtype=np.int64))

    def model_sizes(self):
        """The sizes a molecule model's config needs: ``MoleculeModelConfig(
        **adapter.model_sizes(), ...)``."""
        return {"num_types": self.num_types, "in_features": self.in_features,
                "structure_outputs": sum(self._width(n) for n in self.structure_targets),
                "atom_outputs": sum(self._width(n) for n in self.atom_targets),
                "forces": self.forces is not None}

    # ---- fitting and checking ----------------------------------------------------------------

    def _check_variables(self, ds, names, role):
        for name in names:
            if name not in ds.data_vars:
                raise ValueError(f"{role} {name!r} is not in the dataset (it has "
                                 f"{sorted(map(str, ds.data_vars))})")
            dims = ds[name].dims
            if dims[:1] != (MOLECULE,):
                raise ValueError(f"{role} {name!r} has dims {dims}; expected (molecule, ...) per "
                                 "structure or (molecule, atom, ...) per atom")
            if not np.issubdtype(ds[name].dtype, np.number) or ds[name].dtype == bool:
                raise TypeError(f"{role} {name!r} has dtype {ds[name].dtype}; expected numbers")

    def _layout_of(self, ds):
        layout = {}
        for name in self.variables:
            da = ds[name]
            per_atom = ATOM in da.dims
            extra = [d for d in da.dims if d not in (MOLECULE, ATOM)]
            layout[name] = {"per_atom": per_atom, "dims": extra,
                            "shape": [int(ds.sizes[d]) for d in extra]}
        if self.energy is not None and (layout[self.energy]["per_atom"]
                                        or layout[self.energy]["dims"]):
            raise ValueError(f"energy {self.energy!r} has dims {ds[self.energy].dims}; expected "
                             "(molecule,): one number per structure")
        if self.forces is not None and (not layout[self.forces]["per_atom"]
                                        or layout[self.forces]["dims"] != ["xyz"]):
            raise ValueError(f"forces {self.forces!r} have dims {ds[self.forces].dims}; expected "
                             "(molecule, atom, xyz)")
        return layout

    def check(self, ds, targets=True):
        """Raise a clear error if ``ds`` cannot be encoded (``targets``: check the target
        variables too; prediction needs none)."""
        check_structures(ds)
        self._check_variables(ds, self.atom_features, "atom feature")
        for name, width in _feature_widths(ds, self.atom_features).items():
            if ATOM not in ds[name].dims:
                raise ValueError(f"atom feature {name!r} has dims {ds[name].dims}; expected "
                                 "(molecule, atom, ...)")
            if self.feature_widths is not None and width != self.feature_widths[name]:
                raise ValueError(f"atom feature {name!r} has {width} values per atom here but "
                                 f"{self.feature_widths[name]} in the data the adapter was "
                                 "fitted on")
        if targets:
            self._check_variables(ds, self.variables, "target")
            layout = self._layout_of(ds)
            if self.layout is not None and layout != self.layout:
                raise ValueError(f"the targets have the layout {layout} here but {self.layout} "
                                 "in the data the adapter was fitted on")

    def fit(self, ds):
        """Choose the element types (unless given) and the normalization statistics from the
        training structures ``ds``; returns self."""
        self.check(ds)
        z = ds["atomic_number"].values
        if self.elements is None:
            self.elements = sorted(int(e) for e in np.unique(z[z > 0]))
        self.layout = self._layout_of(ds)
        self.feature_widths = _feature_widths(ds, self.atom_features)
        s = _read(ds)
        self._check_elements(ds, s)
        counts = np.stack([(s.z == e).sum(axis=1) for e in self.elements], axis=1).astype(float)
        force_scale = None
        if self.forces is not None:
            f = _per_atom(ds[self.forces].transpose(MOLECULE, ATOM, "xyz").values, s.order)
            f = f[~s.pad]
            f = f[np.isfinite(f)]
            if f.size == 0:
                raise ValueError(f"forces {self.forces!r} are all NaN in the training data")
            force_scale = float(np.sqrt(np.mean(f ** 2))) or 1.0
        self.statistics = {name: self._extensive_statistics(ds[name], counts,
                                                            force_scale if name == self.energy
                                                            else None)
                           for name in self.structure_targets}
        per_atom = self.atom_targets + self.atom_features
        if per_atom:
            real = ds["atomic_number"] > 0
            self.normalizer = Normalizer.fit(xr.Dataset({n: ds[n].where(real) for n in per_atom}),
                                             per_atom)
        return self

    def _extensive_statistics(self, da, counts, scale):
        """Per-element references by least squares on the compositions, and a scale."""
        y = da.transpose(MOLECULE, ...).values.reshape(len(counts), -1).astype(float)
        reference = np.zeros((counts.shape[1], y.shape[1]))
        scales = np.ones(y.shape[1])
        atoms = counts.sum(axis=1)
        for k in range(y.shape[1]):
            known = np.isfinite(y[:, k])
            if not known.any():
                raise ValueError(f"target {da.name!r} is all NaN in the training data")
            reference[:, k] = np.linalg.lstsq(counts[known], y[known, k], rcond=None)[0]
            residual = (y[known, k] - counts[known] @ reference[:, k]) / atoms[known]
            scales[k] = scale if scale is not None else (float(np.std(residual)) or 1.0)
        shape = self.layout[da.name]["shape"]
        return {"reference": reference.reshape(len(counts[0]), *shape).tolist(),
                "scale": scales.reshape(shape).tolist()}

    def _check_elements(self, ds, s):
        known = np.isin(s.z, self.elements) | s.pad
        if not known.all():
            b, i = np.argwhere(~known)[0]
            raise ValueError(f"{_molecule_label(ds, b)}, atom {s.order[b, i]}: element "
                             f"{element_symbol(s.z[b, i])} (Z={s.z[b, i]}) is unknown to the "
                             f"adapter, which was fitted on "
                             f"{[element_symbol(e) for e in self.elements]}; refit it on data "
                             "with that element, or give elements= explicitly")

    # ---- encoding ----------------------------------------------------------------------------

    def encode(self, ds, molecules=None):
        """The structures ``molecules`` (indices along the molecule dim; default all) of ``ds``
        as one Batch."""
        self._fitted()
        self.check(ds, targets=self._has_targets(ds))
        rows = np.arange(ds.sizes[MOLECULE]) if molecules is None else np.asarray(molecules)
        return self._encode_rows(ds, rows, Template.of(ds[self._decoded_variables(ds)]))

    def _has_targets(self, ds):
        return all(n in ds.data_vars for n in self.variables)

    def _decoded_variables(self, ds):
        return [n for n in ("atomic_number", "positions", *self.variables) if n in ds.data_vars]

    def _encode_rows(self, ds, rows, template):
        sub = ds.isel({MOLECULE: rows})
        s = _read(sub)
        self._check_elements(sub, s)
        if s.cell is not None:
            _check_cells(sub, s)
        _check_overlaps(sub, s)
        B, N = s.z.shape
        type_of = np.zeros(MAX_Z + 1, np.int32)
        type_of[self.elements] = np.arange(len(self.elements))
        types = np.where(s.pad, 0, type_of[s.z]).astype(np.int32)
        columns = [np.eye(len(self.elements), dtype=self.dtype)[types]]
        if self.atom_features:
            normalized = self.normalizer.apply(sub[self.atom_features])
            for name in self.atom_features:
                values = _per_atom(normalized[name].transpose(MOLECULE, ATOM, ...).values,
                                   s.order).reshape(B, N, -1)
                bad = ~np.isfinite(values).all(axis=-1) & ~s.pad
                if bad.any():
                    b, i = np.argwhere(bad)[0]
                    raise ValueError(f"{_molecule_label(sub, b)}, atom {s.order[b, i]}: atom "
                                     f"feature {name!r} is NaN; every real atom needs its "
                                     "features")
                columns.append(values.astype(self.dtype))
        tokens = np.where(s.pad[..., None], 0, np.concatenate(columns, axis=-1)).astype(self.dtype)
        structure = Structure(positions=s.positions.astype(self.dtype), types=types,
                              cell=None if (c := batch_cell(s)) is None else c.astype(self.dtype))
        placement = Placement(template, (MOLECULE,), (1,), (0,), rows.astype(np.int64)[:, None])
        return Batch(tokens=tokens, key_padding_mask=s.pad,
                     valid=np.broadcast_to(~s.pad[..., None], tokens.shape),
                     coords={ATOM: np.where(s.pad, np.nan, s.order.astype(np.float64))},
                     placement=placement,
                     targets=self._targets(sub, s, types) if self._has_targets(sub) else None,
                     structure=structure)

    def _targets(self, sub, s, types):
        """The normalized targets of a batch (see the module docstring)."""
        B, N = s.z.shape
        targets = {}
        columns = []
        for name in self.structure_targets:
            stats = self.statistics[name]
            reference = np.asarray(stats["reference"]).reshape(len(self.elements), -1)
            y = sub[name].transpose(MOLECULE, ...).values.reshape(B, -1).astype(np.float64)
            baseline = np.where(s.pad[..., None], 0.0, reference[types]).sum(axis=1)
            columns.append((y - baseline) / np.asarray(stats["scale"]).reshape(-1))
        if columns:
            targets["structure"] = np.concatenate(columns, axis=1).astype(self.dtype)
        if self.atom_targets:
            normalized = self.normalizer.apply(sub[self.atom_targets])
            parts = [_per_atom(normalized[n].transpose(MOLECULE, ATOM, ...).values,
                               s.order).reshape(B, N, -1) for n in self.atom_targets]
            targets["atoms"] = np.where(s.pad[..., None], np.nan,
                                        np.concatenate(parts, axis=-1)).astype(self.dtype)
        if self.forces is not None:
            f = _per_atom(sub[self.forces].transpose(MOLECULE, ATOM, "xyz").values, s.order)
            scale = self.statistics[self.energy]["scale"]
            targets["forces"] = np.where(s.pad[..., None], np.nan, f / scale).astype(self.dtype)
        return targets

    def batches(self, ds, batch_size=32, shuffle=True, seed=0, drop_last=False):
        """Batches over ``ds`` in a new order every epoch: see :class:`MoleculeBatches`."""
        return MoleculeBatches(ds, self, batch_size, shuffle, seed, drop_last)

    # ---- decoding ----------------------------------------------------------------------------

    def decode(self, batch, predictions):
        """Normalized predictions of a batch in physical units, {target name: (B, ...) per
        structure or (B, N, ...) per atom}. ``predictions``: a dict with ``"structure"`` (B, S),
        ``"atoms"`` (B, N, A) and ``"forces"`` (B, N, 3), as a molecule model's ``predict``
        returns (the ones the adapter has targets for)."""
        self._fitted()
        B, N = batch.key_padding_mask.shape
        pad = batch.key_padding_mask
        types = np.asarray(batch.structure.types)
        out = {}
        if self.structure_targets:
            values = np.asarray(predictions["structure"], np.float64)
            start = 0
            for name in self.structure_targets:
                width = self._width(name)
                stats = self.statistics[name]
                reference = np.asarray(stats["reference"]).reshape(len(self.elements), -1)
                baseline = np.where(pad[..., None], 0.0, reference[types]).sum(axis=1)
                y = values[:, start:start + width] * np.asarray(stats["scale"]).reshape(-1)
                out[name] = (y + baseline).reshape(B, *self.layout[name]["shape"])
                start += width
        if self.atom_targets:
            values = np.asarray(predictions["atoms"], np.float64)
            start = 0
            for name in self.atom_targets:
                width = self._width(name)
                part = values[..., start:start + width]
                mean, std = (self.normalizer.stats[name].sel(stat=s).values.reshape(-1)
                             for s in ("mean", "std"))
                out[name] = np.where(pad[..., None], np.nan, part * std + mean).reshape(
                    B, N, *self.layout[name]["shape"])
                start += width
        if self.forces is not None:
            scale = self.statistics[self.energy]["scale"]
            out[self.forces] = np.where(pad[..., None], np.nan,
                                        np.asarray(predictions["forces"], np.float64) * scale)
        return out

    def predict(self, model, ds, batch_size=32):
        """A Dataset of ``model``'s predictions for every structure of ``ds``, on its
        coordinates: per-structure targets on (molecule, ...), per-atom ones on (molecule, atom,
        ...) with NaN on padding, in physical units. ``model.predict(tokens, key_padding_mask,
        structure=...)`` returns the dict :meth:`decode` takes (a MoleculeModel does)."""
        self._fitted()
        self.check(ds, targets=False)
        M, A = ds.sizes[MOLECULE], ds.sizes[ATOM]
        template = Template.of(ds[self._decoded_variables(ds)])
        out = {}
        for start in range(0, M, batch_size):
            rows = np.arange(start, min(start + batch_size, M))
            batch = self._encode_rows(ds, rows, template)
            decoded = self.decode(batch, model.predict(batch.tokens, batch.key_padding_mask,
                                                       structure=batch.structure))
            atoms = batch.coords[ATOM]
            real = ~batch.key_padding_mask
            for name, values in decoded.items():
                shape = self.layout[name]["shape"]
                if name not in out:
                    out[name] = np.full((M, A, *shape) if self.layout[name]["per_atom"]
                                        else (M, *shape), np.nan)
                if self.layout[name]["per_atom"]:
                    b, i = np.nonzero(real)
                    out[name][rows[b], atoms[b, i].astype(np.int64)] = values[b, i]
                else:
                    out[name][rows] = values
        variables = {}
        for name, values in out.items():
            dims = ((MOLECULE, ATOM) if self.layout[name]["per_atom"] else (MOLECULE,)) + \
                tuple(self.layout[name]["dims"])
            attrs = dict(ds[name].attrs) if name in ds.data_vars else {}
            variables[name] = (dims, values, attrs)
        coords = {k: v for k, v in ds.coords.items()
                  if set(v.dims) <= {MOLECULE, ATOM, *(d for n in out
                                                       for d in self.layout[n]["dims"])}}
        return xr.Dataset(variables, coords=coords, attrs=ds.attrs)


class MoleculeBatches:
    """Batches of ``batch_size`` structures of ``ds`` (each trimmed to its largest structure),
    carrying their targets; with ``shuffle`` in an order drawn from (``seed``, epoch) only, so
    ``epoch(e)`` replays epoch e (what ``fit`` reads). Iterating the object runs epoch 0, 1, ...
    on each new loop."""

    def __init__(self, ds, adapter, batch_size=32, shuffle=True, seed=0, drop_last=False):
        adapter._fitted()
        adapter.check(ds, targets=adapter._has_targets(ds))
        if not isinstance(batch_size, (int, np.integer)) or batch_size < 1:
            raise ValueError(f"batch_size = {batch_size!r}; expected a positive integer")
        self.ds, self.adapter = ds, adapter
        self.batch_size, self.shuffle, self.seed, self.drop_last = batch_size, shuffle, seed, \
            drop_last
        self.template = Template.of(ds[adapter._decoded_variables(ds)])
        self._epoch = 0

    @property
    def n_samples(self):
        return self.ds.sizes[MOLECULE]

    def __len__(self):
        whole, rest = divmod(self.n_samples, self.batch_size)
        return whole if self.drop_last or not rest else whole + 1

    def __iter__(self):
        epoch = self._epoch
        self._epoch += 1
        return self.epoch(epoch)

    def epoch(self, epoch):
        """The batches of epoch ``epoch`` (an int >= 0), lazily."""
        order = np.arange(self.n_samples)
        if self.shuffle:
            order = np.random.default_rng([self.seed, check_epoch(epoch)]).permutation(order)
        for start in range(0, len(self) * self.batch_size, self.batch_size):
            rows = np.sort(order[start:start + self.batch_size])
            yield self.adapter._encode_rows(self.ds, rows, self.template)


def _ase_property(atoms, getter):
    """``getter(atoms)`` or None when the structure has no calculator or it lacks it."""
    if atoms.calc is None:
        return None
    try:
        return np.asarray(getter(atoms))
    except Exception:  # ASE raises PropertyNotImplementedError, RuntimeError... when absent
        return None


def _feature_widths(ds, names):
    """Token columns per atom feature: the product of its dims other than molecule and atom."""
    return {name: int(np.prod([ds.sizes[d] for d in ds[name].dims if d not in (MOLECULE, ATOM)],
                              dtype=np.int64)) for name in names}


def from_ase(structures, energy="energy", forces="forces"):
    """A Dataset in this module's layout from ASE ``Atoms`` (a list, or one): atomic numbers,
    positions, ``cell`` and ``pbc`` when a structure is periodic, and ``energy`` / ``forces``
    from each structure's calculator when it has them (NaN for those without). Files of any
    format ASE reads (XYZ, extxyz, CIF, POSCAR): ``from_ase(ase.io.read(path, ":"))``."""
    import ase  # optional dependency: pip install ase

    if isinstance(structures, ase.Atoms):
        structures = [structures]
    structures = list(structures)
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
        e = _ase_property(atoms, lambda a: a.get_potential_energy())
        energies[i] = np.nan if e is None else float(e)
        f = _ase_property(atoms, lambda a: a.get_forces())
        if f is not None:
            force_values[i, :n] = f
    data = {"atomic_number": ((MOLECULE, ATOM), z),
            "positions": ((MOLECULE, ATOM, "xyz"), positions, {"units": "Angstrom"})}
    if pbc.any():
        data["cell"] = ((MOLECULE, "cell_vector", "xyz"), cell, {"units": "Angstrom"})
        data["pbc"] = ((MOLECULE, "xyz"), pbc)
    if energy is not None and np.isfinite(energies).any():
        data[energy] = ((MOLECULE,), energies, {"units": "eV"})
    if forces is not None and np.isfinite(force_values).any():
        data[forces] = ((MOLECULE, ATOM, "xyz"), force_values, {"units": "eV/Angstrom"})
    return xr.Dataset(data, coords={MOLECULE: np.arange(M), ATOM: np.arange(A), "xyz": XYZ})
