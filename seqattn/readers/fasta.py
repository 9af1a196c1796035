"""FASTA files -> the genome Dataset (:mod:`seqattn.readers.sequences`): streamed line by line,
gzip detected by its magic bytes; indexed regions through pyfaidx (an optional dependency)."""
import gzip
from dataclasses import dataclass

from .sequences import from_sequences


@dataclass(frozen=True)
class FastaRecord:
    """One record of a FASTA file, as :func:`read_fasta` yields it.

    Parameters
    ----------
    name : str
        The header's first word.
    description : str
        The whole header line after ">".
    sequence : str
        The record's sequence lines joined, as written (case kept).
    """

    name: str  # the header's first word
    description: str  # the whole header line after ">"
    sequence: str


def _open_text(path):
    with open(path, "rb") as f:
        gzipped = f.read(2) == b"\x1f\x8b"
    return gzip.open(path, "rt", newline="") if gzipped else open(path, newline="")


def read_fasta(path):
    """Yield the :class:`FastaRecord` of a FASTA file (plain or gzip) one by one, streaming.
    Windows line ends and blank lines are accepted; a record with no sequence lines is yielded
    with an empty sequence (:func:`from_sequences` then says so).

    Parameters
    ----------
    path : str or os.PathLike
        The FASTA file, plain or gzip-compressed (detected by its magic bytes).

    Yields
    ------
    FastaRecord
        The records in file order.
    """
    with _open_text(path) as f:
        header, lines = None, []
        for number, line in enumerate(f, 1):
            line = line.rstrip("\r\n")
            if line.startswith(">"):
                if header is not None:
                    yield _record(header, lines)
                header, lines = line[1:].strip(), []
            elif line.strip() and not line.startswith(";"):
                if header is None:
                    raise ValueError(f"{path}: line {number} holds sequence before the first "
                                     "'>' header; is this a FASTA file?")
                lines.append(line.strip())
        if header is not None:
            yield _record(header, lines)


def _record(header, lines):
    name = header.split()[0] if header.split() else ""
    return FastaRecord(name, header, "".join(lines))


def open_fasta(path, empty="error", **options):
    """The genome Dataset of a FASTA file (plain or gzip).

    Parameters
    ----------
    path : str or path-like
        The FASTA file, plain or gzip-compressed (detected by its magic bytes).
    empty : {"error", "skip"}, default "error"
        What a record without bases does: an error naming it, or it is dropped.
    **options
        Passed to :func:`seqattn.readers.from_sequences` (``position_dim``, ``variable``).
    """
    if empty not in ("error", "skip"):
        raise ValueError(f"empty={empty!r}; expected 'error' or 'skip'")
    records = read_fasta(path)
    if empty == "skip":
        records = (r for r in records if r.sequence)
    return from_sequences(list(records), **options)


def from_faidx(path, regions, **options):
    """The genome Dataset of `regions` ``[(chrom, start, end), ...]`` (0-based half-open) of an
    indexed FASTA, read with pyfaidx (``pip install seqattn[genome]``); records are named
    ``chrom:start-end``.

    Parameters
    ----------
    path : str or os.PathLike
        The FASTA file (pyfaidx reads or builds its ``.fai`` index).
    regions : iterable of (str, int, int)
        ``(chrom, start, end)``, 0-based half-open.
    **options
        Passed to :func:`seqattn.readers.from_sequences` (``position_dim``, ``variable``).

    Returns
    -------
    xarray.Dataset
        The genome Dataset of the regions.
    """
    try:
        import pyfaidx
    except ImportError:
        raise ImportError("from_faidx needs pyfaidx: pip install pyfaidx (or seqattn[genome])") \
            from None
    fasta = pyfaidx.Fasta(str(path), sequence_always_upper=False, as_raw=True)
    records = {f"{chrom}:{start}-{end}": fasta[chrom][start:end] for chrom, start, end in regions}
    return from_sequences(records, **options)
