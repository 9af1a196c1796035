"""What a target of structures is, declared at ``MoleculeAdapter.fit(ds, targets=...)``, and how
its values are normalized for the model and put back in physical units.

A target's **kind** says how the model produces it:

* ``"energy"``: one value per structure (molecule,), extensive (the model sums over atoms), and
  the potential whose minus gradient the ``"forces"`` target is;
* ``"forces"``: (molecule, atom, xyz), minus the energy's gradient with respect to the
  positions (needs an ``"energy"``);
* ``"extensive"``: one value (or several: extra dims) per structure that grows with its size,
  like an energy: the model sums per-atom contributions;
* ``"intensive"``: per structure, does not grow with size (a solubility, a density, a class):
  the model averages over atoms;
* ``"atom"``: per atom (molecule, atom, ...), values or classes.

Which of extensive and intensive a per-structure value is, is physics the data do not show, so it
is declared, never guessed: ``targets={"solubility": "intensive"}``. A name given alone (a str or
a list) is accepted where the data decide: per-atom variables are ``"atom"``, per-structure
class labels ``"intensive"`` (their logits are averaged). Classes are the targets that
:mod:`seqattn.data.targets` reads as classes (integer, bool or text labels, or declared ones).

Normalization (fitted on the training structures): extensive values ``(y - sum_i
reference[element_i]) / scale``, references by least squares on the compositions, ``scale`` the
root mean square force component when the target is the energy of given forces (which are then
divided by the same scale, F = -dE/dx), else the standard deviation of the residual per atom;
intensive values and per-atom values ``(y - mean) / std``.
"""
import numpy as np

from .molecule_layout import ATOM, MOLECULE

KINDS = ("energy", "forces", "extensive", "intensive", "atom")


def declared_kinds(targets):
    """{name: kind or None (to be read from the data)} of a ``targets`` argument."""
    if targets is None:
        return {}
    if isinstance(targets, str):
        return {targets: None}
    if isinstance(targets, dict):
        for name, kind in targets.items():
            if kind not in KINDS:
                raise ValueError(f"targets[{name!r}] = {kind!r}; expected one of {KINDS} (the "
                                 "target's kind, see seqattn.adapters.molecule_targets)")
        kinds = dict(targets)
    else:
        try:
            names = list(targets)
        except TypeError:
            raise TypeError(f"targets is a {type(targets).__name__}; expected a variable name, a "
                            "list of names or a dict {name: kind}") from None
        if len(set(names)) != len(names):
            raise ValueError(f"targets names a variable twice: {names}")
        kinds = {name: None for name in names}
    for name in kinds:
        if not isinstance(name, str):
            raise TypeError(f"targets holds {name!r}; expected variable names (str)")
    energies = [n for n, k in kinds.items() if k == "energy"]
    if len(energies) > 1:
        raise ValueError(f"targets declares several energies {energies}; at most one target "
                         "is the energy whose gradient the forces are")
    forces = [n for n, k in kinds.items() if k == "forces"]
    if forces and not energies:
        raise ValueError(f"targets declares forces {forces[0]!r} but no energy: forces are minus "
                         "the gradient of an energy, declare it too, e.g. targets={'energy': "
                         f"'energy', {forces[0]!r}: 'forces'}}")
    if len(forces) > 1:
        raise ValueError(f"targets declares several forces {forces}; expected one")
    return kinds


def target_layout(ds, name, kind, is_classes):
    """The layout entry of target `name` of `ds`: {"kind", "per_atom", "dims", "shape"}; `kind`
    None is read from the data where they decide (module docstring)."""
    if name not in ds.data_vars:
        raise ValueError(f"target {name!r} is not in the dataset (it has "
                         f"{sorted(map(str, ds.data_vars))})")
    dims = ds[name].dims
    if dims[:1] != (MOLECULE,):
        raise ValueError(f"target {name!r} has dims {dims}; expected (molecule, ...) per "
                         "structure or (molecule, atom, ...) per atom")
    per_atom = ATOM in dims
    extra = [d for d in dims if d not in (MOLECULE, ATOM)]
    if kind is None:
        if per_atom:
            kind = "atom"
        elif is_classes:
            kind = "intensive"
        else:
            raise ValueError(f"target {name!r} has one value per structure: declare whether it "
                             f"grows with the structure's size, targets={{{name!r}: "
                             "'extensive'}} (summed over atoms, like an energy) or "
                             f"{{{name!r}: 'intensive'}} (averaged over atoms, like a "
                             "solubility); 'energy' for the energy of given forces")
    if per_atom != (kind in ("atom", "forces")):
        raise ValueError(f"target {name!r} has dims {dims}, but kind {kind!r} is for "
                         f"{'per-atom' if kind in ('atom', 'forces') else 'per-structure'} "
                         "targets")
    if kind == "energy" and extra:
        raise ValueError(f"energy {name!r} has dims {dims}; expected (molecule,): one number "
                         "per structure")
    if kind == "forces" and extra != ["xyz"]:
        raise ValueError(f"forces {name!r} have dims {dims}; expected (molecule, atom, xyz)")
    if is_classes:
        if kind in ("energy", "forces", "extensive"):
            raise ValueError(f"target {name!r} holds classes, which cannot be {kind!r}: class "
                             f"logits are averaged over atoms; declare it 'intensive' or leave "
                             "its kind out")
        if extra:
            raise ValueError(f"class target {name!r} has dims {dims}; expected one label per "
                             "structure (molecule,) or per atom (molecule, atom)")
    return {"kind": kind, "per_atom": per_atom, "dims": extra,
            "shape": [int(ds.sizes[d]) for d in extra]}


def extensive_statistics(y, counts, scale):
    """{"reference", "scale"} of an extensive target: y (M, K) values (NaN missing), counts (M,
    T) atoms per element type; `scale` given (the force scale) or None."""
    reference = np.zeros((counts.shape[1], y.shape[1]))
    scales = np.ones(y.shape[1])
    atoms = counts.sum(axis=1)
    for k in range(y.shape[1]):
        known = np.isfinite(y[:, k])
        reference[:, k] = np.linalg.lstsq(counts[known], y[known, k], rcond=None)[0]
        residual = (y[known, k] - counts[known] @ reference[:, k]) / atoms[known]
        scales[k] = scale if scale is not None else (float(np.std(residual)) or 1.0)
    return {"reference": reference.tolist(), "scale": scales.tolist()}


def intensive_statistics(y):
    """{"mean", "scale"} of an intensive target: y (M, K), NaN missing."""
    scale = np.nanstd(y, axis=0)
    return {"mean": np.nanmean(y, axis=0).tolist(),
            "scale": np.where(scale > 0, scale, 1.0).tolist()}


def structure_offset(statistics, types, pad):
    """(B, K) what normalization subtracts from a per-structure target: the sum of the atoms'
    references (extensive) or the mean (intensive); types (B, N), pad (B, N)."""
    if "mean" in statistics:
        return np.broadcast_to(np.asarray(statistics["mean"]), (len(types), len(
            statistics["mean"])))
    reference = np.asarray(statistics["reference"])  # (T, K)
    return np.where(pad[..., None], 0.0, reference[types]).sum(axis=1)
