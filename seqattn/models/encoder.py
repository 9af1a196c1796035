"""The encoder every task model starts with: tokens in (float features or integer ids), a
learned input projection, positions (of the sequence and of the adapters' coordinates), a
pre-norm Transformer encoder stack, a final norm.
"""
import inspect
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
    """The encoder every task model starts with: what its tokens are, how wide and deep it is,
    how positions, coordinates and structure enter attention.

    Give ``in_features`` for float tokens (B, N, F) or ``vocab_size`` for integer ids (B, N),
    not both. The task models' configs (:class:`~seqattn.models.TokenModelConfig` and the
    others) add their own fields to these; ``help()`` on any of them lists all of its fields.

    Parameters
    ----------
    in_features : int, default None
        Features per token F, for float tokens (B, N, F) read through a linear layer.
    vocab_size : int, default None
        Number of token ids, for integer tokens (B, N) read through an embedding.
    d_model : int, default 64
        Width E of every token inside the encoder.
    nhead : int, default 4
        Attention heads per layer; ``d_model`` must be a multiple of it.
    num_layers : int, default 2
        Pre-norm Transformer encoder layers.
    dim_feedforward : int, default 128
        Width of each layer's feed-forward block.
    dropout : float, default 0.0
        Dropout rate in training (none in evaluation mode).
    activation : str, default 'gelu'
        The feed-forward activation: ``"gelu"``, ``"relu"`` or ``"silu"``.
    max_len : int, default 512
        Longest sequence a ``"sinusoidal"`` or ``"learned"`` position table covers.
    dtype : str, default 'float32'
        ``"float32"`` or ``"float64"``, for parameters and activations.
    seed : int, default 0
        Seed of the initial weights.
    class_token : bool, default False
        Put a learned token in front of every sequence (for class-token pooling).
    positions : str, default 'sinusoidal'
        How a token's index in its sequence enters: ``"sinusoidal"`` or ``"learned"`` tables
        added to the tokens, ``"rope"`` (rotary, in every attention layer), ``"alibi"`` (linear
        distance penalties per head) or ``"none"`` (a set, or tokens whose ``coordinates`` say
        where they are).
    coordinates : tuple of str, default ()
        Encodings of the per-token coordinates the adapters provide (``"latlon"``,
        ``"time_of_day"``, ``"day_of_year"``, ``"lead"``, ``"level"``; see
        :mod:`seqattn.models.coordinates`).
    num_frequencies : int, default 8
        Frequencies per Fourier or sinusoidal coordinate encoding.
    causal : bool, default False
        Token i attends to tokens j <= i only (a forecast that must not see the future).
    window : tuple of int, default None
        ``(left, right)``: token i attends to tokens i - left .. i + right only (local
        attention, linear in N, for long sequences such as 32K bases).
    distance_bias : dict, default None
        Options of a :class:`~seqattn.nn.DistanceBiasTable` in every layer (``bins``,
        ``r_max``, ``num_types``, ``cutoff``, ``smooth_cutoff``): a learnable function of the
        distance between tokens (atoms), read from the ``structure`` passed to forward.
    pair_bias : dict, default None
        Options of a :class:`~seqattn.nn.PairBiasTable` in every layer (``num_codes`` for the
        structure's ``pair_codes``: graph hops, edge types; or ``max_offset``, a
        relative-position bias).
    """

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        cls.__doc__ = inherited_field_docs(cls)

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
        """Raise a ValueError naming the field when the fields do not fit together."""
        check_sizes(self)
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1); got {self.dropout!r}")
        if self.d_model % self.nhead:
            raise ValueError(f"d_model must be a multiple of nhead; got d_model={self.d_model} "
                             f"and nhead={self.nhead}")
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


# Size fields of the task configs: at least 1 (layer counts at least 0); None where optional.
SIZES = {"in_features": 1, "vocab_size": 1, "d_model": 1, "nhead": 1, "num_layers": 0,
         "dim_feedforward": 1, "max_len": 1, "num_frequencies": 1, "out_features": 1,
         "target_features": 1, "target_vocab_size": 1, "num_decoder_layers": 0}
OPTIONAL_SIZES = ("in_features", "vocab_size", "target_features", "target_vocab_size")
OPTIONAL = object()  # a config without the field


def check_sizes(config):
    """A ValueError naming the first size field of ``config`` that is not a whole number at
    least its minimum (before numpy meets it as an array size)."""
    for name, least in SIZES.items():
        value = getattr(config, name, OPTIONAL)
        if value is OPTIONAL or value is None and name in OPTIONAL_SIZES:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < least:
            raise ValueError(f"{type(config).__name__}.{name} must be a whole number >= "
                             f"{least}; got {value!r}")


def parameter_entries(doc):
    """{field: (type, description lines)} of a numpydoc ``Parameters`` section in `doc`."""
    lines = inspect.cleandoc(doc or "").splitlines()
    if "Parameters" not in lines:
        return {}
    entries, name = {}, None
    for line in lines[lines.index("Parameters") + 2:]:
        if line and not line.startswith(" "):
            if set(line) == {"-"}:  # the underline of the next section: this one has ended
                entries.pop(name, None)
                break
            name, _, kind = line.partition(" : ")
            entries[name] = (kind.split(", default")[0], [])
        elif name is not None and line:
            entries[name][1].append(line)
    return entries


def inherited_field_docs(cls):
    """`cls`'s docstring with its fields documented where ``help()`` shows them: the fields it
    adds under Parameters (as its own docstring gives them, else with their type and default),
    the fields it inherits under Other Parameters, each with the default `cls` gives it."""
    own = inspect.cleandoc(cls.__dict__.get("__doc__") or f"Configuration of {cls.__name__}.")
    documented = parameter_entries(own)
    inherited = {}
    for base in reversed(cls.__mro__[1:]):
        inherited.update(parameter_entries(base.__doc__))
    annotations = cls.__dict__.get("__annotations__", {})
    new = [name for name in annotations if name not in documented and name not in inherited]

    def entry(name, kind, description):
        default = getattr(cls, name, None)
        return [f"{name} : {kind}, default {default!r}"] + description

    sections = [own]
    if new and "Parameters" not in own.splitlines():
        lines = ["Parameters", "----------"]
        for name in new:
            lines += entry(name, getattr(annotations[name], "__name__", str(annotations[name])),
                           [])
        sections.append("\n".join(lines))
    rest = [name for name in inherited if name not in documented]
    if rest:
        lines = ["Other Parameters", "----------------"]
        for name in rest:
            lines += entry(name, *inherited[name])
        sections.append("\n".join(lines))
    return "\n\n".join(sections) + "\n"


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
    """The encoder every task model starts with: inputs (B, N, F) or ids (B, N) -> encoded
    tokens (B, N, d_model), or (B, 1 + N, d_model) with the class token first (it carries no
    position and is never padded).

    Parameters
    ----------
    config : EncoderConfig
        What the tokens are and how the encoder is built (checked here).
    """

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
