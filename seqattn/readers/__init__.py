"""Readers: files and objects of each domain's own tools (RDKit molecules, SMILES) turned into the
Dataset that the domain's adapter reads. Every other call of the protocol takes that Dataset."""
from .rdkit_molecules import from_rdkit, from_smiles

__all__ = ["from_rdkit", "from_smiles"]
