"""SD files and SMILES files, read by path through RDKit's own suppliers, as the molecule Dataset
of :mod:`seqattn.readers.rdkit_molecules` (same layout, conformer and failure options). RDKit is
optional: ``pip install rdkit`` (or ``seqattn[molecules]``)."""
import gzip
from pathlib import Path

from .rdkit_molecules import _rdkit, from_rdkit


def _existing(path, what):
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"path={str(path)!r} is not a file; expected {what}")
    return path


def _records(supplier):
    """Every record of an RDKit supplier (None where unreadable), by its own iteration:
    ``list(SmilesMolSupplier)`` gives an empty list."""
    return [mol for mol in supplier]


def read_sdf(path, *, properties=(), remove_hydrogens=True, **options):
    """The molecule Dataset of an SD file (``.sdf``, or gzipped ``.sdf.gz``).

    Parameters
    ----------
    path : str or path-like
        The SD file; a record RDKit cannot read is a failure (``on_failure``).
    properties : sequence of str
        SD fields read as numbers, one (molecule,) variable each, NaN where a record lacks it.
    remove_hydrogens : bool
        Drop the file's explicit hydrogens (RDKit's default); False keeps them as atoms, at
        their positions in the file.
    **options
        ``conformers``, ``seed``, ``add_hydrogens``, ``atom_features``, ``on_failure``: as for
        :func:`~seqattn.readers.rdkit_molecules.from_rdkit`. A record's own 3-D coordinates
        are its conformer (``conformers="auto"``).

    Returns
    -------
    xarray.Dataset
        The molecule Dataset; ``molecule`` is each record's index in the file.
    """
    Chem, _ = _rdkit()
    path = _existing(path, "an SD file (.sdf or .sdf.gz)")
    if path.suffix == ".gz":
        with gzip.open(path) as stream:
            records = _records(Chem.ForwardSDMolSupplier(stream, removeHs=remove_hydrogens))
    else:
        records = _records(Chem.SDMolSupplier(str(path), removeHs=remove_hydrogens))
    return from_rdkit(records, properties=properties, **options)


def read_smiles(path, *, smiles_column=0, name_column=1, delimiter=" ", title_line=False,
                properties=(), **options):
    """The molecule Dataset of a SMILES file (one molecule a line; RDKit's SmilesMolSupplier),
    with ETKDG conformers.

    Parameters
    ----------
    path : str or path-like
        The SMILES file; a SMILES RDKit cannot parse is a failure (``on_failure``).
    smiles_column, name_column : int
        Indices of the columns with the SMILES and the molecule's name (-1: none).
    delimiter : str
        What separates columns (``" "``, ``"\\t"``, ``","``; quoted fields are not understood:
        read a CSV with pandas and pass its column to
        :func:`~seqattn.readers.rdkit_molecules.from_smiles`).
    title_line : bool
        Whether the first line names the columns; those names are the ``properties`` to ask for.
    properties : sequence of str
        Columns (named in the title line) read as numbers, one (molecule,) variable each.
    **options
        ``seed``, ``add_hydrogens``, ``atom_features``, ``on_failure``: as for
        :func:`~seqattn.readers.rdkit_molecules.from_smiles`.

    Returns
    -------
    xarray.Dataset
        The molecule Dataset; ``molecule`` is each line's index (after the title line).
    """
    Chem, _ = _rdkit()
    path = _existing(path, "a SMILES file (one SMILES a line)")
    if properties and not title_line:
        raise ValueError(f"properties={list(properties)} name columns, but title_line=False: "
                         "give the file a title line and pass title_line=True")
    supplier = Chem.SmilesMolSupplier(str(path), delimiter=delimiter,
                                      smilesColumn=smiles_column, nameColumn=name_column,
                                      titleLine=title_line)
    return from_rdkit(_records(supplier), properties=properties, conformers="embed", **options)
