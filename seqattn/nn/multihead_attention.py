"""Multi-head attention (self- and cross-), batch-first, with torch.nn.MultiheadAttention's
parameters: in_proj_weight (3E, E) and in_proj_bias (3E,), or q/k/v_proj_weight when kdim or vdim
differs from embed_dim, and out_proj (a Linear). Masks mean what they mean in seqattn.attention.
"""
import numpy as np

import dataclasses

from .. import autodiff, ops
from ..autodiff import unwrap
from .init import generator, xavier_uniform
from .linear import Linear
from .module import Module
from .parameter import Parameter


class MultiheadAttention(Module):
    """Multi-head attention on the fused attention operator, with torch.nn.MultiheadAttention's
    parameter names.

    Shapes: query (B, N, E), key (B, M, kdim), value (B, M, vdim) -> out (B, N, E). The N x M
    matrix of attention weights is never stored, so memory is O(N + M) per batch and head.

    Parameters
    ----------
    embed_dim : int
        Width E of the queries and of the output.
    num_heads : int
        Heads H; ``embed_dim`` must be a multiple of it.
    dropout : float, default 0.0
        Must be 0: the fused operator never forms the attention matrix, so there is nothing to
        drop (the Transformer layers still drop their residual branches).
    bias : bool, default True
        Whether the input and output projections have biases.
    kdim : int, optional
        Width of the keys (default ``embed_dim``).
    vdim : int, optional
        Width of the values (default ``embed_dim``).
    rotary : RotaryEmbedding, optional
        Rotates queries and keys by their positions.
    alibi_slopes : array (H,), optional
        ALiBi's linear distance penalty per head.
    distance_bias : DistanceBiasTable, optional
        A learnable function of the distance between tokens, added to the scores; read from
        the ``structure`` passed to forward.
    pair_bias : PairBiasTable, optional
        A learnable bias per pair code (graph hops, edge types, relative offsets).
    window : tuple of int, optional
        ``(left, right)``: query i attends to keys i - left .. i + right only.
    deterministic : bool, default True
        The backward gives the same bits every run; False lets the GPU add dq with atomics,
        faster but not bit-reproducible (the CPU is deterministic either way; see
        :func:`seqattn.ops.attention_backward`).
    dtype : NumPy float type, default numpy.float32
        Type of the parameters and of the activations they produce (float32 or float64).
    seed : int, numpy.random.Generator or None, default None
        Seed of the initial weights. One Generator shared by a model's modules makes the whole
        model reproducible from one seed; None draws fresh entropy.
    """

    def __init__(self, embed_dim, num_heads, dropout=0.0, bias=True, kdim=None, vdim=None,
                 rotary=None, alibi_slopes=None, distance_bias=None, pair_bias=None,
                 window=None, deterministic=True, dtype=np.float32, seed=None):
        super().__init__()
        if embed_dim % num_heads:
            raise ValueError(f"embed_dim = {embed_dim} must be divisible by num_heads = "
                             f"{num_heads}")
        if dropout != 0.0:
            raise ValueError("MultiheadAttention supports dropout=0.0 only: the fused attention "
                             "operator has no attention-weight dropout")
        rng = generator(seed)
        self.embed_dim, self.num_heads = embed_dim, num_heads
        self.kdim = embed_dim if kdim is None else kdim
        self.vdim = embed_dim if vdim is None else vdim
        self.packed = self.kdim == embed_dim and self.vdim == embed_dim
        if self.packed:
            self.in_proj_weight = Parameter(xavier_uniform(rng, (3 * embed_dim, embed_dim),
                                                           dtype))
        else:
            self.q_proj_weight = Parameter(xavier_uniform(rng, (embed_dim, embed_dim), dtype))
            self.k_proj_weight = Parameter(xavier_uniform(rng, (embed_dim, self.kdim), dtype))
            self.v_proj_weight = Parameter(xavier_uniform(rng, (embed_dim, self.vdim), dtype))
        self.in_proj_bias = Parameter(np.zeros(3 * embed_dim, dtype)) if bias else None
        self.out_proj = Linear(embed_dim, embed_dim, bias, dtype, rng)
        if bias:
            self.out_proj.bias.data[...] = 0  # torch zeroes both biases
        self.rotary = rotary
        self.distance_bias, self.pair_bias = distance_bias, pair_bias
        if alibi_slopes is not None:
            self.register_buffer("alibi_slopes", np.asarray(alibi_slopes, dtype=dtype))
        else:
            self.alibi_slopes = None
        self.window = None if window is None else tuple(window)
        self.deterministic = bool(deterministic)

    def _projection(self, i):
        """(weight, bias) of projection i (0 = q, 1 = k, 2 = v); rows of the packed parameters
        when kdim and vdim equal embed_dim."""
        E = self.embed_dim
        if self.packed:
            weight = self.in_proj_weight[i * E:(i + 1) * E]
        else:
            weight = (self.q_proj_weight, self.k_proj_weight, self.v_proj_weight)[i]
        bias = None if self.in_proj_bias is None else self.in_proj_bias[i * E:(i + 1) * E]
        return weight, bias

    def _check_inputs(self, query, key, value):
        self.check_device(query=query, key=key, value=value)
        for name, x, size, what in (("query", query, self.embed_dim, "embed_dim"),
                                    ("key", key, self.kdim, "kdim"),
                                    ("value", value, self.vdim, "vdim")):
            if x.ndim != 3 or int(x.shape[2]) != size:
                raise ValueError(f"{name} has shape {tuple(x.shape)}; expected (B, length, "
                                 f"{what}) with {what} = {size} (batch-first)")
        if tuple(key.shape[:2]) != tuple(value.shape[:2]) or key.shape[0] != query.shape[0]:
            raise ValueError(f"key {tuple(key.shape)} and value {tuple(value.shape)} must share "
                             f"(B, M), and B must match query's {tuple(query.shape)}")

    def _cached(self, query, key, value, key_padding_mask, cache):
        """Attention of the new position(s) in ``query`` through a :class:`KeyValueCache`."""
        if self.rotary is not None or self.alibi_slopes is not None or self.window is not None:
            raise ValueError("cached decoding supports attention without rotary, ALiBi or window "
                             "positions (the task models add sinusoidal positions to the inputs)")
        H = self.num_heads

        def heads(x, i):
            return unwrap(autodiff.split_heads(autodiff.linear(x, *self._projection(i)), H))

        q = heads(query, 0)
        if cache.is_memory:
            if cache.keys is None:
                cache.keys, cache.values = heads(key, 1), heads(value, 2)
        else:
            key_padding_mask = cache.append(heads(key, 1), heads(value, 2))
        out = autodiff.attention(q, cache.keys, cache.values, key_padding_mask=key_padding_mask)
        return self.out_proj(autodiff.merge_heads(out))

    def forward(self, query, key=None, value=None, key_padding_mask=None, attn_mask=None,
                bias=None, need_weights=False, is_causal=False, cache=None, structure=None):
        """Returns (out (B, N, E), weights (B, H, N, M) or None). key and value default to
        query (self-attention). With a ``cache`` (:class:`KeyValueCache`, for decoding in
        evaluation mode) the keys and values come from it, masks and bias apart from
        ``key_padding_mask`` of a memory cache do not apply, and weights are not returned.
        ``structure`` (a :class:`Structure`) feeds the layer's structured biases."""
        key = query if key is None else key
        value = key if value is None else value
        self._check_inputs(query, key, value)
        if cache is not None:
            return self._cached(query, key, value, key_padding_mask, cache), None
        H = self.num_heads
        if self.packed and key is query and value is query:
            # Self-attention: one GEMM against the packed (3E, E) weight puts q, k and v side by
            # side (B, N, 3E)
            qkv = autodiff.linear(query, self.in_proj_weight, self.in_proj_bias)
            if self.rotary is None:
                return self._packed(qkv, key_padding_mask, attn_mask, bias, need_weights,
                                    is_causal, structure)
            # rotary positions rotate q and k, heads of their own
            q, k, v = autodiff.split_heads(qkv, H, parts=3)
        else:
            q, k, v = (autodiff.split_heads(autodiff.linear(x, *self._projection(i)), H)
                       for i, x in enumerate((query, key, value)))  # each (B, H, len, D)
        return self.attend(q, k, v, key_padding_mask, attn_mask, bias, need_weights, is_causal,
                           structure)

    def _packed(self, qkv, key_padding_mask, attn_mask, bias, need_weights, is_causal,
                structure):
        """forward's self-attention straight from the packed projection qkv (B, N, 3E): the
        heads are read where they lie (ops.packed_attention), not split and merged."""
        options, structured = self._options(key_padding_mask, attn_mask, is_causal, structure)
        out = self.out_proj(autodiff.packed_attention(
            qkv, self.num_heads, bias, **structured, deterministic=self.deterministic,
            **options))
        weights = None
        if need_weights:
            q, k, _ = ops.split_heads(unwrap(qkv), self.num_heads, parts=3)
            weights = self._weights(q, k, bias, options, structured)
        return out, weights

    def attend(self, q, k, v, key_padding_mask=None, attn_mask=None, bias=None,
               need_weights=False, is_causal=False, structure=None):
        """forward's attention and output projection of heads already projected: q
        (B, H, N, D), k and v (B, H, M, D) -> (out (B, N, E), weights (B, H, N, M) or None);
        the rest as in forward. For a layer whose keys are made otherwise than by projecting
        token rows (MoleculeModel's anchors: a table's rows, projected once per element)."""
        if self.rotary is not None:
            q, k = self.rotary.rotate(q), self.rotary.rotate(k)
        options, structured = self._options(key_padding_mask, attn_mask, is_causal, structure)
        out = self.out_proj(autodiff.merge_heads(autodiff.attention(
            q, k, v, bias, **structured, deterministic=self.deterministic, **options)))
        weights = self._weights(q, k, bias, options, structured) if need_weights else None
        return out, weights

    def _options(self, key_padding_mask, attn_mask, is_causal, structure):
        """(the attention's options, its structured biases read from ``structure``)."""
        options = dict(causal=is_causal, key_padding_mask=key_padding_mask,
                       attn_mask=attn_mask, alibi_slopes=self.alibi_slopes, window=self.window)
        structured = {name: None if table is None else table.bias(structure)
                      for name, table in (("distance_bias", self.distance_bias),
                                          ("pair_bias", self.pair_bias))}
        return options, structured

    @staticmethod
    def _weights(q, k, bias, options, structured):
        """The attention weights (B, H, N, M) of heads q and k, outside the record."""
        return ops.attention_weights(unwrap(q), unwrap(k), bias=unwrap(bias), **options,
                                     **{name: _as_arrays(b) for name, b in structured.items()})


def _as_arrays(bias):
    """A structured bias with its Tensors as arrays (for the weights, outside the record)."""
    if bias is None:
        return None
    return dataclasses.replace(bias, **{f.name: unwrap(getattr(bias, f.name))
                                        for f in dataclasses.fields(bias)})
