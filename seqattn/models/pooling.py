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
    """The mean of the unpadded tokens: x (B, N, E) and key_padding_mask (B, N) -> (B, E)."""

    def __init__(self):
        super().__init__()

    def forward(self, x, key_padding_mask=None):
        return autodiff.masked_mean(x, key_padding_mask)


class ClassTokenPooling(Module):
    """Token 0 (the class token the encoder put in front): x (B, N, E) -> (B, E).

    The key_padding_mask is accepted for a uniform call and not needed.
    """

    def __init__(self):
        super().__init__()

    def forward(self, x, key_padding_mask=None):
        return autodiff.first_token(x)


class AttentionPooling(Module):
    """Attention with one learned query: ``softmax(q K^T) V`` over the unpadded tokens,
    x (B, N, E) -> (B, E), the keys and values being the tokens.

    Parameters
    ----------
    embed_dim : int
        E, the width of the tokens.
    num_heads : int
        Heads; ``embed_dim`` must be a multiple of it.
    dtype : NumPy float type, default numpy.float32
        Type of the query and of the activations.
    seed : int, numpy.random.Generator or None, default None
        Seed of the initial query; None draws fresh entropy.
    """

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
