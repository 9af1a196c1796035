"""The encoder every task model starts with: tokens in (float features or integer ids), a
learned input projection, fixed positions, a pre-norm Transformer encoder stack, a final norm.
"""
from dataclasses import dataclass

import numpy as np

from ..nn import (Embedding, LayerNorm, Linear, Module, TransformerEncoder,
                  TransformerEncoderLayer)
from ..nn.init import generator
from .positions import SinusoidalPositions


@dataclass
class EncoderConfig:
    """Give ``in_features`` for float tokens (B, N, F) or ``vocab_size`` for ids (B, N)."""

    in_features: int = None
    vocab_size: int = None
    d_model: int = 64
    nhead: int = 4
    num_layers: int = 2
    dim_feedforward: int = 128
    dropout: float = 0.0
    activation: str = "gelu"
    max_len: int = 512
    dtype: str = "float32"
    seed: int = 0

    def check(self):
        if (self.in_features is None) == (self.vocab_size is None):
            raise ValueError("give exactly one of in_features (float tokens) and vocab_size "
                             f"(integer ids); got {self.in_features!r} and {self.vocab_size!r}")


def input_layer(in_features, vocab_size, d_model, dtype, rng):
    """Embedding for ids, Linear for float features."""
    if vocab_size is not None:
        return Embedding(vocab_size, d_model, dtype=dtype, seed=rng)
    return Linear(in_features, d_model, dtype=dtype, seed=rng)


def encoder_stack(config, num_layers, rng):
    layer = TransformerEncoderLayer(config.d_model, config.nhead, config.dim_feedforward,
                                    config.dropout, config.activation, norm_first=True,
                                    dtype=np.dtype(config.dtype).type, seed=rng)
    return TransformerEncoder(layer, num_layers,
                              LayerNorm(config.d_model, dtype=np.dtype(config.dtype).type))


class SequenceEncoder(Module):
    """inputs (B, N, F) or ids (B, N) -> encoded tokens (B, N, d_model)."""

    def __init__(self, config):
        super().__init__()
        config.check()
        rng = generator(config.seed)
        dtype = np.dtype(config.dtype).type
        self.embed = input_layer(config.in_features, config.vocab_size, config.d_model, dtype,
                                 rng)
        self.positions = SinusoidalPositions(config.max_len, config.d_model, dtype)
        self.encoder = encoder_stack(config, config.num_layers, rng)

    def forward(self, inputs, key_padding_mask=None):
        x = self.positions(self.embed(inputs))
        return self.encoder(x, src_key_padding_mask=key_padding_mask)

    def backward(self, dout):
        self.embed.backward(self.positions.backward(self.encoder.backward(dout)))
