"""Additive (Bahdanau) attention: score(q, k) = v . tanh(W_q q + W_k k + b), then softmax over
keys and a weighted sum of values. The other way of scoring a query against keys."""
import numpy as np

from .. import ops
from ..backend import empty_like_on
from .init import generator, uniform
from .linear import Linear
from .module import Module
from .parameter import Parameter


class AdditiveAttention(Module):
    """query (B, N, query_dim), key (B, M, key_dim), value (B, M, Dv) -> (B, N, Dv).

    The scores come from the additive-score kernel; the masked softmax and the weighted sum are
    the fused attention operator's, fed the scores as an additive bias with zero queries and keys
    (one head), so masks mean what they mean in ``seqattn.attention``.
    """

    def __init__(self, query_dim, key_dim, hidden_dim, dtype=np.float32, seed=None):
        super().__init__()
        rng = generator(seed)
        self.query_proj = Linear(query_dim, hidden_dim, False, dtype, rng)
        self.key_proj = Linear(key_dim, hidden_dim, True, dtype, rng)
        self.v = Parameter(uniform(rng, (hidden_dim,), 1.0 / np.sqrt(hidden_dim), dtype))

    def forward(self, query, key, value, key_padding_mask=None, need_weights=False):
        """Returns (out (B, N, Dv), weights (B, N, M) or None)."""
        self.check_device(query=query, key=key, value=value)
        qp, kp = self.query_proj(query), self.key_proj(key)
        scores = ops.additive_scores(qp, kp, self.v.data)
        B, N, M = (int(s) for s in scores.shape)
        Dv = int(value.shape[2])
        zeros_q = ops.fill(empty_like_on(self.device, (B, 1, N, Dv), scores.dtype), 0.0)
        zeros_k = ops.fill(empty_like_on(self.device, (B, 1, M, Dv), scores.dtype), 0.0)
        options = dict(bias=scores.reshape(B, 1, N, M), key_padding_mask=key_padding_mask,
                       scale=1.0)
        v_heads = value.reshape(B, 1, M, Dv)
        out, lse = ops.attention(zeros_q, zeros_k, v_heads, return_lse=True, **options)
        self.save_for_backward(qp=qp, kp=kp, zeros_q=zeros_q, zeros_k=zeros_k,
                               v_heads=v_heads, out=out, lse=lse, options=options)
        weights = None
        if need_weights:
            weights = ops.attention_weights(zeros_q, zeros_k, **options).reshape(B, N, M)
        return out.reshape(B, N, Dv), weights

    def backward(self, dout):
        """Returns (dquery, dkey, dvalue); adds the parameter gradients."""
        s = self.saved()
        B, _, N, Dv = (int(n) for n in s["out"].shape)
        M = int(s["v_heads"].shape[2])
        _, _, dv, dbias = ops.attention_backward(
            dout.reshape(B, 1, N, Dv), s["zeros_q"], s["zeros_k"], s["v_heads"], s["out"],
            s["lse"], bias_requires_grad=True, **s["options"])
        dqp, dkp = ops.additive_scores_backward(dbias.reshape(B, N, M), s["qp"], s["kp"],
                                                self.v.data, v_grad=self.v.grad)
        return self.query_proj.backward(dqp), self.key_proj.backward(dkp), dv.reshape(B, M, Dv)
