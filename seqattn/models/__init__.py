"""Task models for the three problem shapes, each built from a typed config dataclass:
N -> N (TokenModel), N -> 1 (SequenceModel with a pooling head)."""
from .encoder import EncoderConfig, SequenceEncoder
from .pooling import AttentionPooling, ClassTokenPooling, MaskedMeanPooling
from .sequence_model import SequenceModel, SequenceModelConfig
from .token_model import TokenModel, TokenModelConfig

__all__ = ["AttentionPooling", "ClassTokenPooling", "EncoderConfig", "MaskedMeanPooling",
           "SequenceEncoder", "SequenceModel", "SequenceModelConfig", "TokenModel",
           "TokenModelConfig"]
