"""N -> N': an encoder-decoder from a source sequence to a target sequence of another length
(history to forecast trajectory, one token sequence to another), trained with teacher forcing.

Training: ``model(src, targets)`` feeds the decoder the targets shifted right by one (a start
token first) under a causal mask, so position t predicts target t from targets < t.
Generation one step at a time with a key/value cache: ``seqattn.models.generate`` (discrete
targets) and ``seqattn.models.rollout`` (continuous vectors).
"""
from dataclasses import dataclass

import numpy as np

from .. import autodiff, ops
from ..backend import empty_like_on
from ..nn import (Embedding, LayerNorm, Linear, Module, Parameter, TransformerDecoder,
                  TransformerDecoderLayer)
from ..nn.init import generator, normal
from ..nn.placement import moved
from .encoder import EncoderConfig, SequenceEncoder
from .positions import SinusoidalPositions


@dataclass
class Seq2SeqConfig(EncoderConfig):
    """An encoder-decoder: the source described as in :class:`EncoderConfig` (the Other
    Parameters below), the target by ``target_features`` or ``target_vocab_size``.

    Discrete targets start from ``start_id`` (reserve it in the vocabulary); continuous ones
    from a learned vector.

    Parameters
    ----------
    target_features : int, default None
        Features F' per target step, for float targets (B, N', F').
    target_vocab_size : int, default None
        Number of target ids, for integer targets (B, N'); give this or ``target_features``.
    num_decoder_layers : int, default 2
        Decoder layers (the encoder has ``num_layers``).
    start_id : int, default 0
        The id that starts every discrete target sequence.
    """

    target_features: int = None
    target_vocab_size: int = None
    num_decoder_layers: int = 2
    start_id: int = 0

    def check(self):
        """Raise a ValueError naming the field when the fields do not fit together."""
        super().check()
        if (self.target_features is None) == (self.target_vocab_size is None):
            raise ValueError("give exactly one of target_features and target_vocab_size")


class Seq2SeqModel(Module):
    """src (B, M, F) or ids (B, M), targets (B, N', F') or ids (B, N') -> (B, N', F') values or
    (B, N', V) logits.

    Parameters
    ----------
    config : Seq2SeqConfig
        The encoder's and decoder's sizes and the targets' form (checked here).
    """

    teacher_forced = True  # fit calls model(inputs, targets, ...)

    def __init__(self, config):
        super().__init__()
        config.check()
        self.config = config
        dtype = np.dtype(config.dtype).type
        rng = generator([config.seed, 2])
        self.discrete = config.target_vocab_size is not None
        self.encoder = SequenceEncoder(config)
        if self.discrete:
            self.target_embed = Embedding(config.target_vocab_size, config.d_model, dtype=dtype,
                                          seed=rng)
        else:
            self.target_embed = Linear(config.target_features, config.d_model, dtype=dtype,
                                       seed=rng)
            self.start = Parameter(normal(rng, (config.target_features,), dtype, std=0.02))
        self.target_positions = SinusoidalPositions(config.max_len, config.d_model, dtype)
        layer = TransformerDecoderLayer(config.d_model, config.nhead, config.dim_feedforward,
                                        config.dropout, config.activation, norm_first=True,
                                        dtype=dtype, seed=rng)
        self.decoder = TransformerDecoder(layer, config.num_decoder_layers,
                                          LayerNorm(config.d_model, dtype=dtype))
        out = config.target_vocab_size if self.discrete else config.target_features
        self.head = Linear(config.d_model, out, dtype=dtype, seed=rng)

    def start_tokens(self, batch):
        """The decoder's first input for ``batch`` sequences: (B, 1) ids or (B, 1, F')."""
        if self.discrete:
            return moved(np.full((batch, 1), self.config.start_id, np.int64), self.device)
        no_steps = empty_like_on(self.device, (batch, 0, self.config.target_features),
                                 self.dtype)
        return ops.prepend_token(no_steps, self.start.data)

    def shifted_right(self, targets):
        """Decoder inputs for teacher forcing: the start token, then targets[:, :-1]."""
        B, N = (int(s) for s in targets.shape[:2])
        if self.discrete:
            start = moved(np.array([self.config.start_id], dtype=targets.dtype), self.device)
            return ops.prepend_token(autodiff.unwrap(targets).reshape(B, N, 1), start,
                                     N).reshape(B, N)
        return autodiff.prepend_token(targets, self.start, N)

    def embed_targets(self, decoder_inputs, start=0):
        """Decoder inputs at positions start, start + 1, ... -> (B, n, d_model)."""
        return self.target_positions(self.target_embed(decoder_inputs), start)

    def forward(self, src, targets, key_padding_mask=None, coords=None):
        """``coords`` are the source tokens' coordinates (see :class:`TokenModel`)."""
        self._check_targets(targets)
        memory = self.encoder(src, key_padding_mask, coords)
        x = self.embed_targets(self.shifted_right(targets))
        x = self.decoder(x, memory, memory_key_padding_mask=key_padding_mask,
                         tgt_is_causal=True)
        return self.head(x)

    def _check_targets(self, targets):
        is_int = np.issubdtype(np.dtype(targets.dtype), np.integer)
        if self.discrete and (targets.ndim != 2 or not is_int):
            raise ValueError(f"targets must be integer ids (B, N'); got {np.dtype(targets.dtype)}"
                             f" {tuple(targets.shape)}")
        if not self.discrete and (targets.ndim != 3 or is_int
                                  or int(targets.shape[2]) != self.config.target_features):
            raise ValueError(f"targets must be float vectors (B, N', "
                             f"{self.config.target_features}); got {np.dtype(targets.dtype)} "
                             f"{tuple(targets.shape)}")
