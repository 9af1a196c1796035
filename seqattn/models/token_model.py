"""N -> N: a value (or class logits) for every token: label every base, forecast every cell."""
from dataclasses import dataclass

import numpy as np

from .. import autodiff
from ..nn import Linear, Module
from ..nn.init import generator
from .encoder import EncoderConfig, SequenceEncoder
from .linear_path import linear_path, start_from_linear


@dataclass
class TokenModelConfig(EncoderConfig):
    """N -> N: the encoder described as in :class:`EncoderConfig` (the Other Parameters below),
    then a value (or class logits) per token.

    Parameters
    ----------
    out_features : int, default 1
        Outputs per token (target features, or classes).
    linear : bool, default False
        Add a linear map of each token's own inputs to the head's outputs, so that the model's
        function class contains ridge on those inputs (:mod:`seqattn.models.linear_path`).
    linear_leads : tuple, default None
        Forecasts: with ``linear``, the leads (``coords["lead"]``'s values) of a path with one
        map per lead (the function class of :class:`seqattn.baselines.LeadRidge`).
    linear_tokens : int, default None
        With ``linear_leads``: the tokens per sample, for a path that maps every input of the
        sample (LeadRidge flattened); None: each token's own inputs, the same maps for every
        token (LeadRidge per token, "lead token ridge").
    """

    out_features: int = 1
    linear: bool = False
    linear_leads: tuple = None
    linear_tokens: int = None


class TokenModel(Module):
    """inputs (B, N, F) or ids (B, N) -> (B, N, out_features): the encoder, then a linear
    per-token head. ``coords`` are the batch's per-token coordinates (name -> (B, N)), which
    the config's ``coordinates`` encodings read; ``structure`` (a :class:`seqattn.nn.Structure`)
    feeds the config's structured biases. With ``linear`` a linear map of each token's own
    inputs is added to the head's outputs (:mod:`seqattn.models.linear_path`).

    Parameters
    ----------
    config : TokenModelConfig
        The encoder, the head's outputs per token and the linear path.
    """

    def __init__(self, config):
        super().__init__()
        self.config = config
        self.encoder = SequenceEncoder(config)
        self.head = Linear(config.d_model, config.out_features,
                           dtype=np.dtype(config.dtype).type,
                           seed=generator([config.seed, 1]))
        self.linear = linear_path(config)

    def forward(self, inputs, key_padding_mask=None, coords=None, attn_mask=None,
                structure=None):
        out = self.head(self.encoder(inputs, key_padding_mask, coords, attn_mask, structure))
        if self.linear is None:
            return out
        return autodiff.add(out, self.linear(inputs, key_padding_mask, coords=coords))

    def start_from_linear(self, weight, bias):
        """Start at the linear map (weight (out, F), bias (out,)) of each token's inputs and
        learn the residual (see :mod:`seqattn.models.linear_path`)."""
        start_from_linear(self, weight, bias)
