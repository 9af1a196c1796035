"""The CPU attention at tiny tile sizes, so that every case crosses many tile edges.

Same signatures as ``seqattn.attention`` / ``seqattn.attention_backward``; the block sizes are
the kernels' own arguments, which the public ops leave at their defaults.
"""
import numpy as np

from seqattn.kernels.cpu import attention as cpu_attention
from seqattn.ops.attention import AttentionGradients, _structured_outputs
from seqattn.ops.attention_inputs import prepare_attention, shapes_of
from seqattn.ops.structured_bias import PairBiasGradients, distance_gradients

# Tiny tiles make every case cross many tile edges and split keys into several dQ chunks.
TINY_Q, TINY_K = 3, 4


def tiny_tile_attention(q, k, v, return_lse=False, **opts):
    call = prepare_attention(q, k, v, **opts)
    B, H, Hkv, N, M, D = shapes_of(call)
    out, lse = np.empty((B, H, N, D), q.dtype), np.empty((B, H, N), q.dtype)
    cpu_attention.attention_forward(out, lse, call, TINY_Q, TINY_K)
    return (out, lse) if return_lse else out


def tiny_tile_backward(dout, q, k, v, out, lse, bias_requires_grad=False, **opts):
    call = prepare_attention(q, k, v, **opts)
    dq, dk, dv = np.empty_like(q), np.empty_like(k), np.empty_like(v)
    structured = cpu_attention.StructuredGrads(*_structured_outputs(call))
    cpu_attention.attention_backward(dq, dk, dv, structured, dout, out, lse, call, TINY_Q,
                                     TINY_K)
    dbias = None
    if bias_requires_grad:
        dbias = np.empty(call.bias.shape, q.dtype)
        cpu_attention.attention_bias_grad(dbias, dout, out, lse, call, TINY_Q, TINY_K)
        dbias = dbias.reshape(call.bias_shape)
    distance = pair = None
    if call.distance.has:
        distance = distance_gradients(call.distance, *structured[:3])
    if call.pair.mode:
        pair = PairBiasGradients(structured.pair_table)
    return AttentionGradients(dq, dk, dv, dbias, distance, pair)
