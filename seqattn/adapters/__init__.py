"""xarray <-> sequences of vectors: adapters, batches, and putting predictions back.

* :class:`GridAdapter` gridded fields, :class:`SignalAdapter` time series and audio (frames as
  raw steps or features computed per frame, e.g. :class:`LogMel`).
* :class:`Batch` what they produce; :class:`BatchIterator` the lazy batches of their
  ``batches(...)``; :class:`ForecastWindows` forecasting samples over a Grid or SignalAdapter
  (history, targets at several leads; its ``batches(...)`` are :class:`ForecastBatches`).
* :func:`predict` a model over a Dataset through any adapter (``predict(model, ds, adapter)``
  calls ``adapter.predict``; lazy and chunk-parallel on dask data for grids, signals and
  forecasts); seqattn models run in evaluation mode (:mod:`seqattn.data.model_call`).
* :class:`GenomeAdapter` DNA as base or k-mer tokens (:mod:`.genome`: FASTA, variants,
  in-silico mutagenesis); :class:`ResidueAdapter` protein and RNA sequences, one token per
  residue (:mod:`.residues`).
* :class:`MoleculeAdapter` molecules and periodic structures as atom tokens with their
  structure (positions, types, cells) for distance-aware attention; its readers
  (:func:`from_ase`, :func:`from_rdkit`, :func:`from_smiles`, SD and SMILES files) live in
  :mod:`seqattn.readers` and are re-exported here.
* :class:`GraphAdapter` graphs as node tokens with pair codes (hops, edge types), predictions
  back per node or per graph.
* :func:`from_rdkit` / :func:`from_smiles` RDKit molecules (ETKDG conformers when they have
  none) as the molecule Dataset (:mod:`.rdkit_molecules`).
* :class:`Normalizer` per-variable statistics; importing this package registers ``ds.seqattn``.
"""
from . import accessor  # noqa: F401  (registers ds.seqattn)
from ..data.batch import Batch, Placement, Template
from ..data.batching import BatchIterator
from .complex import ComplexAdapter
from .forecast import ForecastBatches, ForecastWindows, TargetPutBack
from .frame_features import LogMel
from .genome import GenomeAdapter
from .graph import GraphAdapter, GraphBatches
from .grid import GridAdapter
from .molecule import MoleculeAdapter, MoleculeBatches
from ..data.normalize import Normalizer
from .predict import predict
from ..readers.ase import from_ase  # re-exported: it lived here before 0.2
from ..readers.rdkit_molecules import from_rdkit, from_smiles
from .residues import ResidueAdapter
from .signal import SignalAdapter
from ..data.stitch import PutBack, Stitcher

__all__ = ["Batch", "BatchIterator", "ComplexAdapter", "ForecastBatches", "ForecastWindows",
           "GenomeAdapter", "GraphAdapter",
           "GraphBatches", "GridAdapter", "LogMel", "MoleculeAdapter", "MoleculeBatches",
           "Normalizer", "Placement", "PutBack", "ResidueAdapter", "SignalAdapter", "Stitcher",
           "TargetPutBack",
           "Template", "from_ase", "from_rdkit", "from_smiles", "predict"]
