"""The encoder every task model starts with: tokens in (float features or integer ids), a
learned input projection, positions (of the sequence and of the adapters' coordinates), a
pre-norm Transformer encoder stack, a final norm.
"""
from dataclasses import dataclass

import numpy as np

from .. import autodiff, ops
from ..nn import (DistanceBiasTable, Embedding, LayerNorm, Linear, Module, PairBiasTable,
                  Parameter, TransformerEncoder, TransformerEncoderLayer)
from ..nn.init import generator, normal
from ..nn.placement import moved
from ..nn.positional import LearnedPositionalEmbedding, RotaryEmbedding, alibi_slopes
from .coordinates import CoordinateEncoding, check_encodings
from .positions import SinusoidalPositions

SEQUENCE_POSITIONS = ("sinusoidal", "learned", "rope", "alibi", "none")


@dataclass
class EncoderConfig:
    """Give ``in_features`` for float tokens (B, N, F) or ``vocab_size`` for ids (B, N).

    ``positions`` says how the index of a token in its sequence enters: ``"sinusoidal"`` or
    ``"learned"`` tables added to the tokens (up to ``max_len``), ``"rope"`` (rotary, in every
    attention layer), ``"alibi"`` (linear distance penalties per head) or ``"none"`` (a set, or
    tokens whose ``coordinates`` say where they are). ``coordinates`` lists encodings of the
    per-token coordinates the adapters provide (see :mod:`seqattn.models.coordinates`:
    "latlon", "time_of_day", "day_of_year", "lead", "level"), with ``num_frequencies`` per
    Fourier or sinusoidal encoding. ``causal`` lets token i attend to tokens j <= i only (a
    forecast that must not see the future). ``window`` (left, right) limits attention to a band
    of tokens i - left .. i + right (local attention: linear cost in N, for long sequences such
    as 32K bases). ``class_token`` puts a learned token in front of
    every sequence (for class-token pooling).

    Structured biases (read from the ``structure`` passed to forward, a
    :class:`seqattn.nn.Structure`; each layer owns its own tables): ``distance_bias`` is a dict of
    :class:`~seqattn.nn.DistanceBiasTable` options (``bins``, ``r_max``, ``num_types``,
    ``cutoff``, ``smooth_cutoff``: a learnable function of the distance between tokens, for
    atoms); ``pair_bias`` of :class:`~seqattn.nn.PairBiasTable` options (``num_codes``, codes from
    the structure's ``pair_codes``: graph hops, edge types; or ``max_offset``, a relative-position
    bias)."""

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
    positions: str = "sinusoidal"
    coordinates: tuple = ()
    num_frequencies: int = 8
    causal: bool = False
    window: tuple = None
    distance_bias: dict = None
    pair_bias: dict = None

    def check(self):
        if (self.in_features is None) == (self.vocab_size is None):
            raise ValueError("give exactly one of in_features (float tokens) and vocab_size "
                             f"(integer ids); got {self.in_features!r} and {self.vocab_size!r}")
        if self.positions not in SEQUENCE_POSITIONS:
            raise ValueError(f"positions must be one of {SEQUENCE_POSITIONS}, got "
                             f"{self.positions!r}")
        if isinstance(self.coordinates, str):
            raise ValueError(f"coordinates must be a list of encodings, e.g. "
                             f"[{self.coordinates!r}], not a string")
        check_encodings(self.coordinates)
        if self.class_token and self.causal:
            raise ValueError("class_token=True with causal=True: the class token comes first and "
                             "would see only itself; pool by 'mean' or 'attention' instead")
        for name in ("distance_bias", "pair_bias"):
            options = getattr(self, name)
            if options is not None and not isinstance(options, dict):
                raise ValueError(f"{name} must be a dict of table options (e.g. "
                                 f"{{'bins': 32, 'r_max': 6.0}}) or None, got {options!r}")
        if self.class_token and (self.distance_bias or self.pair_bias):
            raise ValueError("class_token=True with a structured bias: the class token has no "
                             "position or pair code; pool by 'mean' or 'attention' instead")


