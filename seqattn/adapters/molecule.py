"""MoleculeAdapter: molecules and periodic structures as sets of atom tokens, and per-structure
and per-atom predictions (energies, forces, properties, classes) back on the Dataset.

::

    ds = from_ase(structures)                      # or from_rdkit, from_smiles, read_sdf, ...
    adapter = MoleculeAdapter().fit(ds, targets={"energy": "energy", "forces": "forces"},
                                    where=train)
    model = build(adapter.model_config(d_model=64, cutoff=5.0))
    fit(model, EnergyForceLoss(), AdamW(model), adapter.batches(ds, where=train, shuffle=True))
    out = seqattn.predict(model, ds, adapter)   # energy (molecule,), forces (molecule, atom, xyz)

The Dataset's layout is :mod:`seqattn.adapters.molecule_layout`'s; the targets' kinds (energy,
forces, extensive, intensive, per atom) and their normalization are
:mod:`seqattn.adapters.molecule_targets`'s.

**Batches** (:meth:`MoleculeAdapter.batches`, :meth:`MoleculeAdapter.encode`): B structures,
each trimmed to the largest of the batch (N atoms), real atoms first in their Dataset order:

* ``tokens`` (B, N, F): a one-hot row of the atom's element (T columns, one per atom type, in
  the order of ``atom_types``), then the ``atom_features`` variables, normalized; 0 on padding;
* ``key_padding_mask`` (B, N) True on padding; ``coords["atom"]`` (B, N) the atom's index along
  the Dataset's ``atom`` dim, and every coordinate on the ``molecule`` dim (the molecule's own:
  its label's index when it is text; numeric ones such as a temperature) on each of its atoms,
  NaN on padding; ``placement.starts[:, 0]`` the molecule index;
* ``structure``: a :class:`seqattn.nn.Structure` with ``positions`` (B, N, 3) (0 on padding),
  ``types`` (B, N) int32 (the atom type; 0 on padding) and, when a structure of the batch is
  periodic, ``cell`` (B, 3, 3) (non-periodic axes get long stand-in vectors:
  :func:`~seqattn.adapters.molecule_layout.batch_cell`);
* ``targets`` (None without targets): a dict of host arrays, normalized, NaN where missing:
  ``"structure"`` (B, S) the per-structure values (each flattened over its extra dims, in the
  order of the declaration), ``"structure_classes"`` (B, K) int64 class indices,
  ``"atoms"`` (B, N, A) the per-atom values, ``"atom_classes"`` (B, N, K') int64 and
  ``"forces"`` (B, N, 3); a missing class is ``MISSING_CLASS``.

A model's outputs (what :meth:`MoleculeModel.predict` returns) are the same dict with logits in
place of class indices: ``"structure"``, ``"structure_logits"`` (B, sum of the classes),
``"atoms"``, ``"atom_logits"``, ``"forces"``; :meth:`MoleculeAdapter.decode` puts them back,
classes as ``<target>`` (labels) and ``<target>_probability`` on (..., ``class``), the dim
named ``<target>_class`` instead where the adapter has several class targets.
"""
import numpy as np
import xarray as xr

from ..data.batch import Batch, Placement, Template
from ..data.coords import as_float, token_coordinates
from ..data.normalize import Normalizer
from ..data.persistence import Persistable
from ..data.protocol import Adapter, Batches, sample_selection
from ..data.targets import (CLASS_DIM, MISSING_CLASS, TargetSpec, class_indices,
                            class_predictions, describe_targets, is_classes)
from ..models.molecule import MoleculeModelConfig
from ..nn.structured_bias import Structure
from ..readers.ase import from_ase  # noqa: F401  (its home before 0.2, re-exported for a release)
from .molecule_layout import (ATOM, MAX_Z, MOLECULE, HostArrays, batch_cell, check_cells,
                              check_overlaps, check_structures, element_symbol, gather,
                              gather_host, molecule_label, per_atom)
from .molecule_targets import (declared_kinds, extensive_statistics, intensive_statistics,
                               structure_offset, target_layout)

REMOVED_OPTIONS = ("energy", "forces", "targets", "layout", "statistics", "normalizer",
                   "feature_widths")
