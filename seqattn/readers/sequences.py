"""DNA strings and DataArrays of bases -> the genome Dataset that :class:`GenomeAdapter` reads.

The genome Dataset:

* variable ``sequence`` (record, position) uint8 base codes (:mod:`seqattn.readers.dna_codes`);
* coords ``record`` (names: the first word of a FASTA header), ``position`` (0 .. L-1, the
  offset in the record), per record ``chrom``, ``start``, ``strand``, ``length``, and per base
  ``genomic_position`` = start + position (NaN where unknown or past the record's end).

A record named ``chrom:start-end`` (as ``bedtools getfasta`` writes, 0-based half-open, optionally
with a ``(+)``/``(-)`` strand; or 1-based inclusive as ``samtools faidx`` writes, told apart by
the record's length) gives ``chrom``, ``start`` and ``strand``; other records have chrom ``""``
and start NaN. FASTA files go through :mod:`seqattn.readers.fasta`.
"""
import re
from pathlib import Path

import numpy as np
import xarray as xr

from .dna_codes import PAD, as_codes, codes_of, letters_of, plain

_REGION = re.compile(r"^(?P<chrom>[^:\s]+):(?P<start>[\d,]+)-(?P<end>[\d,]+)"
                     r"(\((?P<strand>[+-])\))?$")


def parse_region(name, length):
    """(chrom, start, strand) of a ``chrom:start-end`` name, start 0-based; None otherwise.
    ``end - start`` equal to `length` reads it as 0-based half-open, ``end - start + 1`` as
    1-based inclusive; any other length is an error naming the record."""
    match = _REGION.match(name)
    if match is None:
        return None
    start, end = (int(match[g].replace(",", "")) for g in ("start", "end"))
    if end - start == length:
        begin = start
    elif end - start + 1 == length:
        begin = start - 1
    else:
        raise ValueError(f"record {name!r} names a region of {end - start} bases (0-based) or "
                         f"{end - start + 1} (1-based) but holds {length} bases; fix the header "
                         "or rename the record")
    return match["chrom"], begin, match["strand"] or "."


def from_sequences(sequences, names=None, position_dim="position", variable="sequence"):
    """The genome Dataset (see the module docstring) of DNA strings.

    Parameters
    ----------
    sequences : str, list of str, dict or iterable
        One string, a list of strings (named `names`, default ``seq0, seq1, ...``), a dict
        name -> string, or an iterable of FASTA records (objects with ``name`` and
        ``sequence``, as :func:`seqattn.readers.read_fasta` yields) or (name, string) pairs.
    names : list of str, optional
        Record names for a list of strings.
    position_dim, variable : str
        Names of the position dim and of the sequence variable.

    Returns
    -------
    xarray.Dataset
        ``variable`` on (record, `position_dim`). An empty sequence or a repeated name is a
        ValueError naming the record.
    """
    if isinstance(sequences, str):
        sequences = [sequences]
    if isinstance(sequences, dict):
        items = list(sequences.items())
    else:
        items = []
        for item in sequences:
            if isinstance(item, str):
                items.append((None, item))
            elif hasattr(item, "name") and hasattr(item, "sequence"):
                items.append((item.name, item.sequence))
            else:
                items.append(tuple(item))
        if names is not None:
            names = list(names)
            if len(names) != len(items):
                raise ValueError(f"names has {len(names)} entries for {len(items)} sequences")
            items = [(n, s) for n, (_, s) in zip(names, items)]
        items = [(f"seq{i}" if n is None else n, s) for i, (n, s) in enumerate(items)]
    if not items:
        raise ValueError("no sequences given: expected at least one DNA string")
    seen = set()
    for name, seq in items:
        if not isinstance(seq, str):
            raise TypeError(f"record {name!r}: expected a DNA string, got {type(seq).__name__}")
        if not seq:
            raise ValueError(f"record {name!r} is an empty sequence (position 0 holds no base); "
                             "drop it or give it bases")
        if name in seen:
            raise ValueError(f"record name {name!r} appears twice; names must be unique")
        seen.add(name)
    length = max(len(s) for _, s in items)
    codes = np.full((len(items), length), PAD, np.uint8)
    for i, (name, seq) in enumerate(items):
        codes[i, : len(seq)] = codes_of(seq, name)
    regions = [parse_region(name, len(seq)) for name, seq in items]
    return genome_dataset(codes, [n for n, _ in items], [len(s) for _, s in items], regions,
                          position_dim, variable)


