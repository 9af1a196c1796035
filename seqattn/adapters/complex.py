"""ComplexAdapter: protein-ligand complexes (:mod:`seqattn.readers.complexes`) as ligand-atom
tokens with their pocket, for :class:`seqattn.models.ComplexModel`; predictions back on the
``complex`` dim.

A ligand atom's token is the one-hot of its element among ``ligand_elements`` (last column:
any other element); a pocket atom's is the one-hot of its element among ``pocket_elements``
and of its residue among ``residues`` (each with an "other" column). Element indices are the
atom types of the distance tables. A value target is standardized with the mean and standard
deviation of the complexes ``fit`` saw (stored with the adapter) and put back in its units.

For the model's linear path (:class:`seqattn.models.ComplexModelConfig`): ``group`` names a
per-complex coordinate (a protein target) whose values ``fit`` records, one weight set each;
``fingerprint_bits`` > 0 adds the ligand's Morgan fingerprint, computed by RDKit from the
``smiles`` coordinate and split over the pose's atoms through ``ligand_smiles_atom`` (each bit
shared evenly by the atoms whose environments set it, so that a sum over the atoms gives the
fingerprint).
"""
import numpy as np
import xarray as xr

from ..autodiff import unwrap
from ..data.batch import Batch
from ..data.checks import require_variables
from ..data.persistence import Persistable
from ..data.protocol import Adapter, Batches
from ..data.targets import class_indices, class_predictions, describe_targets
from ..models.complex import ComplexModelConfig, ComplexStructure
from ..nn.placement import moved

COMPLEX = "complex"
LIGAND_ATOM = "ligand_atom"
POCKET_ATOM = "pocket_atom"
LIGAND_ELEMENTS = ("C", "N", "O", "S", "P", "F", "Cl", "Br", "I")
POCKET_ELEMENTS = ("C", "N", "O", "S")
RESIDUES = ("ALA", "ARG", "ASN", "ASP", "CYS", "GLN", "GLU", "GLY", "HIS", "ILE", "LEU", "LYS",
            "MET", "PHE", "PRO", "SER", "THR", "TRP", "TYR", "VAL", "HOH")
VARIABLES = ("ligand_element", "ligand_xyz", "pocket_element", "pocket_residue", "pocket_xyz")
FINGERPRINT_VARIABLES = ("smiles", "ligand_smiles_atom")


def _indices(names, vocabulary):
    """Index of each name in `vocabulary`, len(vocabulary) ("other") for the rest, -1 for ""."""
    lookup = {v: i for i, v in enumerate(vocabulary)}
    flat = np.asarray(names).ravel()
    out = np.array([-1 if n == "" else lookup.get(str(n), len(vocabulary)) for n in flat])
    return out.reshape(np.shape(names))


def fingerprint_shares(smiles, atoms, bits, radius):
    """(len(atoms), bits): each atom's share of the Morgan fingerprint of `smiles`, the atoms
    given by their indices in its RDKit molecule; the column sums are the fingerprint."""
    from rdkit import Chem
    from rdkit.Chem import rdFingerprintGenerator

    mol = Chem.MolFromSmiles(str(smiles))
    if mol is None:
        raise ValueError(f"RDKit cannot read the SMILES {smiles!r}")
    output = rdFingerprintGenerator.AdditionalOutput()
    output.AllocateBitInfoMap()
    rdFingerprintGenerator.GetMorganGenerator(radius=radius, fpSize=bits).GetFingerprintAsNumPy(
        mol, additionalOutput=output)
    shares = np.zeros((mol.GetNumAtoms(), bits))
    for bit, environments in output.GetBitInfoMap().items():
        for atom, _ in environments:
            shares[atom, bit] += 1.0 / len(environments)
    return shares[np.asarray(atoms)]


def _one_hot(index, width):
    out = np.zeros(index.shape + (width,), dtype=np.float32)
    present = index >= 0
    out[present, index[present]] = 1.0
    return out


class ComplexBatches(Batches):
    """Batches of complexes (see :class:`seqattn.data.protocol.Batches`)."""

    def __init__(self, adapter, ds, targets, **options):
        super().__init__(**options)
        self.adapter, self.ds, self.targets = adapter, ds, targets
        self.n_samples = ds.sizes[COMPLEX]

    def collate(self, indices):
        return self.adapter.collate(self.ds, np.asarray(indices), self.targets)


