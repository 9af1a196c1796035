"""Layers that define forward only (differentiated by ``seqattn.autodiff``), on CPU and GPU.

Parameter names and shapes follow torch.nn, so state dicts move between the two.
"""
from .activations import GELU, ReLU, SiLU
from .additive_attention import AdditiveAttention
from .attention_cache import KeyValueCache
from .containers import ModuleList, Residual, Sequential
from .dropout import Dropout
from .embedding import Embedding
from .feed_forward import FeedForward, SwiGLUFeedForward
from .layer_norm import LayerNorm
from .linear import Linear
from .module import Module
from .multihead_attention import MultiheadAttention
from .parameter import Parameter
from .rms_norm import RMSNorm
from .structured_bias import DistanceBiasTable, PairBiasTable, Structure
from .transformer import Transformer
from .transformer_decoder_layer import TransformerDecoderLayer
from .transformer_decoder import TransformerDecoder
from .transformer_encoder import TransformerEncoder
from .transformer_encoder_layer import TransformerEncoderLayer
from . import positional

__all__ = [
    "AdditiveAttention", "DistanceBiasTable", "Dropout", "Embedding", "FeedForward", "GELU",
    "KeyValueCache", "LayerNorm", "Linear", "Module", "ModuleList", "MultiheadAttention",
    "PairBiasTable", "Parameter", "RMSNorm", "ReLU", "Residual", "SiLU", "Sequential",
    "Structure", "SwiGLUFeedForward", "Transformer", "TransformerDecoder",
    "TransformerDecoderLayer", "TransformerEncoder", "TransformerEncoderLayer", "positional",
]
