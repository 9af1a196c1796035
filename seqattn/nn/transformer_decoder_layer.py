"""One Transformer decoder layer (self-attention, cross-attention to the encoder's memory,
feed-forward), batch-first, with the parameter names of torch.nn.TransformerDecoderLayer:
self_attn, multihead_attn, linear1, linear2, norm1, norm2, norm3."""
import numpy as np

from .activations import activation_named
from .dropout import Dropout
from .init import generator
from .layer_norm import LayerNorm
from .linear import Linear
from .module import Module
from .multihead_attention import MultiheadAttention
from .placement import check_tokens


class TransformerDecoderLayer(Module):
    """One Transformer decoder layer (causal self-attention, cross-attention to the encoder's
    memory, a feed-forward block), with torch.nn.TransformerDecoderLayer's names.

    tgt (B, N, E), memory (B, M, E) -> (B, N, E). Post-norm or pre-norm (``norm_first``) and
    dropout as in :class:`TransformerEncoderLayer`.

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
    dtype : NumPy float type, default numpy.float32
        Type of the parameters and of the activations they produce (float32 or float64).
    seed : int, numpy.random.Generator or None, default None
        Seed of the initial weights. One Generator shared by a model's modules makes the whole
        model reproducible from one seed; None draws fresh entropy.
    """

    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1, activation="relu",
                 layer_norm_eps=1e-5, batch_first=True, norm_first=False, bias=True,
                 rotary=None, alibi_slopes=None, dtype=np.float32, seed=None):
        super().__init__()
        if not batch_first:
            raise ValueError("seqattn is batch-first: tokens are (B, N, E); pass batch_first=True")
        rng = generator(seed)
        self.d_model, self.norm_first = d_model, norm_first
        self.self_attn = MultiheadAttention(d_model, nhead, bias=bias, rotary=rotary,
                                            alibi_slopes=alibi_slopes, dtype=dtype, seed=rng)
        self.multihead_attn = MultiheadAttention(d_model, nhead, bias=bias, dtype=dtype, seed=rng)
        self.linear1 = Linear(d_model, dim_feedforward, bias, dtype, rng)
        self.dropout = Dropout(dropout, rng)
        self.linear2 = Linear(dim_feedforward, d_model, bias, dtype, rng)
        self.norm1 = LayerNorm(d_model, layer_norm_eps, dtype)
        self.norm2 = LayerNorm(d_model, layer_norm_eps, dtype)
        self.norm3 = LayerNorm(d_model, layer_norm_eps, dtype)
        self.dropout1 = Dropout(dropout, rng)
        self.dropout2 = Dropout(dropout, rng)
        self.dropout3 = Dropout(dropout, rng)
        self.activation = activation_named(activation)

    def _self_block(self, x, mask, padding, causal, cache):
        out, _ = self.self_attn(x, x, x, key_padding_mask=padding, attn_mask=mask,
                                is_causal=causal, cache=cache)
        return self.dropout1(out)

    def _cross_block(self, x, memory, mask, padding, cache):
        out, _ = self.multihead_attn(x, memory, memory, key_padding_mask=padding,
                                     attn_mask=mask, cache=cache)
        return self.dropout2(out)

    def _feed_forward_block(self, x):
        return self.dropout3(self.linear2(self.dropout(self.activation(self.linear1(x)))))

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, tgt_is_causal=False, cache=None):
        """tgt (B, N, E), memory (B, M, E) -> (B, N, E). Masks are bool "may attend" masks.
        ``cache`` is a (self-attention, memory) pair of :class:`KeyValueCache` for decoding one
        position at a time (see ``seqattn.models.kv_cache``)."""
        self_cache, memory_cache = (None, None) if cache is None else cache
        self.check_device(tgt=tgt, memory=memory)
        check_tokens("tgt", tgt, self.d_model)
        check_tokens("memory", memory, self.d_model)
        x = tgt
        if self.norm_first:
            x = x + self._self_block(self.norm1(x), tgt_mask, tgt_key_padding_mask, tgt_is_causal,
                                     self_cache)
            x = x + self._cross_block(self.norm2(x), memory, memory_mask, memory_key_padding_mask,
                                      memory_cache)
            return x + self._feed_forward_block(self.norm3(x))
        x = self.norm1(x + self._self_block(x, tgt_mask, tgt_key_padding_mask, tgt_is_causal,
                                            self_cache))
        x = self.norm2(x + self._cross_block(x, memory, memory_mask, memory_key_padding_mask,
                                             memory_cache))
        return self.norm3(x + self._feed_forward_block(x))
