"""N -> 1: one value (or class logits) per sequence: a molecule's toxicity, who is speaking."""
from dataclasses import dataclass, replace

import numpy as np

from .. import autodiff
from ..nn import Linear, Module
from ..nn.init import generator
from .encoder import EncoderConfig, SequenceEncoder
from .feature_path import feature_path
from .linear_path import linear_path, start_from_linear, zero_head
from .neighbour_path import neighbour_path
from .pooling import AttentionPooling, ClassTokenPooling, MaskedMeanPooling

POOLINGS = ("mean", "cls", "attention")


@dataclass
class SequenceModelConfig(EncoderConfig):
    """N -> 1: the encoder described as in :class:`EncoderConfig` (the Other Parameters below),
    a pooling head, then a value (or class logits) per sequence.

    Parameters
    ----------
    out_features : int, default 1
        Outputs per sequence (target features, or classes).
    pooling : str, default 'mean'
        ``"mean"`` over unpadded tokens, ``"cls"`` a class token, ``"attention"`` a learned
        query over the tokens.
    linear : bool, default False
        Add a linear map of the inputs' mean over unpadded tokens (for ids: their frequencies)
        to the head's outputs, so that the model's function class contains ridge or logistic
        regression on it (:mod:`seqattn.models.linear_path`).
    linear_features : str, default 'mean'
        What the linear path maps: ``"mean"`` (above), or for float tokens ``"pooled"`` (each
        channel's mean, std, min and max, and the number of tokens), ``"additive"`` or
        ``"pairwise"`` (every position's row, and the products of every two positions' rows),
        the features of :class:`seqattn.baselines.PooledFeatures` and
        :class:`~seqattn.baselines.PositionFeatures` (:mod:`seqattn.models.feature_path`);
        or, for classes, ``"neighbours"``: the smoothed votes of the nearest reference samples
        that :func:`seqattn.baselines.warm_start` copies from a fitted
        :class:`~seqattn.baselines.NearestNeighbour` (:mod:`seqattn.models.neighbour_path`).
    linear_tokens : int, default None
        The tokens per sequence N, for ``linear_features`` "additive" and "pairwise"; for
        "neighbours", given when samples are compared position by position.
    linear_references : int, default None
        The reference samples the neighbour path holds (warm_start sets it).
    linear_neighbours : int, default 1
        k, the neighbour path's voting references (warm_start sets it).
    linear_window : float, default None
        For "neighbours": None compares as :class:`~seqattn.baselines.NearestNeighbour` does;
        a Sakoe-Chiba band (0 to 1) compares by dynamic time warping, as a fitted
        :class:`~seqattn.baselines.WarpingNeighbour` that warm_start copies
        (:mod:`seqattn.models.warping_path`); ``linear_tokens`` is then the longest reference's
        tokens.
    linear_steps : tuple of int, default None
        For a warping path that compares the steps frame tokens hold: the shape (hop, K) of
        their feature indices (``SignalAdapter.step_features()``; warm_start sets it, the
        indices are saved with the weights); ``linear_tokens`` then counts steps.
    """

    out_features: int = 1
    pooling: str = "mean"
    linear: bool = False
    linear_features: str = "mean"
    linear_tokens: int = None
    linear_references: int = None
    linear_neighbours: int = 1
    linear_window: float = None
    linear_steps: tuple = None


