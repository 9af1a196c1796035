"""N -> 1 pooling heads: one vector per sequence from encoded tokens (B, N, E) -> (B, E).

* :class:`MaskedMeanPooling` the mean over unpadded tokens.
* :class:`ClassTokenPooling` the output at a learned class token that the encoder put first
  (``EncoderConfig(class_token=True)``), which attended to the whole sequence.
* :class:`AttentionPooling` a learned query attending over the tokens (multi-head), so the model
  learns which tokens matter.
"""
import numpy as np

from .. import ops
from ..backend import empty_like_on
from ..nn import Module, MultiheadAttention, Parameter
from ..nn.init import generator, normal


class MaskedMeanPooling(Module):
    def forward(self, x, key_padding_mask=None):
        self.save_for_backward(x=x, key_padding_mask=key_padding_mask)
        return ops.masked_mean(x, key_padding_mask)

    def backward(self, dout):
        s = self.saved()
        return ops.masked_mean_backward(dout, s["x"], s["key_padding_mask"])


class ClassTokenPooling(Module):
    """Takes token 0; the key_padding_mask is accepted for a uniform call and not needed."""

    def forward(self, x, key_padding_mask=None):
        self.save_for_backward(x=x)
        return ops.first_token(x)

    def backward(self, dout):
        return ops.first_token_backward(dout, self.saved()["x"])


class AttentionPooling(Module):
    """softmax(q K^T) V with one learned query q (E,) per model, keys and values the tokens."""

    def __init__(self, embed_dim, num_heads, dtype=np.float32, seed=None):
        super().__init__()
        rng = generator(seed)
        self.query = Parameter(normal(rng, (embed_dim,), dtype, std=0.02))
        self.attention = MultiheadAttention(embed_dim, num_heads, dtype=dtype, seed=rng)

    def forward(self, x, key_padding_mask=None):
        B, _, E = (int(s) for s in x.shape)
        no_tokens = empty_like_on(self.device, (B, 0, E), x.dtype)
        queries = ops.prepend_token(no_tokens, self.query.data)  # (B, 1, E), the query repeated
        self.save_for_backward(no_tokens=no_tokens)
        out, _ = self.attention(queries, x, x, key_padding_mask=key_padding_mask)
        return out.reshape(B, E)

    def backward(self, dout):
        B, E = (int(s) for s in dout.shape)
        dquery, dkey, dvalue = self.attention.backward(dout.reshape(B, 1, E))
        ops.prepend_token_backward(dquery, self.saved()["no_tokens"], token_grad=self.query.grad)
        return ops.add_into(dkey, dvalue)
