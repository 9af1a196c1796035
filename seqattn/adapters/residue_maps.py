"""Single-mutant maps: the values of the variants of one wild type (measured scores, or a
model's predictions from ``seqattn.predict``) laid out as a (position, residue) DataArray, the
heat map of a deep mutational scan."""
import numpy as np
import xarray as xr

from ..readers.alphabets import PROTEIN, alphabet_named
from ..readers.mutations import parse_mutations


def single_mutant_map(values, wild_type, alphabet=PROTEIN, first_position=1,
                      mutations="mutations"):
    """The (position, residue) map of the single mutants among `values`.

    Parameters
    ----------
    values : xarray.DataArray
        One value per variant on one dim, with the coordinate `mutations` (the short notation
        that :func:`seqattn.readers.residues.from_mutations` adds; ``""`` for the wild type).
    wild_type : str
    alphabet : Alphabet or str
    first_position : int
        The number of the wild type's first residue in the notation.
    mutations : str
        The name of the coordinate that holds each variant's mutations.

    Returns
    -------
    xarray.DataArray
        (position, residue): position numbered from `first_position` with the coordinate
        ``wild_type`` (its residue there), residue the alphabet's residues then its stop. A
        cell holds the value of that single mutant (the mean where it appears more than once),
        a wild-type cell the value of the wild type itself (NaN without one), NaN elsewhere.
        Variants with two or more mutations are left out.
    """
    alphabet = alphabet_named(alphabet)
    if not isinstance(values, xr.DataArray) or values.ndim != 1:
        raise TypeError("values must be a 1-D DataArray, one value per variant (a variable of "
                        "seqattn.predict's output or of the variants' Dataset)")
    if mutations not in values.coords:
        raise ValueError(f"values have no coordinate {mutations!r} (the variants' mutations, "
                         "which from_mutations adds); pass mutations=<its name>")
    residues = alphabet.residues + alphabet.stop[:1]
    total = np.zeros((len(wild_type), len(residues)))
    count = np.zeros_like(total)
    for text, value in zip(values[mutations].values, np.asarray(values.values, np.float64)):
        text = str(text)
        changes = parse_mutations(text, alphabet, first_position)
        if len(changes) > 1 or np.isnan(value):
            continue
        if changes:
            m = changes[0]
            found = wild_type[m.index].upper() if m.index < len(wild_type) else None
            if found != m.wild or m.mutant not in residues:
                raise ValueError(f"variant {text!r} has no cell in the map: the wild type holds "
                                 f"{found!r} at position {m.index + first_position} (the map's "
                                 f"residues: {residues})")
            cells = [(m.index, residues.index(m.mutant))]
        else:
            cells = [(i, residues.index(w)) for i, w in enumerate(wild_type.upper())]
        for cell in cells:
            total[cell] += value
            count[cell] += 1
    out = np.where(count > 0, total / np.maximum(count, 1), np.nan)
    return xr.DataArray(
        out, dims=("position", "residue"),
        coords={"position": np.arange(len(wild_type)) + first_position,
                "residue": list(residues),
                "wild_type": ("position", list(wild_type.upper()))},
        name=values.name, attrs=dict(values.attrs))
