"""Task models for the three problem shapes, each built from a typed config dataclass:
N -> N (TokenModel), N -> 1 (SequenceModel with a pooling head), N -> N' (Seq2SeqModel, with
cached autoregressive ``generate`` and ``rollout``); GraphModel for nodes and graphs;
MoleculeModel (atoms with distance-aware attention: per-atom outputs, extensive per-structure
ones, forces)."""
from .build import build
from .complex import ComplexModel, ComplexModelConfig, ComplexStructure
from .dna import StrandSymmetric
from .encoder import EncoderConfig, SequenceEncoder
from .generation import generate, rollout
from .graph import GraphModel, GraphModelConfig
from .molecule import MoleculeModel, MoleculeModelConfig
from .pooling import AttentionPooling, ClassTokenPooling, MaskedMeanPooling
from .seq2seq import Seq2SeqConfig, Seq2SeqModel
from .sequence_model import SequenceModel, SequenceModelConfig
from .token_model import TokenModel, TokenModelConfig

__all__ = ["AttentionPooling", "ClassTokenPooling", "ComplexModel", "ComplexModelConfig",
           "ComplexStructure", "EncoderConfig", "GraphModel",
           "GraphModelConfig", "MaskedMeanPooling", "MoleculeModel", "MoleculeModelConfig",
           "Seq2SeqConfig", "Seq2SeqModel", "SequenceEncoder", "SequenceModel",
           "SequenceModelConfig", "StrandSymmetric", "TokenModel", "TokenModelConfig", "build",
           "generate", "rollout"]