def genome_dataset(codes, names, lengths, regions=None, position_dim="position",
                   variable="sequence"):
    """The genome Dataset of base codes (records, L) padded with PAD, record `names`, their
    `lengths`, and `regions` (chrom, 0-based start, strand) or None per record."""
    lengths = np.asarray(lengths, np.int64)
    regions = [None] * len(lengths) if regions is None else regions
    start = np.array([np.nan if r is None else r[1] for r in regions], np.float64)
    offsets = np.arange(codes.shape[1])
    genomic = start[:, None] + offsets
    genomic[offsets[None, :] >= lengths[:, None]] = np.nan
    return xr.Dataset(
        {variable: (("record", position_dim), codes)},
        coords={"record": np.array(names, dtype=object), position_dim: offsets,
                "chrom": ("record", np.array(["" if r is None else r[0] for r in regions],
                                             dtype=object)),
                "start": ("record", start),
                "strand": ("record", np.array(["." if r is None else r[2] for r in regions],
                                              dtype=object)),
                "length": ("record", lengths),
                "genomic_position": (("record", position_dim), genomic)})


def from_dataarray(da, position_dim="position", variable="sequence"):
    """The genome Dataset of a DataArray of bases along `position_dim`: single letters (str or
    bytes) or the uint8 codes of :mod:`seqattn.readers.dna_codes`. A 1-D array is one record
    named after the DataArray; its other coordinates are kept.

    Parameters
    ----------
    da : xarray.DataArray
        Bases along `position_dim`: (position,) for one record or (record, position), letters
        or uint8 codes.
    position_dim : str, default "position"
        The dim the bases run along.
    variable : str, default "sequence"
        The name of the Dataset's variable of base codes.

    Returns
    -------
    xarray.Dataset
        One variable `variable` of uint8 base codes, dims (record, `position_dim`) for a 1-D
        input, else `da`'s dims.
    """
    if not isinstance(da, xr.DataArray):
        raise TypeError(f"expected an xarray.DataArray of bases, got {type(da).__name__}")
    if position_dim not in da.dims:
        raise ValueError(f"the DataArray has dims {da.dims}, not the position dim "
                         f"{position_dim!r}; pass position_dim=")
    if da.ndim == 1:
        da = da.expand_dims(record=[da.name or "sequence"])
    codes = as_codes(da.values, _namer(da, position_dim))
    return da.copy(data=codes).rename(variable).to_dataset()


def _namer(da, position_dim):
    """f(index tuple) -> the record label and position of an element of `da`, for errors."""
    def name(index):
        labels = {d: (plain(da[d].values[i]) if d in da.coords else i)
                  for d, i in zip(da.dims, index)}
        position = labels.pop(position_dim)
        return ", ".join([f"{d} {v!r}" for d, v in labels.items()] + [f"position {position}"])
    return name


def to_strings(ds, variable="sequence"):
    """record name -> DNA string of a genome Dataset (the inverse of :func:`from_sequences`).

    Parameters
    ----------
    ds : xarray.Dataset
        A genome Dataset with a ``record`` dim and coordinate.
    variable : str, default "sequence"
        The variable of base codes, (record, position).

    Returns
    -------
    dict of {str: str}
        Each record's name -> its bases as a string of letters.
    """
    codes = ds[variable].transpose("record", ...).values
    return {str(name): letters_of(row) for name, row in zip(ds["record"].values, codes)}


def as_genome_dataset(sequences, position_dim="position", variable="sequence"):
    """A genome Dataset from a Dataset (returned as it is), a DataArray, a FASTA path (a
    :class:`pathlib.Path`) or what :func:`from_sequences` takes."""
    if isinstance(sequences, xr.Dataset):
        return sequences
    if isinstance(sequences, xr.DataArray):
        return from_dataarray(sequences, position_dim, variable)
    if isinstance(sequences, Path):
        from .fasta import open_fasta

        return open_fasta(sequences, position_dim=position_dim, variable=variable)
    return from_sequences(sequences, position_dim=position_dim, variable=variable)