TASKS = ("regression", "classification")


class MoleculeAdapter(Persistable, Adapter):
    """Structures Dataset <-> atom-token batches; see the module docstring.

    Targets are declared at :meth:`fit` (``targets=``; :mod:`.molecule_targets` lists the
    kinds). Fitted state: ``atom_types``, ``layout``, ``statistics``, ``normalizer``,
    ``feature_widths``, ``target_specs``.

    Parameters
    ----------
    atom_features : sequence of str, default ()
        Per-atom float variables (molecule, atom, ...) appended to the one-hot element in the
        tokens, normalized (a variable with extra dims gives a column per value).
    elements : sequence of int, optional
        The atomic numbers the atom types stand for, in type order; by default those of the
        structures ``fit`` sees, sorted (default None).
    dtype : str, default "float32"
        The tokens' and the structure's float type (``"float32"`` or ``"float64"``).
    **removed
        Options earlier releases took (``energy``, ``forces``, ``targets``, ``layout``,
        ``statistics``, ``normalizer``, ``feature_widths``): refused with a TypeError, since
        targets are now declared at ``fit`` and statistics come from it.
    """

    def __init__(self, *, atom_features=(), elements=None, dtype="float32", **removed):
        moved = sorted(set(removed) & set(REMOVED_OPTIONS))
        if moved:
            raise TypeError(f"MoleculeAdapter(...) no longer takes {moved}: targets are declared "
                            "at fit, e.g. MoleculeAdapter().fit(ds, targets={'energy': "
                            "'energy', 'forces': 'forces'}), and statistics come from fit only "
                            "(see CHANGELOG.md)")
        if removed:
            raise TypeError(f"MoleculeAdapter got unexpected arguments {sorted(removed)}; it "
                            "takes atom_features=, elements= and dtype=")
        if isinstance(atom_features, str):
            raise TypeError(f"atom_features must be a list of variable names, e.g. "
                            f"[{atom_features!r}], not a string")
        self.atom_features = list(atom_features)
        self.elements = None if elements is None else [int(z) for z in elements]
        if self.elements is not None:
            bad = [z for z in self.elements if not 1 <= z <= MAX_Z]
            if bad or len(set(self.elements)) != len(self.elements) or not self.elements:
                raise ValueError(f"elements must be distinct atomic numbers 1 .. {MAX_Z}, got "
                                 f"{elements}")
        self.dtype = np.dtype(dtype)
        if self.dtype not in (np.float32, np.float64):
            raise ValueError(f"dtype = {dtype!r}; expected 'float32' or 'float64'")
        self.atom_types = None  # fitted: the atomic number of each atom type
        self.layout = {}  # fitted: target name -> {"kind", "per_atom", "dims", "shape"}
        self.statistics = {}  # fitted: per-structure value target -> its normalization
        self.feature_widths = {}  # fitted: atom feature -> token columns
        self.normalizer = None  # fitted: per-atom values and atom features
        self.target_specs = ()

    # ---- fitted state ----------------------------------------------------------------------

    @property
    def fitted(self):
        return self.atom_types is not None

    def get_state(self):
        return {**super().get_state(), "atom_types": self.atom_types, "layout": self.layout,
                "statistics": self.statistics, "feature_widths": self.feature_widths}

    def set_state(self, state):
        super().set_state(state)
        self.atom_types = state.get("atom_types")
        self.layout = state.get("layout") or {}
        self.statistics = state.get("statistics") or {}
        self.feature_widths = state.get("feature_widths") or {}

    @classmethod
    def from_dict(cls, d):
        """The adapter `d` describes (:mod:`seqattn.data.persistence`); one saved by seqattn 0.1
        (targets, layout and statistics in its config) is read as well."""
        if "layout" in d.get("config", {}):
            d = _description_before_0_2(d)
        return super().from_dict(d)

    @property
    def model_sizes(self):
        raise AttributeError("MoleculeAdapter.model_sizes() was replaced by "
                             "adapter.model_config(**options), the whole MoleculeModelConfig "
                             "(see CHANGELOG.md)")

    @property
    def num_types(self):
        self.require_fitted("num_types")
        return len(self.atom_types)

    @property
    def in_features(self):
        self.require_fitted("in_features")
        return self.num_types + sum(self.feature_widths[n] for n in self.atom_features)

    @property
    def variables(self):
        """Every target, in the order of the declaration."""
        return list(self.layout)

    def _spec(self, name):
        return next(s for s in self.target_specs if s.name == name)

    def _targets_of(self, per_atom, classes):
        """Targets in the order of the model's outputs of that group (forces apart)."""
        return [n for n, entry in self.layout.items() if entry["per_atom"] == per_atom
                and entry["kind"] != "forces" and (self._spec(n).kind == "classes") == classes]

    @property
    def forces(self):
        return next((n for n, e in self.layout.items() if e["kind"] == "forces"), None)

    @property
    def energy(self):
        return next((n for n, e in self.layout.items() if e["kind"] == "energy"), None)

    def _width(self, name):
        return int(np.prod(self.layout[name]["shape"], dtype=np.int64))

    def sample_dims(self, ds=None):
        return (MOLECULE,)

    # ---- checking and fitting ----------------------------------------------------------------

    def check(self, ds):
        """Raise a clear error if `ds` does not hold structures this adapter can read (its
        targets are checked where they are used)."""
        check_structures(ds)
        for name in self.atom_features:
            if name not in ds.data_vars:
                raise ValueError(f"atom feature {name!r} is not in the dataset (it has "
                                 f"{sorted(map(str, ds.data_vars))})")
            if ds[name].dims[:2] != (MOLECULE, ATOM):
                raise ValueError(f"atom feature {name!r} has dims {ds[name].dims}; expected "
                                 "(molecule, atom, ...)")
            if not np.issubdtype(ds[name].dtype, np.number) or ds[name].dtype == bool:
                raise TypeError(f"atom feature {name!r} has dtype {ds[name].dtype}; expected "
                                "numbers")
            width = _feature_width(ds, name)
            if self.feature_widths and width != self.feature_widths[name]:
                raise ValueError(f"atom feature {name!r} has {width} values per atom here but "
                                 f"{self.feature_widths[name]} in the data the adapter was "
                                 "fitted on")

    def fit(self, ds, *, targets=None, where=None):
        """Learn the atom types, the atom features' normalization and the targets' kinds and
        statistics from the structures `where` selects; returns self.

        Parameters
        ----------
        ds : xarray.Dataset
            Structures (:mod:`~seqattn.adapters.molecule_layout`), e.g. from a reader of
            :mod:`seqattn.readers`.
        targets : str, sequence of str, dict or None
            The target variables: a dict ``{name: kind}`` with kinds ``"energy"``,
            ``"forces"``, ``"extensive"``, ``"intensive"`` or ``"atom"``
            (:mod:`~seqattn.adapters.molecule_targets`), or names alone where the data decide
            (per-atom variables, class labels). None: no targets (batches for prediction).
        where : selection, optional
            The training structures along ``molecule`` (a boolean DataArray, a dict, labels
            or indices: :mod:`seqattn.data.protocol`); default all.

        Returns
        -------
        MoleculeAdapter
            self, fitted.
        """
        return super().fit(ds, targets=targets, where=where)

    def _fit(self, ds, targets):
        self.check(ds)
        kinds = declared_kinds(targets)
        real = ds["atomic_number"] > 0
        layout, specs = {}, []
        for name, kind in kinds.items():
            classes = name in ds.data_vars and is_classes(ds[name])
            layout[name] = target_layout(ds, name, kind, classes)
            da = ds[name]
            if classes and layout[name]["per_atom"]:  # padding holds no label
                spec = describe_targets(xr.DataArray(da.values[real.values], attrs=da.attrs),
                                        name)
            else:
                spec = describe_targets(da, name)
            specs.append(spec)
        # the energy first: it is the model's structure output 0, whose gradient the forces are
        order = sorted(layout, key=lambda n: layout[n]["kind"] != "energy")
        z = ds["atomic_number"].values
        atom_types = self.elements or sorted(int(e) for e in np.unique(z[z > 0]))
        s = gather(ds)
        _check_elements(s, atom_types)
        counts = np.stack([(s.z == e).sum(axis=1) for e in atom_types], axis=1).astype(float)
        force_scale = None
        forces = next((n for n in order if layout[n]["kind"] == "forces"), None)
        if forces is not None:
            f = per_atom(ds[forces].transpose(MOLECULE, ATOM, "xyz").values, s.order)[~s.pad]
            f = f[np.isfinite(f)]
            if f.size == 0:
                raise ValueError(f"forces {forces!r} are all NaN in the structures fit saw")
            force_scale = float(np.sqrt(np.mean(f ** 2))) or 1.0
        statistics = {}
        spec_of = {spec.name: spec for spec in specs}
        for name in order:
            entry = layout[name]
            if entry["per_atom"] or spec_of[name].kind == "classes":
                continue
            y = ds[name].transpose(MOLECULE, ...).values.reshape(len(counts), -1).astype(float)
            if not np.isfinite(y).any(axis=0).all():
                raise ValueError(f"target {name!r} is all NaN in the structures fit saw")
            statistics[name] = (intensive_statistics(y) if entry["kind"] == "intensive" else
                                extensive_statistics(y, counts, force_scale
                                                     if entry["kind"] == "energy" else None))
        normalized = [n for n in order if layout[n]["kind"] == "atom"
                      and spec_of[n].kind == "values"] + self.atom_features
        self.normalizer = None
        if normalized:
            self.normalizer = Normalizer.fit(
                xr.Dataset({n: ds[n].where(real) for n in normalized}), normalized)
        self.layout = {n: layout[n] for n in order}
        self.target_specs = tuple(spec_of[n] for n in order)
        self.statistics = statistics
        self.feature_widths = {n: _feature_width(ds, n) for n in self.atom_features}
        self.atom_types = atom_types

    # ---- what models are built with -----------------------------------------------------------

    def model_config(self, task=None, **options):
        """The :class:`~seqattn.models.MoleculeModelConfig` of a model that reads these batches:
        its sizes (atom types, token features, outputs per structure and atom, their pooling,
        the classes, forces) from the fitted adapter; `options` are the other fields
        (``d_model``, ``cutoff``, ...). `task`, when given, must be what the targets are:
        ``"regression"`` (values) or ``"classification"`` (classes)."""
        self.require_fitted("model_config")
        kinds = {"classification" if s.kind == "classes" else "regression"
                 for s in self.target_specs}
        if task is not None and (task not in TASKS or task not in kinds):
            raise ValueError(f"task = {task!r}; the adapter's targets {self.variables} make "
                             f"{sorted(kinds) or 'no task'} (leave task out)")
        fixed = {"num_types": self.num_types, "in_features": self.in_features,
                 "structure_outputs": sum(self._width(n) for n in self._targets_of(False, False)),
                 "structure_pooling": tuple(
                     "mean" if self.layout[n]["kind"] == "intensive" else "sum"
                     for n in self._targets_of(False, False) for _ in range(self._width(n))),
                 "structure_classes": tuple(self._spec(n).n_classes
                                            for n in self._targets_of(False, True)),
                 "atom_outputs": sum(self._width(n) for n in self._targets_of(True, False)),
                 "atom_classes": tuple(self._spec(n).n_classes
                                       for n in self._targets_of(True, True)),
                 "forces": self.forces is not None, "dtype": self.dtype.name}
        clash = sorted(set(fixed) & set(options) - {"dtype"})
        if clash:
            raise ValueError(f"{clash} follow from the fitted adapter; drop them from the options")
        return MoleculeModelConfig(**{**fixed, **options})

    # ---- encoding ------------------------------------------------------------------------------

    def batches(self, ds, *, targets=None, where=None, batch_size=32, shuffle=False, seed=0,
                drop_last=False):
        """The structures `where` selects, `batch_size` at a time (a :class:`MoleculeBatches`).
        `targets`: None the fitted targets that `ds` holds (the others count as missing;
        none: batches without targets), a name or list of fitted targets (the others count as
        missing), or ``()`` for no targets."""
        self.require_fitted("batches")
        selected = self.select(ds, where)
        self.check(selected)
        # taken before selecting, so that a label's index is the same in every selection
        index = sample_selection(ds, where, (MOLECULE,)).get(MOLECULE,
                                                             np.arange(ds.sizes[MOLECULE]))
        coords = {name: as_float(values)[index]
                  for name, (dim, values) in token_coordinates(ds).items() if dim == MOLECULE}
        return MoleculeBatches(self, selected, self._targets_for(selected, targets), coords,
                               batch_size=batch_size, shuffle=shuffle, seed=seed,
                               drop_last=drop_last)

    def _targets_for(self, ds, targets):
        if targets is None:
            names = [n for n in self.layout if n in ds.data_vars]
        else:
            names = [targets] if isinstance(targets, str) else list(targets)
        for name in names:
            if name not in self.layout:
                raise ValueError(f"targets names {name!r}, which the adapter was not fitted on "
                                 f"(its targets: {self.variables}); fit it with that target")
            if name not in ds.data_vars:
                raise ValueError(f"target {name!r} is not in the dataset (it has "
                                 f"{sorted(map(str, ds.data_vars))})")
        for name in names:
            entry = self.layout[name]
            here = target_layout(ds, name, entry["kind"], self._spec(name).kind == "classes")
            if here != entry:
                raise ValueError(f"target {name!r} has dims {ds[name].dims} and shape "
                                 f"{ds[name].shape} here, but the adapter was fitted on "
                                 f"{entry['dims']} of sizes {entry['shape']} besides "
                                 "molecule and atom")
        return names

    def host_arrays(self, ds, targets):
        """:class:`HostArrays` of `ds` (selected and checked) that :meth:`_encode_rows` cuts
        batches from: the atom features and the `targets`, the atom features and per-atom
        value targets normalized. Normalizing is elementwise, so a batch cut from them holds
        the bits of one normalized on its own; done once per set of batches, not per batch
        (xarray's selecting and normalizing cost more than the rest of a batch's encoding)."""
        variables = list(self.atom_features) + list(targets)
        if self.normalizer is not None:
            names = [n for n in self.normalizer.variables if n in variables]
            ds = ds.assign(self.normalizer.apply(ds[names]).data_vars)
        return HostArrays.of(ds, variables)

    def _encode_rows(self, host, rows, template, targets, molecule_coords):
        """Structures `rows` of `host` (:meth:`host_arrays`) as a Batch; `molecule_coords`
        {name: (molecules of ds,) float64} the coordinates on the molecule dim."""
        sub = host.rows(rows)
        s = gather_host(sub)
        _check_elements(s, self.atom_types)
        if s.cell is not None:
            check_cells(s)
        check_overlaps(s)
        B, N = s.z.shape
        type_of = np.zeros(MAX_Z + 1, np.int32)
        type_of[self.atom_types] = np.arange(len(self.atom_types))
        types = np.where(s.pad, 0, type_of[s.z]).astype(np.int32)
        columns = [np.eye(len(self.atom_types), dtype=self.dtype)[types]]
        if self.atom_features:
            for name in self.atom_features:
                values = per_atom(sub.variables[name], s.order).reshape(B, N, -1)
                bad = ~np.isfinite(values).all(axis=-1) & ~s.pad
                if bad.any():
                    b, i = np.argwhere(bad)[0]
                    raise ValueError(f"{molecule_label(s.labels, b)}, atom {s.order[b, i]}: atom "
                                     f"feature {name!r} is NaN; every real atom needs its "
                                     "features")
                columns.append(values.astype(self.dtype))
        tokens = np.where(s.pad[..., None], 0, np.concatenate(columns, axis=-1)).astype(self.dtype)
        structure = Structure(positions=s.positions.astype(self.dtype), types=types,
                              cell=None if (c := batch_cell(s)) is None else c.astype(self.dtype))
        placement = Placement(template, (MOLECULE,), (1,), (0,), rows.astype(np.int64)[:, None])
        coords = {name: np.where(s.pad, np.nan, values[rows][:, None])
                  for name, values in molecule_coords.items()}
        coords[ATOM] = np.where(s.pad, np.nan, s.order.astype(np.float64))
        return Batch(tokens=tokens, key_padding_mask=s.pad,
                     valid=np.broadcast_to(~s.pad[..., None], tokens.shape), coords=coords,
                     placement=placement,
                     targets=self._targets(sub, s, types, targets) if targets else None,
                     structure=structure)

    def _targets(self, sub, s, types, asked):
        """The batch's targets (module docstring); targets not `asked` for are missing."""
        B, N = s.z.shape
        out = {}
        values = []
        for name in self._targets_of(False, False):
            stats = self.statistics[name]
            if name in asked:
                y = sub.variables[name].reshape(B, -1).astype(np.float64)
            else:
                y = np.full((B, self._width(name)), np.nan)
            values.append((y - structure_offset(stats, types, s.pad)) /
                          np.asarray(stats["scale"]))
        if values:
            out["structure"] = np.concatenate(values, axis=1).astype(self.dtype)
        labels = [class_indices(self._spec(n), sub.variables[n]) if n in asked else
                  np.full(B, MISSING_CLASS) for n in self._targets_of(False, True)]
        if labels:
            out["structure_classes"] = np.stack(labels, axis=1).astype(np.int64)
        atom_values = self._targets_of(True, False)
        if atom_values:
            parts = [per_atom(sub.variables[n], s.order).reshape(B, N, -1) if n in asked else
                     np.full((B, N, self._width(n)), np.nan) for n in atom_values]
            out["atoms"] = np.where(s.pad[..., None], np.nan,
                                    np.concatenate(parts, axis=-1)).astype(self.dtype)
        atom_labels = []
        for name in self._targets_of(True, True):
            if name in asked:
                gathered = per_atom(sub.variables[name], s.order)
                indices = np.full((B, N), MISSING_CLASS, np.int64)
                indices[~s.pad] = class_indices(self._spec(name), gathered[~s.pad])
            else:
                indices = np.full((B, N), MISSING_CLASS, np.int64)
            atom_labels.append(indices)
        if atom_labels:
            out["atom_classes"] = np.stack(atom_labels, axis=-1)
        if self.forces is not None:
            if self.forces in asked:
                f = per_atom(sub.variables[self.forces], s.order)
            else:
                f = np.full((B, N, 3), np.nan)
            scale = self.statistics[self.energy]["scale"][0]
            out["forces"] = np.where(s.pad[..., None], np.nan, f / scale).astype(self.dtype)
        return out

    # ---- decoding ------------------------------------------------------------------------------

    def decode(self, batch, values):
        """A model's outputs for `batch` in physical units, as a Dataset on the batch's
        molecules: per-structure targets on (molecule, ...), per-atom ones on (molecule, atom,
        ...) (the Dataset's whole atom dim, NaN on padding), classes as labels with
        ``<target>_probability`` on (..., class). `values`: the dict a molecule model's
        ``predict`` returns (module docstring)."""
        self.require_fitted("decode")
        if not isinstance(values, dict):
            raise TypeError(f"values is a {type(values).__name__}; expected the dict a molecule "
                            "model's predict returns ('structure', 'forces', ...)")
        template = batch.placement.template
        rows = batch.placement.starts[:, 0]
        B, N = batch.key_padding_mask.shape
        A = template.sizes[ATOM]
        pad = batch.key_padding_mask
        types = np.asarray(batch.structure.types)
        b, i = np.nonzero(~pad)
        atoms = batch.coords[ATOM][b, i].astype(np.int64)

        def on_atoms(per_token, fill=np.nan):
            """(B, N, ...) in token order -> (B, A, ...) along the Dataset's atom dim."""
            out = np.full((B, A, *per_token.shape[2:]), fill, dtype=per_token.dtype)
            out[b, atoms] = per_token[b, i]
            return out

        variables = {}
        for name, column in _columns(self, self._targets_of(False, False)):
            stats = self.statistics[name]
            part = _output(values, "structure", (B, None))[:, column].astype(np.float64)
            y = part * np.asarray(stats["scale"]) + structure_offset(stats, types, pad)
            variables[name] = self._variable(name, y.reshape(B, *self.layout[name]["shape"]))
        for name, column in _class_columns(self, self._targets_of(False, True)):
            logits = _output(values, "structure_logits", (B, None))[:, column]
            variables.update(self._classes(name, logits, (MOLECULE,)))
        if self._targets_of(True, False):
            stats = self.normalizer.stats
            for name, column in _columns(self, self._targets_of(True, False)):
                part = _output(values, "atoms", (B, N, None))[..., column].astype(np.float64)
                mean, std = (stats[name].sel(stat=k).values.reshape(-1) for k in ("mean", "std"))
                y = on_atoms(part * std + mean)
                variables[name] = self._variable(name, y.reshape(B, A, *self.layout[name]["shape"]))
        for name, column in _class_columns(self, self._targets_of(True, True)):
            logits = on_atoms(_output(values, "atom_logits", (B, N, None))[..., column])
            valid = np.zeros((B, A), bool)
            valid[b, atoms] = True
            variables.update(self._classes(name, np.nan_to_num(logits), (MOLECULE, ATOM),
                                           valid=valid))
        if self.forces is not None:
            scale = self.statistics[self.energy]["scale"][0]
            f = np.asarray(_output(values, "forces", (B, N, 3)), np.float64) * scale
            variables[self.forces] = self._variable(self.forces, on_atoms(f))
        dims = {d for v in variables.values() for d in v.dims}
        coords = template.coords.isel({MOLECULE: rows})
        coords = {k: v for k, v in coords.coords.items() if set(v.dims) <= dims}
        return xr.Dataset(variables, coords=coords, attrs=template.coords.attrs)

    def _classes(self, name, logits, dims, valid=None):
        """Labels and probabilities of class target `name`; on the ``class`` dim, or on
        ``<name>_class`` where several class targets would give it different classes."""
        out = class_predictions(self._spec(name), logits, dims, valid=valid)
        if sum(s.kind == "classes" for s in self.target_specs) > 1:
            probability = f"{name}_probability"
            out[probability] = out[probability].rename({CLASS_DIM: f"{name}_{CLASS_DIM}"})
        return out

    def _variable(self, name, values):
        entry = self.layout[name]
        dims = (MOLECULE, ATOM) if entry["per_atom"] else (MOLECULE,)
        return xr.DataArray(values, dims=dims + tuple(entry["dims"]),
                            attrs=self._spec(name).attrs or {})

    def predict(self, model, ds, *, where=None, batch_size=64, variables=None):
        """`model`'s predictions for the structures `where` selects (default all), as a Dataset
        on `ds`'s coordinates in physical units (see :meth:`decode`). `variables`: the targets
        to give back (default all; a class target gives its label and probabilities).
        ``model.predict(tokens, key_padding_mask, structure=...)`` returns the outputs' dict
        (a :class:`~seqattn.models.MoleculeModel` does)."""
        self.require_fitted("predict")
        names = self.variables if variables is None else \
            [variables] if isinstance(variables, str) else list(variables)
        unknown = [n for n in names if n not in self.layout]
        if unknown:
            raise ValueError(f"variables {unknown} are not targets of the adapter (its targets: "
                             f"{self.variables})")
        batches = self.batches(ds, targets=(), where=where, batch_size=batch_size)
        parts = [self.decode(batch, model.predict(batch.tokens, batch.key_padding_mask,
                                                  structure=batch.structure))
                 for batch in batches]
        out = xr.concat(parts, dim=MOLECULE, coords="minimal", compat="override",
                        join="override") if len(parts) > 1 else parts[0]
        keep = [v for n in names for v in (n, f"{n}_probability") if v in out.data_vars]
        return out[keep].assign_attrs(ds.attrs)