class ComplexAdapter(Adapter, Persistable):
    """Protein-ligand complexes <-> ligand tokens with their pocket; see the module docstring.

    Parameters
    ----------
    ligand_elements : sequence of str
        Ligand elements with their own type; others share one.
    pocket_elements : sequence of str
        Pocket elements with their own type (metals and the rest share one).
    residues : sequence of str
        Pocket residue names with their own feature column.
    dtype : str
        The tokens' and targets' float dtype.
    group : str or None
        A per-complex coordinate (e.g. ``"target"``) whose values get their own linear path.
    fingerprint_bits : int
        Morgan fingerprint bits for the linear path (0: none; needs ``smiles`` and
        ``ligand_smiles_atom``, which the readers give).
    fingerprint_radius : int
        The fingerprint's radius in bonds.
    """

    def __init__(self, *, ligand_elements=LIGAND_ELEMENTS, pocket_elements=POCKET_ELEMENTS,
                 residues=RESIDUES, dtype="float32", group=None, fingerprint_bits=0,
                 fingerprint_radius=2):
        for name, value in (("ligand_elements", ligand_elements),
                            ("pocket_elements", pocket_elements), ("residues", residues)):
            if isinstance(value, str) or not len(value) or len(set(value)) != len(value):
                raise ValueError(f"{name} = {value!r}; expected a list of distinct names")
        self.ligand_elements = tuple(ligand_elements)
        self.pocket_elements = tuple(pocket_elements)
        self.residues = tuple(residues)
        self.dtype = np.dtype(dtype)
        for name, value, least in (("fingerprint_bits", fingerprint_bits, 0),
                                   ("fingerprint_radius", fingerprint_radius, 0)):
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) \
                    or value < least:
                raise ValueError(f"{name} = {value!r}; expected a whole number >= {least}")
        if group is not None and not isinstance(group, str):
            raise ValueError(f"group = {group!r}; expected the name of a per-complex coordinate "
                             "or None")
        self.group = group
        self.fingerprint_bits = int(fingerprint_bits)
        self.fingerprint_radius = int(fingerprint_radius)
        self.target_scale = {}
        self.groups = ()

    @property
    def fitted(self):
        return bool(self.target_specs)

    @property
    def ligand_types(self):
        return len(self.ligand_elements) + 1

    @property
    def pocket_types(self):
        return len(self.pocket_elements) + 1

    def sample_dims(self, ds):
        return (COMPLEX,)

    def check(self, ds):
        """Raise an error naming what is missing or malformed in `ds`."""
        if not isinstance(ds, xr.Dataset):
            raise TypeError(f"ds must be the complex Dataset (seqattn.readers.complexes), got "
                            f"{type(ds).__name__}")
        require_variables(ds, list(VARIABLES), "variable")
        for name in VARIABLES:
            if ds[name].dims[0] != COMPLEX:
                raise ValueError(f"{name} has dims {ds[name].dims}; expected {COMPLEX!r} first "
                                 "(the complex Dataset of seqattn.readers.complexes)")
        for prefix in ("ligand", "pocket"):
            present = np.asarray(ds[f"{prefix}_element"].values) != ""
            xyz = np.asarray(ds[f"{prefix}_xyz"].values)
            if not np.isfinite(xyz[present]).all():
                raise ValueError(f"{prefix}_xyz has non-finite positions for atoms that "
                                 f"{prefix}_element names; every atom needs a position")
        empty = np.flatnonzero((np.asarray(ds["ligand_element"].values) != "").sum(axis=1) == 0)
        if empty.size:
            raise ValueError(f"complexes {empty[:5].tolist()} have no ligand atom")
        needed = ([self.group] if self.group is not None else []) \
            + (list(FINGERPRINT_VARIABLES) if self.fingerprint_bits else [])
        for name in needed:
            if name not in ds.variables:
                raise ValueError(f"{name!r} is not in the complex Dataset (a variable or "
                                 f"coordinate); group = {self.group!r} and fingerprint_bits = "
                                 f"{self.fingerprint_bits} need it (the readers give smiles and "
                                 "ligand_smiles_atom)")
            if ds[name].dims[0] != COMPLEX:
                raise ValueError(f"{name} has dims {ds[name].dims}; expected {COMPLEX!r} first")

    # ---- fitted state ----------------------------------------------------------------------

    def _fit(self, ds, targets):
        self.check(ds)
        if targets is None:
            raise ValueError("ComplexAdapter.fit needs targets= (the measured value to learn, "
                             "e.g. targets='affinity')")
        names = [targets] if isinstance(targets, str) else list(targets)
        if len(names) != 1:
            raise ValueError(f"targets = {targets!r}; ComplexAdapter learns one target per "
                             "complex")
        require_variables(ds, names, "target")
        spec = describe_targets(ds[names[0]], names[0])
        scale = {}
        if spec.kind == "values":
            values = np.asarray(ds[names[0]].values, dtype=np.float64)
            values = values[np.isfinite(values)]
            if values.size == 0:
                raise ValueError(f"target {names[0]!r} has no finite value in the complexes "
                                 "fit saw")
            scale = {"mean": float(values.mean()), "std": float(values.std() or 1.0)}
        self.target_specs, self.target_scale = (spec,), scale
        self.groups = () if self.group is None else \
            tuple(sorted({str(v) for v in np.asarray(ds[self.group].values)}))

    def get_state(self):
        return {**super().get_state(), "target_scale": self.target_scale,
                "groups": list(self.groups)}

    def set_state(self, state):
        super().set_state(state)
        self.target_scale = dict(state.get("target_scale", {}))
        self.groups = tuple(state.get("groups", ()))

    def _group_index(self, ds):
        """Each complex's index among the fitted groups (all 0 without a group)."""
        if self.group is None:
            return np.zeros(ds.sizes[COMPLEX], dtype=np.int64)
        lookup = {g: i for i, g in enumerate(self.groups)}
        names = [str(v) for v in np.asarray(ds[self.group].values)]
        unknown = sorted(set(names) - set(lookup))
        if unknown:
            raise ValueError(f"group {self.group!r} has values {unknown[:5]} that fit did not "
                             f"see (it saw {list(self.groups)}); its linear path has no weights "
                             "for them")
        return np.asarray([lookup[n] for n in names], dtype=np.int64)

    # ---- batches -----------------------------------------------------------------------------

    def batches(self, ds, *, targets=None, where=None, batch_size=32, shuffle=False, seed=0,
                drop_last=False):
        """:class:`ComplexBatches` of the complexes `where` selects; ``targets`` default to the
        fitted target when `ds` has it (else batches without targets)."""
        self.require_fitted("batches")
        self.check(ds)
        spec = self.target_specs[0]
        if targets is not None and targets != spec.name:
            raise ValueError(f"targets = {targets!r}, but this adapter was fitted on "
                             f"{spec.name!r}; fit it again to learn another target")
        chosen = self.select(ds, where)
        with_targets = spec.name in chosen.data_vars
        return ComplexBatches(self, chosen, spec if with_targets else None,
                              batch_size=batch_size, shuffle=shuffle, seed=seed,
                              drop_last=drop_last)

    def collate(self, ds, indices, spec):
        """The Batch of complexes `indices` of `ds` (in that order)."""
        part = ds.isel({COMPLEX: indices})
        ligand = _indices(part["ligand_element"].values, self.ligand_elements)
        pocket = _indices(part["pocket_element"].values, self.pocket_elements)
        residue = _indices(part["pocket_residue"].values, self.residues)
        residue = np.where(pocket >= 0, np.where(residue >= 0, residue, len(self.residues)), -1)
        n = int(max((ligand >= 0).sum(axis=1).max(), 1))
        m = int(max((pocket >= 0).sum(axis=1).max(), 1))
        ligand, pocket, residue = ligand[:, :n], pocket[:, :m], residue[:, :m]
        mask = ligand < 0
        pocket_mask = pocket < 0
        tokens = _one_hot(ligand, self.ligand_types).astype(self.dtype)
        pocket_tokens = np.concatenate([_one_hot(pocket, self.pocket_types),
                                        _one_hot(residue, len(self.residues) + 1)], axis=-1)
        group = _one_hot(np.where(mask, -1, self._group_index(part)[:, None]),
                         max(len(self.groups), 1))
        structure = ComplexStructure(
            positions=np.nan_to_num(part["ligand_xyz"].values[:, :n]).astype(self.dtype),
            types=np.maximum(ligand, 0).astype(np.int32),
            key_positions=np.nan_to_num(part["pocket_xyz"].values[:, :m]).astype(self.dtype),
            key_types=(np.maximum(pocket, 0) + self.ligand_types).astype(np.int32),
            pocket_tokens=pocket_tokens.astype(self.dtype), pocket_mask=pocket_mask,
            group=group.astype(self.dtype),
            fingerprint=self._fingerprints(part, n) if self.fingerprint_bits else None)
        targets = None if spec is None else self._encode_targets(part[spec.name].values, spec)
        return Batch(tokens=tokens, key_padding_mask=mask, valid=~mask[..., None],
                     coords={}, placement=np.asarray(indices), targets=targets,
                     structure=structure)

    def _fingerprints(self, part, n):
        """(B, n, fingerprint_bits): each ligand atom's shares of its fingerprint's bits."""
        out = np.zeros((part.sizes[COMPLEX], n, self.fingerprint_bits), dtype=self.dtype)
        order = np.asarray(part["ligand_smiles_atom"].values)[:, :n]
        for i, smiles in enumerate(np.asarray(part["smiles"].values)):
            atoms = order[i][order[i] >= 0]
            out[i, :len(atoms)] = fingerprint_shares(smiles, atoms, self.fingerprint_bits,
                                                     self.fingerprint_radius)
        return out

    def _encode_targets(self, values, spec):
        if spec.kind == "classes":
            return class_indices(spec, values)
        scaled = (np.asarray(values, dtype=np.float64) - self.target_scale["mean"]) \
            / self.target_scale["std"]
        return scaled.astype(self.dtype)[:, None]

    # ---- back on the complexes ---------------------------------------------------------------

    def decode(self, batch, values):
        """Model outputs (B, out) for `batch` as a Dataset on its complexes: the target in its
        units, or its predicted class and ``<target>_probability``."""
        self.require_fitted("decode")
        spec = self.target_specs[0]
        values = np.asarray(values)
        index = np.asarray(batch.placement)
        coords = {COMPLEX: index}
        if spec.kind == "classes":
            return xr.Dataset(class_predictions(spec, values, (COMPLEX,), coords))
        if values.ndim != 2 or values.shape[1] != 1:
            raise ValueError(f"values have shape {values.shape}; expected (B, 1): one value per "
                             "complex")
        physical = values[:, 0] * self.target_scale["std"] + self.target_scale["mean"]
        return xr.Dataset({spec.name: xr.DataArray(physical.astype(self.dtype), dims=(COMPLEX,),
                                                   coords=coords, attrs=spec.attrs)})

    def model_config(self, task="regression", **options):
        """The :class:`ComplexModelConfig` that reads these batches (`options`: its other
        fields, e.g. d_model, num_layers)."""
        self.require_fitted("model_config")
        spec = self.target_specs[0]
        if (task == "classification") != (spec.kind == "classes"):
            raise ValueError(f"task = {task!r}, but target {spec.name!r} holds "
                             f"{'classes' if spec.kind == 'classes' else 'values'}")
        out = spec.n_classes if spec.kind == "classes" else 1
        return ComplexModelConfig(
            ligand_features=self.ligand_types, pocket_features=self.pocket_types
            + len(self.residues) + 1, ligand_types=self.ligand_types,
            pocket_types=self.pocket_types, out_features=out, dtype=self.dtype.name,
            fingerprint_bits=self.fingerprint_bits, groups=max(len(self.groups), 1), **options)

    def set_linear_path(self, model, coefficients, intercepts):
        """Set `model`'s linear path to per-group linear models in the target's units, e.g.
        ridge regressions on the fingerprint: ``coefficients`` (groups, fingerprint_bits) and
        ``intercepts`` (groups,), the groups in the order of ``self.groups``."""
        self.require_fitted("set_linear_path")
        scale = self.target_scale
        if not scale:
            raise ValueError("set_linear_path needs a value target (the linear models predict it)")
        coefficients = np.asarray(coefficients, dtype=np.float64)
        intercepts = np.asarray(intercepts, dtype=np.float64)
        model.set_linear_path(coefficients / scale["std"],
                              (intercepts - scale["mean"]) / scale["std"])

    def predict(self, model, ds, *, where=None, batch_size=64):
        """`model`'s predictions for the complexes `where` selects, on ``ds``'s complex dim."""
        from ..data.model_call import ModelCall

        run = ModelCall(model)
        chosen = self.select(ds, where)
        parts = [self.decode(batch, run(batch)) for batch in
                 self.batches(chosen, batch_size=batch_size)]
        out = xr.concat(parts, dim=COMPLEX)
        out = out.assign_coords({COMPLEX: chosen[COMPLEX].values if COMPLEX in chosen.coords
                                 else np.arange(chosen.sizes[COMPLEX])})
        extra = {k: v for k, v in chosen.coords.items() if v.dims == (COMPLEX,)}
        return out.assign_coords(extra)

    def contributions(self, model, ds, *, where=None, batch_size=64):
        """Per-ligand-atom terms of the prediction (complex, ligand_atom), in the target's units
        per atom (their sum over a complex is its prediction minus the fitted mean)."""
        from ..data.model_call import evaluation_mode

        self.require_fitted("contributions")
        spec = self.target_specs[0]
        if spec.kind != "values":
            raise ValueError("contributions are defined for a value target, not classes")
        chosen = self.select(ds, where)
        out = np.full(chosen["ligand_element"].shape, np.nan, dtype=np.float32)
        with evaluation_mode(model):
            for batch in self.batches(chosen, batch_size=batch_size):
                terms = model.contributions(batch.tokens, batch.key_padding_mask,
                                            batch.structure.on(model.device, model.dtype))
                terms = moved(unwrap(terms), "cpu")[..., 0] * self.target_scale["std"]
                rows = np.asarray(batch.placement)
                n = terms.shape[1]
                out[rows, :n] = np.where(batch.key_padding_mask, np.nan, terms)
        return xr.DataArray(out, dims=(COMPLEX, LIGAND_ATOM),
                            coords={k: v for k, v in chosen.coords.items()
                                    if v.dims == (COMPLEX,)},
                            attrs={"units": spec.attrs.get("units", "")})
