"""N -> N: a value (or class logits) for every token: label every base, forecast every cell."""
from dataclasses import dataclass

import numpy as np

from ..nn import Linear, Module
from ..nn.init import generator
from .encoder import EncoderConfig, SequenceEncoder


@dataclass
class TokenModelConfig(EncoderConfig):
    out_features: int = 1


class TokenModel(Module):
    """inputs (B, N, F) or ids (B, N) -> (B, N, out_features): the encoder, then a linear
    per-token head. ``coords`` are the batch's per-token coordinates (name -> (B, N)), which
    the config's ``coordinates`` encodings read; ``structure`` (a :class:`seqattn.nn.Structure`)
    feeds the config's structured biases."""

    def __init__(self, config):
        super().__init__()
        self.config = config
        self.encoder = SequenceEncoder(config)
        self.head = Linear(config.d_model, config.out_features,
                           dtype=np.dtype(config.dtype).type,
                           seed=generator([config.seed, 1]))

    def forward(self, inputs, key_padding_mask=None, coords=None, attn_mask=None,
                structure=None):
        return self.head(self.encoder(inputs, key_padding_mask, coords, attn_mask, structure))