class MoleculeBatches(Batches):
    """Batches of structures of a Dataset (each batch trimmed to its largest structure), epoch
    by epoch (:class:`seqattn.data.protocol.Batches`); made by :meth:`MoleculeAdapter.batches`.

    Parameters
    ----------
    adapter : MoleculeAdapter
        The fitted adapter that encodes each batch's structures.
    ds : xarray.Dataset
        The selected structures, checked, along the molecule dim.
    targets : list of str
        The fitted targets each batch carries (empty: batches without targets).
    molecule_coords : dict
        Coordinate name -> (molecules of `ds`,) float64 values on the molecule dim, taken
        before the selection so that a label keeps its index.
    **options
        ``batch_size``, ``shuffle``, ``seed`` and ``drop_last``, as for
        :class:`seqattn.data.protocol.Batches`.
    """

    def __init__(self, adapter, ds, targets, molecule_coords, **options):
        super().__init__(**options)
        self.adapter, self.ds, self.targets = adapter, ds, targets
        self.host = adapter.host_arrays(ds, targets)
        self.molecule_coords = molecule_coords
        self.n_samples = ds.sizes[MOLECULE]
        self.template = Template.of(ds)

    def collate(self, indices):
        # a batch's structures in Dataset order: its rows are read in one forward pass of the data
        return self.adapter._encode_rows(self.host, np.sort(indices), self.template,
                                         self.targets, self.molecule_coords)


