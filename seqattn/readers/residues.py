"""Protein, RNA (and DNA) strings -> the Dataset of residues that
:class:`~seqattn.adapters.ResidueAdapter` reads; variants of one wild type written as mutations.

The Dataset: variable ``sequence`` (record, position) uint8 codes of the alphabet
(:mod:`seqattn.readers.alphabets`: residue i is code i, then the unknown and the stop code),
255 past the end of a record shorter than the longest; coords ``record`` (names), ``position``
(0-based), ``length``; attrs ``alphabet`` (its name).
"""
import numpy as np
import xarray as xr

from .alphabets import PROTEIN, alphabet_named
from .dna_codes import PAD
from .mutations import apply_mutations, mutations_between


def from_residues(sequences, alphabet=PROTEIN, names=None, position_dim="position",
                  variable="sequence"):
    """The residue Dataset (module docstring) of `sequences`.

    Parameters
    ----------
    sequences : str, list of str or dict
        One string, a list (named `names`, default ``seq0, seq1, ...``) or a dict name -> string.
    alphabet : Alphabet or str
        ``PROTEIN`` (default), ``RNA`` or ``DNA`` (or their names).
    names : list of str, optional
    position_dim, variable : str

    Returns
    -------
    xarray.Dataset
        An empty sequence or a repeated name is a ValueError naming the record; a letter outside
        the alphabet one naming the record and position.
    """
    alphabet = alphabet_named(alphabet)
    if isinstance(sequences, str):
        sequences = [sequences]
    if isinstance(sequences, dict):
        items = [(str(k), v) for k, v in sequences.items()]
    else:
        sequences = list(sequences)
        names = [f"seq{i}" for i in range(len(sequences))] if names is None else list(names)
        if len(names) != len(sequences):
            raise ValueError(f"names has {len(names)} entries for {len(sequences)} sequences")
        items = list(zip(names, sequences))
    if not items:
        raise ValueError(f"no sequences given: expected at least one {alphabet.name} string")
    if len({n for n, _ in items}) != len(items):
        seen = set()
        repeated = next(n for n, _ in items if n in seen or seen.add(n))
        raise ValueError(f"record name {repeated!r} appears twice; names must be unique")
    rows = []
    for name, sequence in items:
        if isinstance(sequence, str) and not sequence:
            raise ValueError(f"record {name!r} is an empty sequence; drop it or give it residues")
        rows.append(alphabet.codes(sequence, record=name))
    lengths = np.array([len(r) for r in rows], np.int64)
    codes = np.full((len(rows), lengths.max()), PAD, np.uint8)
    for i, row in enumerate(rows):
        codes[i, : len(row)] = row
    return xr.Dataset({variable: (("record", position_dim), codes)},
                      coords={"record": np.array([n for n, _ in items], dtype=object),
                              position_dim: np.arange(codes.shape[1]),
                              "length": ("record", lengths)},
                      attrs={"alphabet": alphabet.name})


def from_mutations(wild_type, mutations, alphabet=PROTEIN, first_position=1, **options):
    """The residue Dataset of the variants of `wild_type` that `mutations` write (one string
    each in :mod:`seqattn.readers.mutations`' notations, ``"WT"`` for the wild type itself): one
    record per variant, named by its mutations as written, with the coordinates ``mutations``
    (the short notation, positions from `first_position`) and ``n_mutations``. `options` go to
    :func:`from_residues`."""
    alphabet = alphabet_named(alphabet)
    mutations = [str(m) for m in mutations]
    variants = [apply_mutations(wild_type, m, alphabet, first_position) for m in mutations]
    ds = from_residues(variants, alphabet, names=mutations, **options)
    short = [mutations_between(wild_type, v, first_position) for v in variants]
    return ds.assign_coords(mutations=("record", np.array(short, dtype=object)),
                            n_mutations=("record", np.array([len(s.split(":")) if s else 0
                                                             for s in short], np.int64)))
