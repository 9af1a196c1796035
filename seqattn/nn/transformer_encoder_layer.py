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
    """Post-norm (``norm_first=False``, torch's default) or pre-norm. Dropout applies to the
    feed-forward hidden layer and to both residual branches; attention weights are not dropped
    (see :class:`MultiheadAttention`). ``rotary``, ``alibi_slopes``, ``distance_bias``,
    ``pair_bias`` and ``window`` go to the self-attention, as there."""

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