def input_layer(in_features, vocab_size, d_model, dtype, rng):
    """Embedding for ids, Linear for float features."""
    if vocab_size is not None:
        return Embedding(vocab_size, d_model, dtype=dtype, seed=rng)
    return Linear(in_features, d_model, dtype=dtype, seed=rng)


def encoder_stack(config, num_layers, rng):
    dtype = np.dtype(config.dtype).type
    head_dim = config.d_model // config.nhead
    rotary = RotaryEmbedding(head_dim, dtype=dtype) if config.positions == "rope" else None
    slopes = alibi_slopes(config.nhead) if config.positions == "alibi" else None
    distance_bias = pair_bias = None
    if config.distance_bias is not None:
        distance_bias = DistanceBiasTable(config.nhead, **config.distance_bias, dtype=dtype,
                                          seed=generator([config.seed, 5]))
    if config.pair_bias is not None:
        pair_bias = PairBiasTable(config.nhead, **config.pair_bias, dtype=dtype,
                                  seed=generator([config.seed, 6]))
    layer = TransformerEncoderLayer(config.d_model, config.nhead, config.dim_feedforward,
                                    config.dropout, config.activation, norm_first=True,
                                    rotary=rotary, alibi_slopes=slopes,
                                    distance_bias=distance_bias, pair_bias=pair_bias,
                                    window=config.window, dtype=dtype, seed=rng)
    return TransformerEncoder(layer, num_layers, LayerNorm(config.d_model, dtype=dtype))


def sequence_positions(config, dtype):
    """The table added to the tokens for ``positions``, or None when attention carries them."""
    if config.positions == "sinusoidal":
        return SinusoidalPositions(config.max_len, config.d_model, dtype)
    if config.positions == "learned":
        return LearnedPositionalEmbedding(config.max_len, config.d_model, dtype,
                                          seed=generator([config.seed, 4]))
    return None


class SequenceEncoder(Module):
    """inputs (B, N, F) or ids (B, N) -> encoded tokens (B, N, d_model), or (B, 1 + N, d_model)
    with the class token first (it carries no position and is never padded)."""

    def __init__(self, config):
        super().__init__()
        config.check()
        self.causal = config.causal
        rng = generator(config.seed)
        dtype = np.dtype(config.dtype).type
        self.embed = input_layer(config.in_features, config.vocab_size, config.d_model, dtype,
                                 rng)
        self.positions = sequence_positions(config, dtype)
        if config.coordinates:
            self.coordinates = CoordinateEncoding(config.coordinates, config.d_model,
                                                  config.num_frequencies, dtype,
                                                  seed=generator([config.seed, 3]))
        else:
            self.coordinates = None
        self.encoder = encoder_stack(config, config.num_layers, rng)
        if config.class_token:
            self.class_token = Parameter(normal(rng, (config.d_model,), dtype, std=0.02))

    def forward(self, inputs, key_padding_mask=None, coords=None, attn_mask=None,
                structure=None):
        """``attn_mask`` bool, broadcastable to (B, H, N, N), True = may attend; ``structure``
        (a :class:`seqattn.nn.Structure`) feeds the layers' structured biases."""
        x = self.embed(inputs)
        if self.positions is not None:
            x = self.positions(x)
        if self.coordinates is not None:
            x = self.coordinates(x, coords)
        if self.config_class_token:
            if attn_mask is not None:
                raise ValueError("attn_mask with a class token: the mask would have to cover "
                                 "the class token too; pool by 'mean' or 'attention' instead")
            x = autodiff.prepend_token(x, self.class_token)
            if key_padding_mask is not None:
                B, N = (int(s) for s in key_padding_mask.shape)
                never_padded = moved(np.zeros(1, np.bool_), self.device)
                key_padding_mask = ops.prepend_token(key_padding_mask.reshape(B, N, 1),
                                                     never_padded).reshape(B, N + 1)
        return self.encoder(x, mask=attn_mask, src_key_padding_mask=key_padding_mask,
                            is_causal=self.causal, structure=structure)

    @property
    def config_class_token(self):
        return "class_token" in self._parameters
