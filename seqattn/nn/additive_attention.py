"""Additive (Bahdanau) attention: score(q, k) = v . tanh(W_q q + W_k k + b), then softmax over
keys and a weighted sum of values. The other way of scoring a query against keys."""
import numpy as np

from .. import autodiff, ops
from ..autodiff import unwrap
from ..backend import empty_like_on
from .init import generator, uniform
from .linear import Linear
from .module import Module
from .parameter import Parameter


class AdditiveAttention(Module):
    """Additive (Bahdanau) attention, ``score(q, k) = v^T tanh(W_q q + W_k k + b)``, one head.

    query (B, N, query_dim), key (B, M, key_dim), value (B, M, Dv) -> (B, N, Dv). The scores
    come from the additive-score kernel; the masked softmax and the weighted sum are the fused
    attention operator's, so masks mean what they mean in :func:`seqattn.attention`.

    Parameters
    ----------
    query_dim : int
        Width of the queries.
    key_dim : int
        Width of the keys.
    hidden_dim : int
        Width of the hidden layer the queries and keys are projected to.
    dtype : NumPy float type, default numpy.float32
        Type of the parameters and of the activations they produce (float32 or float64).
    seed : int, numpy.random.Generator or None, default None
        Seed of the initial weights. One Generator shared by a model's modules makes the whole
        model reproducible from one seed; None draws fresh entropy.
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
        scores = autodiff.additive_scores(qp, kp, self.v)
        B, N, M = scores.shape
        Dv = int(value.shape[2])
        zeros_q = ops.fill(empty_like_on(self.device, (B, 1, N, Dv), scores.dtype), 0.0)
        zeros_k = ops.fill(empty_like_on(self.device, (B, 1, M, Dv), scores.dtype), 0.0)
        bias = autodiff.reshape(scores, (B, 1, N, M))
        out = autodiff.attention(zeros_q, zeros_k, autodiff.reshape(value, (B, 1, M, Dv)), bias,
                                 key_padding_mask=key_padding_mask, scale=1.0)
        weights = None
        if need_weights:
            weights = ops.attention_weights(zeros_q, zeros_k, bias=unwrap(bias),
                                            key_padding_mask=key_padding_mask,
                                            scale=1.0).reshape(B, N, M)
        return autodiff.reshape(out, (B, N, Dv)), weights
