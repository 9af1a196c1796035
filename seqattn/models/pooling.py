"""N -> 1 pooling heads: one vector per sequence from encoded tokens (B, N, E) -> (B, E).

* :class:`MaskedMeanPooling` the mean over unpadded tokens.
* :class:`ClassTokenPooling` the output at a learned class token that the encoder put first
  (``EncoderConfig(class_token=True)``), which attended to the whole sequence.
* :class:`AttentionPooling` a learned query attending over the tokens (multi-head), so the model
  learns which tokens matter.
"""
import numpy as np

from .. import autodiff
from ..backend import empty_like_on
from ..nn import Module, MultiheadAttention, Parameter
from ..nn.init import generator, normal


class MaskedMeanPooling(Module):
    def forward(self, x, key_padding_mask=None):
        return autodiff.masked_mean(x, key_padding_mask)


class ClassTokenPooling(Module):
    """Takes token 0; the key_padding_mask is accepted for a uniform call and not needed."""

    def forward(self, x, key_padding_mask=None):
        return autodiff.first_token(x)


class AttentionPooling(Module):
    """softmax(q K^T) V with one learned query q (E,) per model, keys and values the tokens."""

    def __init__(self, embed_dim, num_heads, dtype=np.float32, seed=None):
        super().__init__()
        rng = generator(seed)
        self.query = Parameter(normal(rng, (embed_dim,), dtype, std=0.02))
        self.attention = MultiheadAttention(embed_dim, num_heads, dtype=dtype, seed=rng)

    def forward(self, x, key_padding_mask=None):
        B, _, E = x.shape
        no_tokens = empty_like_on(self.device, (B, 0, E), x.dtype)
        queries = autodiff.prepend_token(no_tokens, self.query)  # (B, 1, E), the query repeated
        out, _ = self.attention(queries, x, x, key_padding_mask=key_padding_mask)
        return out.reshape(B, E)
