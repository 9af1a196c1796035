"""Task models for the three problem shapes: N -> N (TokenModel)."""
from .encoder import EncoderConfig, SequenceEncoder
from .token_model import TokenModel, TokenModelConfig

__all__ = ["EncoderConfig", "SequenceEncoder", "TokenModel", "TokenModelConfig"]
