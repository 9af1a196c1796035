"""One Transformer encoder layer (self-attention and feed-forward), batch-first, with the
parameter names of torch.nn.TransformerEncoderLayer: self_attn, linear1, linear2, norm1, norm2."""
import numpy as np

from .activations import activation_named
from .dropout import Dropout
from .init import generator
from .layer_norm import LayerNorm
from .linear import Linear
from .module import Module
from .multihead_attention import MultiheadAttention
from .placement import check_tokens


class TransformerEncoderLayer(Module):
    """One Transformer encoder layer (self-attention and a feed-forward block, each with a
    residual connection and a layer norm), with torch.nn.TransformerEncoderLayer's names.

    src (B, N, E) -> (B, N, E). Post-norm (``norm_first=False``, torch's default) or pre-norm.
    Attention weights are not dropped (see :class:`MultiheadAttention`).

    Parameters
    ----------
    d_model : int
        Width E of the tokens.
    nhead : int
        Attention heads; ``d_model`` must be a multiple of it.
    dim_feedforward : int, default 2048
        Width of the feed-forward block's hidden layer.
    dropout : float, default 0.1
        Dropout on the feed-forward hidden layer and on the residual branches, in training.
    activation : str, default 'relu'
        The feed-forward activation: ``"relu"``, ``"gelu"`` or ``"silu"``.
    layer_norm_eps : float, default 1e-5
        The layer norms' epsilon.
    batch_first : bool, default True
        Must be True: tokens are (B, N, E) (accepted for torch's signature).
    norm_first : bool, default False
        Pre-norm (normalize before each sub-block) instead of torch's default post-norm.
    bias : bool, default True
        Whether the linear layers have biases.
    rotary : RotaryEmbedding, optional
        Rotary position embedding applied to the self-attention's queries and keys.
    alibi_slopes : array (H,), optional
        ALiBi's linear distance penalty per head, in the self-attention.
    distance_bias : DistanceBiasTable, optional
        Passed to the self-attention (structured bias from distances).
    pair_bias : PairBiasTable, optional
        Passed to the self-attention (structured bias from pair codes).
    window : tuple of int, optional
        ``(left, right)`` local attention, passed to the self-attention.
    dtype : NumPy float type, default numpy.float32
        Type of the parameters and of the activations they produce (float32 or float64).
    seed : int, numpy.random.Generator or None, default None
        Seed of the initial weights. One Generator shared by a model's modules makes the whole
        model reproducible from one seed; None draws fresh entropy.
    """

    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1, activation="relu",
                 layer_norm_eps=1e-5, batch_first=True, norm_first=False, bias=True,
                 rotary=None, alibi_slopes=None, distance_bias=None, pair_bias=None,
                 window=None, dtype=np.float32, seed=None):
        super().__init__()
        if not batch_first:
            raise ValueError("seqattn is batch-first: tokens are (B, N, E); pass batch_first=True")
        rng = generator(seed)
        self.d_model, self.norm_first = d_model, norm_first
        self.self_attn = MultiheadAttention(d_model, nhead, bias=bias, rotary=rotary,
                                            alibi_slopes=alibi_slopes,
                                            distance_bias=distance_bias, pair_bias=pair_bias,
                                            window=window, dtype=dtype, seed=rng)
        self.linear1 = Linear(d_model, dim_feedforward, bias, dtype, rng)
        self.dropout = Dropout(dropout, rng)
        self.linear2 = Linear(dim_feedforward, d_model, bias, dtype, rng)
        self.norm1 = LayerNorm(d_model, layer_norm_eps, dtype)
        self.norm2 = LayerNorm(d_model, layer_norm_eps, dtype)
        self.dropout1 = Dropout(dropout, rng)
        self.dropout2 = Dropout(dropout, rng)
        self.activation = activation_named(activation)

    def _attention_block(self, x, key_padding_mask, attn_mask, is_causal, structure):
        out, _ = self.self_attn(x, x, x, key_padding_mask=key_padding_mask,
                                attn_mask=attn_mask, is_causal=is_causal, structure=structure)
        return self.dropout1(out)

    def _feed_forward_block(self, x):
        return self.dropout2(self.linear2(self.dropout(self.activation(self.linear1(x)))))

    def forward(self, src, src_key_padding_mask=None, src_mask=None, is_causal=False,
                structure=None):
        """src (B, N, E) -> (B, N, E). ``src_mask`` is a bool "may attend" mask; ``structure``
        feeds the self-attention's structured biases."""
        self.check_device(src=src)
        check_tokens("src", src, self.d_model)
        x = src
        if self.norm_first:
            x = x + self._attention_block(self.norm1(x), src_key_padding_mask, src_mask,
                                          is_causal, structure)
            return x + self._feed_forward_block(self.norm2(x))
        x = self.norm1(x + self._attention_block(x, src_key_padding_mask, src_mask, is_causal,
                                                 structure))
        return self.norm2(x + self._feed_forward_block(x))
