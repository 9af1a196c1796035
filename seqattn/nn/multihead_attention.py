"""Multi-head attention (self- and cross-), batch-first, with torch.nn.MultiheadAttention's
parameters: in_proj_weight (3E, E) and in_proj_bias (3E,), or q/k/v_proj_weight when kdim or vdim
differs from embed_dim, and out_proj (a Linear). Masks mean what they mean in seqattn.attention.
"""
import numpy as np

from .. import ops
from .init import generator, xavier_uniform
from .linear import Linear
from .module import Module
from .parameter import Parameter


class MultiheadAttention(Module):
    """Shapes: query (B, N, E), key (B, M, kdim), value (B, M, vdim) -> out (B, N, E).

    ``dropout`` must be 0: the fused attention operator never forms the attention matrix, so
    there is nothing to drop (the Transformer layers still drop their residual branches).
    ``rotary`` (a :class:`RotaryEmbedding`) rotates queries and keys by their positions;
    ``alibi_slopes`` (H,) adds ALiBi's linear distance penalty per head.
    """

    def __init__(self, embed_dim, num_heads, dropout=0.0, bias=True, kdim=None, vdim=None,
                 rotary=None, alibi_slopes=None, dtype=np.float32, seed=None):
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
        if alibi_slopes is not None:
            self.register_buffer("alibi_slopes", np.asarray(alibi_slopes, dtype=dtype))
        else:
            self.alibi_slopes = None

    def _projection(self, i, attr):
        """(weight, bias) of projection i (0 = q, 1 = k, 2 = v) as views of the parameters;
        ``attr`` is "data" or "grad"."""
        E = self.embed_dim
        if self.packed:
            weight = getattr(self.in_proj_weight, attr)[i * E:(i + 1) * E]
        else:
            weight = getattr((self.q_proj_weight, self.k_proj_weight, self.v_proj_weight)[i],
                             attr)
        bias = None
        if self.in_proj_bias is not None:
            bias = getattr(self.in_proj_bias, attr)[i * E:(i + 1) * E]
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

    def forward(self, query, key=None, value=None, key_padding_mask=None, attn_mask=None,
                bias=None, need_weights=False, is_causal=False):
        """Returns (out (B, N, E), weights (B, H, N, M) or None). key and value default to
        query (self-attention)."""
        key = query if key is None else key
        value = key if value is None else value
        self._check_inputs(query, key, value)
        H = self.num_heads
        packed_self = self.packed and key is query and value is query
        if packed_self:
            # Self-attention: one GEMM against the packed (3E, E) weight puts q, k and v side by
            # side, and the heads are split from there.
            bias_data = None if self.in_proj_bias is None else self.in_proj_bias.data
            q, k, v = ops.split_heads(ops.linear(query, self.in_proj_weight.data, bias_data), H,
                                      parts=3)
        else:
            heads = []
            for i, x in enumerate((query, key, value)):
                weight, b = self._projection(i, "data")
                heads.append(ops.split_heads(ops.linear(x, weight, b), H))  # (B, H, len, D)
            q, k, v = heads
        if self.rotary is not None:
            q, k = self.rotary.rotate(q), self.rotary.rotate(k)
        options = dict(causal=is_causal, key_padding_mask=key_padding_mask,
                       attn_mask=attn_mask, bias=bias, alibi_slopes=self.alibi_slopes)
        out_heads, lse = ops.attention(q, k, v, return_lse=True, **options)
        merged = ops.merge_heads(out_heads)  # (B, N, E)
        out = self.out_proj(merged)
        self.save_for_backward(query=query, key=key, value=value, q=q, k=k, v=v,
                               out_heads=out_heads, lse=lse, options=options,
                               packed_self=packed_self)
        weights = ops.attention_weights(q, k, **options) if need_weights else None
        return out, weights

    def _head_gradients(self, dout):
        """(dq, dk, dv) of the projected heads, each (B, H, len, D), from dout (B, N, E)."""
        s = self.saved()
        d_heads = ops.split_heads(self.out_proj.backward(dout), self.num_heads)
        dq, dk, dv, _ = ops.attention_backward(d_heads, s["q"], s["k"], s["v"], s["out_heads"],
                                               s["lse"], **s["options"])
        if self.rotary is not None:
            dq, dk = self.rotary.rotate_backward(dq), self.rotary.rotate_backward(dk)
        return dq, dk, dv

    def backward(self, dout):
        """Returns (dquery, dkey, dvalue); adds the parameter gradients."""
        s = self.saved()
        grads = []
        for i, (d, x) in enumerate(zip(self._head_gradients(dout),
                                       (s["query"], s["key"], s["value"]))):
            weight, _ = self._projection(i, "data")
            weight_grad, bias_grad = self._projection(i, "grad")
            grads.append(ops.linear_backward(ops.merge_heads(d), x, weight,
                                             weight_grad=weight_grad, bias_grad=bias_grad))
        return tuple(grads)

    def self_attention_backward(self, dout):
        """For self-attention (one tensor passed as query, key and value): returns its gradient,
        dquery + dkey + dvalue, and adds the parameter gradients.

        With the packed projection this is one GEMM per gradient over the packed weight instead
        of three and two sums.
        """
        s = self.saved()
        if not (s["query"] is s["key"] and s["query"] is s["value"]):
            raise ValueError("self_attention_backward needs a forward with one tensor as query, "
                             "key and value; call backward(dout) for cross-attention")
        if not s["packed_self"]:
            dquery, dkey, dvalue = self.backward(dout)
            return ops.add_into(ops.add_into(dquery, dkey), dvalue)
        bias_grad = None if self.in_proj_bias is None else self.in_proj_bias.grad
        return ops.linear_backward(ops.merge_heads(*self._head_gradients(dout)), s["query"],
                                   self.in_proj_weight.data,
                                   weight_grad=self.in_proj_weight.grad, bias_grad=bias_grad)
