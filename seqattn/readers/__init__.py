"""Readers: files and objects of each domain's own tools (RDKit molecules, SMILES) turned into the
Dataset that the domain's adapter reads. Every other call of the protocol takes that Dataset."""
from .complexes import complexes_from_atoms, read_complex, read_docked_complexes
from .graphs import from_networkx, graph_dataset
from .ase import from_ase, read_structures
from .molecule_files import read_sdf, read_smiles
from .rdkit_molecules import from_rdkit, from_smiles
from .fasta import FastaRecord, from_faidx, open_fasta, read_fasta
from .sequences import from_dataarray, from_sequences, to_strings
from .series_files import read_series_file

__all__ = ["from_networkx", "from_ase", "from_rdkit", "from_smiles", "read_sdf",
           "read_smiles", "read_structures", "graph_dataset"]
__all__ += ["FastaRecord", "from_dataarray", "from_faidx", "from_sequences", "open_fasta",
            "read_fasta", "to_strings"]
__all__ += ["complexes_from_atoms", "read_complex", "read_docked_complexes"]
__all__ += ["read_series_file"]
