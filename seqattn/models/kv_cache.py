"""Decoding one position at a time with a key/value cache, for the Transformer decoder layers.

Step t computes keys and values for the new position only and writes them into per-layer
caches (B, H, max_len, D); the query attends to positions 0..t, the later cache slots being
masked as padding, so each step costs O(t) instead of re-running the whole prefix. The
cross-attention keys and values of the encoder's memory are projected once. The arithmetic is
the decoder layers' own (their Linear, LayerNorm and activation modules, in evaluation mode);
only the attention projections are split per position here, which MultiheadAttention keeps
inside its forward.
"""
import numpy as np

from .. import ops
from ..backend import empty_like_on
from ..nn.placement import moved


def _projection(attn, i):
    """(weight, bias) of attention projection i (0 = q, 1 = k, 2 = v) of a MultiheadAttention,
    in the layout torch.nn uses (packed in_proj_weight, or q/k/v_proj_weight)."""
    E = attn.embed_dim
    if attn.packed:
        weight = attn.in_proj_weight.data[i * E:(i + 1) * E]
    else:
        weight = (attn.q_proj_weight, attn.k_proj_weight, attn.v_proj_weight)[i].data
    bias = None if attn.in_proj_bias is None else attn.in_proj_bias.data[i * E:(i + 1) * E]
    return weight, bias


def _heads(attn, x, i):
    weight, bias = _projection(attn, i)
    return ops.split_heads(ops.linear(x, weight, bias), attn.num_heads)  # (B, H, n, D)


def _check_plain(attn):
    if attn.rotary is not None or attn.alibi_slopes is not None:
        raise ValueError("cached decoding supports attention without rotary or ALiBi "
                         "positions (the task models add sinusoidal positions to the inputs)")


class DecoderCache:
    """The state of step-by-step decoding through ``decoder`` (a TransformerDecoder) against
    ``memory`` (B, M, E) for up to ``max_len`` positions."""

    def __init__(self, decoder, memory, memory_key_padding_mask, max_len):
        self.decoder, self.max_len = decoder, max_len
        self.memory_key_padding_mask = memory_key_padding_mask
        self.position = 0
        B = int(memory.shape[0])
        self.layers = []
        for layer in decoder.layers:
            _check_plain(layer.self_attn)
            _check_plain(layer.multihead_attn)
            H = layer.self_attn.num_heads
            D = layer.self_attn.embed_dim // H
            shape = (B, H, max_len, D)
            self.layers.append({
                "keys": ops.fill(empty_like_on(decoder.device, shape, memory.dtype), 0.0),
                "values": ops.fill(empty_like_on(decoder.device, shape, memory.dtype), 0.0),
                "memory_keys": _heads(layer.multihead_attn, memory, 1),
                "memory_values": _heads(layer.multihead_attn, memory, 2),
            })

    def _self_attention(self, attn, x, cache, padding):
        ops.write_positions(cache["keys"], _heads(attn, x, 1), self.position)
        ops.write_positions(cache["values"], _heads(attn, x, 2), self.position)
        out = ops.attention(_heads(attn, x, 0), cache["keys"], cache["values"],
                            key_padding_mask=padding)
        return attn.out_proj(ops.merge_heads(out))

    def _cross_attention(self, attn, x, cache):
        out = ops.attention(_heads(attn, x, 0), cache["memory_keys"], cache["memory_values"],
                            key_padding_mask=self.memory_key_padding_mask)
        return attn.out_proj(ops.merge_heads(out))

    def step(self, x):
        """x (B, 1, E), the embedded input at the next position -> the decoder's output there."""
        if self.position >= self.max_len:
            raise ValueError(f"the cache holds {self.max_len} positions; all are used")
        B = int(x.shape[0])
        not_yet = np.broadcast_to(np.arange(self.max_len) > self.position, (B, self.max_len))
        padding = moved(np.ascontiguousarray(not_yet), self.decoder.device)
        for layer, cache in zip(self.decoder.layers, self.layers):
            x = self._layer_step(layer, x, cache, padding)
        self.position += 1
        return x if self.decoder.norm is None else self.decoder.norm(x)

    def _layer_step(self, layer, x, cache, padding):
        def feed_forward(h):
            return layer.linear2(layer.activation(layer.linear1(h)))

        if layer.norm_first:
            x = ops.add(x, self._self_attention(layer.self_attn, layer.norm1(x), cache, padding))
            x = ops.add(x, self._cross_attention(layer.multihead_attn, layer.norm2(x), cache))
            return ops.add(x, feed_forward(layer.norm3(x)))
        x = layer.norm1(ops.add(x, self._self_attention(layer.self_attn, x, cache, padding)))
        x = layer.norm2(ops.add(x, self._cross_attention(layer.multihead_attn, x, cache)))
        return layer.norm3(ops.add(x, feed_forward(x)))