def _description_before_0_2(d):
    """A 0.1 description (targets given to the constructor, fitted state in the config) in
    today's terms: its energy, forces, per-atom and (extensive) per-structure targets, their
    statistics reshaped, the fitted elements as the atom types. Target attrs (units) were not
    stored then, so predictions of such an adapter come without them."""
    config = dict(d["config"])
    energy, forces = config.pop("energy"), config.pop("forces")
    config.pop("targets")
    old_layout, old_statistics = config.pop("layout"), config.pop("statistics") or {}
    widths = config.pop("feature_widths") or {}
    types = config["elements"]
    layout = {name: {"kind": "energy" if name == energy else "forces" if name == forces
                     else "atom" if entry["per_atom"] else "extensive", **entry}
              for name, entry in old_layout.items()}
    statistics = {}
    for name, stats in old_statistics.items():
        width = int(np.prod(old_layout[name]["shape"], dtype=np.int64))
        statistics[name] = {
            "reference": np.asarray(stats["reference"]).reshape(len(types), width).tolist(),
            "scale": np.asarray(stats["scale"], dtype=np.float64).reshape(width).tolist()}
    state = dict(d.get("state") or {"normalizer": d.get("normalizer")})
    state.update(atom_types=types, layout=layout, statistics=statistics, feature_widths=widths,
                 targets=[TargetSpec(name, "values", None, {}).to_dict() for name in layout])
    return {**d, "config": config, "state": state}


