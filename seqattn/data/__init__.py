"""What every domain shares between a Dataset and a model: the :class:`Batch` adapters produce,
lazy batching over a Dataset, normalization statistics, coordinates, putting values back on the
source's coordinates (stitching and blending), and calling a model the way ``predict`` does.
Domain adapters (:mod:`seqattn.adapters`) build on these; nothing here knows a domain."""
from .batch import Batch, Placement, Template
from .batching import BatchIterator
from .normalize import Normalizer
from .stitch import PutBack, Stitcher

__all__ = ["Batch", "BatchIterator", "Normalizer", "Placement", "PutBack", "Stitcher", "Template"]
