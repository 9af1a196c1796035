"""The encoder every task model starts with: tokens in (float features or integer ids), a
learned input projection, fixed positions, a pre-norm Transformer encoder stack, a final norm.
"""
from dataclasses import dataclass

import numpy as np

from .. import autodiff, ops
from ..nn import (Embedding, LayerNorm, Linear, Module, Parameter, TransformerEncoder,
                  TransformerEncoderLayer)
from ..nn.init import generator, normal
from ..nn.placement import moved
from .positions import SinusoidalPositions


@dataclass
class EncoderConfig:
    """Give ``in_features`` for float tokens (B, N, F) or ``vocab_size`` for ids (B, N).
    ``class_token`` puts a learned token in front of every sequence (for class-token pooling)."""

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
    class_token: bool = False

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
    """inputs (B, N, F) or ids (B, N) -> encoded tokens (B, N, d_model), or (B, 1 + N, d_model)
    with the class token first (it carries no position and is never padded)."""

    def __init__(self, config):
        super().__init__()
        config.check()
        rng = generator(config.seed)
        dtype = np.dtype(config.dtype).type
        self.embed = input_layer(config.in_features, config.vocab_size, config.d_model, dtype,
                                 rng)
        self.positions = SinusoidalPositions(config.max_len, config.d_model, dtype)
        self.encoder = encoder_stack(config, config.num_layers, rng)
        if config.class_token:
            self.class_token = Parameter(normal(rng, (config.d_model,), dtype, std=0.02))

    def forward(self, inputs, key_padding_mask=None):
        x = self.positions(self.embed(inputs))
        if self.config_class_token:
            x = autodiff.prepend_token(x, self.class_token)
            if key_padding_mask is not None:
                B, N = (int(s) for s in key_padding_mask.shape)
                never_padded = moved(np.zeros(1, np.bool_), self.device)
                key_padding_mask = ops.prepend_token(key_padding_mask.reshape(B, N, 1),
                                                     never_padded).reshape(B, N + 1)
        return self.encoder(x, src_key_padding_mask=key_padding_mask)

    @property
    def config_class_token(self):
        return "class_token" in self._parameters