def _feature_width(ds, name):
    """Token columns of an atom feature: the product of its dims other than molecule and atom."""
    return int(np.prod([ds.sizes[d] for d in ds[name].dims if d not in (MOLECULE, ATOM)],
                       dtype=np.int64))


def _check_elements(s, atom_types):
    known = np.isin(s.z, atom_types) | s.pad
    if not known.all():
        b, i = np.argwhere(~known)[0]
        raise ValueError(f"{molecule_label(s.labels, b)}, atom {s.order[b, i]}: element "
                         f"{element_symbol(s.z[b, i])} (Z={s.z[b, i]}) is unknown to the "
                         f"adapter, which was fitted on "
                         f"{[element_symbol(e) for e in atom_types]}; refit it on data "
                         "with that element, or give elements= explicitly")


def _columns(adapter, names):
    """(name, slice of its columns) along an output group of values."""
    start = 0
    for name in names:
        width = adapter._width(name)
        yield name, slice(start, start + width)
        start += width


def _class_columns(adapter, names):
    """(name, slice of its logits) along an output group of class logits."""
    start = 0
    for name in names:
        width = adapter._spec(name).n_classes
        yield name, slice(start, start + width)
        start += width


def _output(values, key, shape):
    """values[key] as an array of `shape` (None: any size), or an error naming what is wrong."""
    if key not in values or values[key] is None:
        raise ValueError(f"the model's outputs have no {key!r} (they have {sorted(values)}); "
                         "build the model with adapter.model_config(...)")
    array = np.asarray(values[key])
    if array.ndim != len(shape) or any(n is not None and n != m
                                       for n, m in zip(shape, array.shape)):
        raise ValueError(f"the model's {key!r} output has shape {array.shape}; expected "
                         f"{tuple('any' if n is None else n for n in shape)}")
    return array