class SequenceModel(Module):
    """inputs (B, N, F) or ids (B, N) -> (B, out_features): the encoder, a pooling head
    (``pooling``: 'mean' over unpadded tokens, 'cls' class token, 'attention'), a linear head.
    With ``linear`` a linear map of the inputs' mean over unpadded tokens is added to the head's
    outputs (:mod:`seqattn.models.linear_path`).

    Parameters
    ----------
    config : SequenceModelConfig
        The encoder, the pooling, the head's outputs per sequence and the linear path.
    """

    def __init__(self, config):
        super().__init__()
        if config.pooling not in POOLINGS:
            raise ValueError(f"pooling must be one of {POOLINGS}, got {config.pooling!r}")
        self.config = config
        dtype = np.dtype(config.dtype).type
        rng = generator([config.seed, 1])
        self.encoder = SequenceEncoder(replace(config, class_token=config.pooling == "cls"))
        if config.pooling == "mean":
            self.pool = MaskedMeanPooling()
        elif config.pooling == "cls":
            self.pool = ClassTokenPooling()
        else:
            self.pool = AttentionPooling(config.d_model, config.nhead, dtype, rng)
        self.head = Linear(config.d_model, config.out_features, dtype=dtype, seed=rng)
        if config.linear and config.linear_features == "neighbours":
            self.linear = neighbour_path(config)
        elif config.linear and config.linear_features != "mean":
            self.linear = feature_path(config)
        else:
            self.linear = linear_path(config)

    def forward(self, inputs, key_padding_mask=None, coords=None, attn_mask=None,
                structure=None):
        out, path = self.terms(inputs, key_padding_mask, coords, attn_mask, structure)
        return out if path is None else autodiff.add(out, path)

    def terms(self, inputs, key_padding_mask=None, coords=None, attn_mask=None,
              structure=None):
        """The two terms the outputs are the sum of, apart: the head's (attention's) and the
        linear path's (None without one)."""
        encoded = self.encoder(inputs, key_padding_mask, coords, attn_mask, structure)
        out = self.head(self.pool(encoded, None if self.config.pooling == "cls"
                                  else key_padding_mask))
        if self.linear is None:
            return out, None
        return out, self.linear(inputs, key_padding_mask, pooled=True, coords=coords)

    def start_from_linear(self, weight, bias):
        """Start at the linear map (weight (out, F), bias (out,)) of the inputs' mean over
        unpadded tokens and learn the residual (see :mod:`seqattn.models.linear_path`)."""
        start_from_linear(self, weight, bias)

    def start_from_neighbours(self, references, reference_classes, mean, scale, neighbours,
                              n_tokens):
        """Start at the nearest-neighbour rule of the `references` (R, width) of classes
        `reference_classes` (R,), compared after subtracting `mean` and dividing by `scale`
        (position by position for `n_tokens` unpadded tokens, else on pooled statistics), the
        `neighbours` nearest voting; the head zeroed (see :mod:`seqattn.models.neighbour_path`).
        The path is rebuilt to hold them and the config records their number, k and
        `n_tokens`, so that seqattn.load rebuilds it."""
        self._check_neighbour_path()
        config = replace(self.config, linear_references=len(references),
                         linear_neighbours=int(neighbours), linear_tokens=n_tokens,
                         linear_window=None, linear_steps=None)
        path = neighbour_path(config).to(device=self.device)
        path.set(references, reference_classes, mean, scale)
        self._take_neighbour_path(path, config)

    def start_from_warping_neighbours(self, references, reference_lengths, reference_classes,
                                      mean, scale, neighbours, window, steps=None):
        """Start at the rule of a fitted WarpingNeighbour: the standardized `references`
        (R, S, F) with `reference_lengths` (R,) real tokens, of classes `reference_classes`
        (R,), an input's tokens standardized by `mean` and `scale` (F,), the `neighbours`
        nearest in warping distance within the band `window` voting; where `steps` (hop, K)
        is given, the references are the steps of frame tokens (R, S, K) and an input is
        compared by its steps too; the head zeroed (see :mod:`seqattn.models.warping_path`).
        The config records their number, S, k, the band and the steps' shape, so that
        seqattn.load rebuilds the path."""
        self._check_neighbour_path()
        references = np.asarray(references)
        steps_shape = None if steps is None else tuple(int(n) for n in np.shape(steps))
        config = replace(self.config, linear_references=len(references),
                         linear_neighbours=int(neighbours), linear_tokens=references.shape[1],
                         linear_window=float(window), linear_steps=steps_shape)
        path = neighbour_path(config).to(device=self.device)
        path.set(references, reference_lengths, reference_classes, mean, scale, steps)
        self._take_neighbour_path(path, config)

    def _check_neighbour_path(self):
        if not self.config.linear or self.config.linear_features != "neighbours":
            raise ValueError("this SequenceModel has no neighbour path; build it with "
                             "linear=True, linear_features='neighbours'")

    def _take_neighbour_path(self, path, config):
        self.linear, self.config = path, config
        self._config["config"] = config
        zero_head(self)
