"""Self-attention of the heads packed side by side in one projection, with no split or merge.

Shapes: qkv (B, N, 3 * H * D), q, k and v side by side, each of H heads of D side by side (a
packed in-projection's output, the layout ``split_heads(qkv, H, parts=3)`` reads) -> tokens
(B, N, H * D), the heads side by side (what ``merge_heads`` makes).

On the CPU at the lengths of the short-sequence kernels (kernels/cpu/attention_small.py), the
kernels read each (batch, head)'s rows of q, k and v straight out of qkv, and write its output
rows into the tokens, through strided (B, H, N, D) views (:func:`heads_of`); the backward reads
dout and out and writes dq, dk and dv the same way, into one (B, N, 3 * H * D) gradient. Those
kernels only ever take (N, D) rows with unit stride along D, so the views cost nothing but a
compiled signature of their own: the copies of splitting the heads and merging them, and the
gradients' merge and split, are not made (at a small model's sizes several percent of a
training step; benchmarks/profile_train_step.py). Elsewhere (the GPU; longer sequences, whose
tiled kernels take contiguous heads) the heads are split, attended and merged as
:func:`~seqattn.ops.attention` does. The results are the same bits either way: the kernels'
arithmetic does not depend on where their rows lie (tests/ops/test_packed_attention.py).
"""
from collections import namedtuple

import numpy as np

from ..backend import empty_like_on
from .attention import (attention_backward_of_call, attention_of_call, bias_gradient,
                        short_sequence_kernels)
from .attention_inputs import prepare_attention
from .checks import expect_shape, prepared, shape_of
from .layers import merge_heads, split_heads

PackedAttentionCall = namedtuple("PackedAttentionCall", "call num_heads views")
PackedAttentionCall.__doc__ = (
    "A checked packed self-attention: the AttentionCall of its heads (views of qkv where "
    "``views``, else split copies) and H.")


class PackedAttentionGradients(namedtuple("PackedAttentionGradients", "dqkv dbias")):
    """What :func:`packed_attention_backward` returns: unpacks as ``dqkv, dbias``; the
    structured biases' gradients in ``distance_bias`` and ``pair_bias``, as in
    :class:`~seqattn.ops.attention.AttentionGradients`."""

    def __new__(cls, dqkv, dbias, distance_bias=None, pair_bias=None):
        grads = super().__new__(cls, dqkv, dbias)
        grads.distance_bias = distance_bias
        grads.pair_bias = pair_bias
        return grads


def heads_of(tokens, num_heads, parts=1):
    """The (B, H, N, D) views of the ``parts`` blocks of heads side by side in the C-contiguous
    tokens (B, N, parts * H * D): one array for one part, else a tuple."""
    B, N, width = tokens.shape
    # (B, N, parts, H, D) -> (parts, B, H, N, D): block p's head h at columns (p H + h) D
    blocks = tokens.reshape(B, N, parts, num_heads, width // (parts * num_heads))
    blocks = blocks.transpose(2, 0, 3, 1, 4)
    return blocks[0] if parts == 1 else tuple(blocks)


def prepare_packed_attention(qkv, num_heads, **options):
    """Check qkv and ``options`` (those of :func:`~seqattn.ops.attention`) and return a
    :class:`PackedAttentionCall`."""
    device, a = prepared({"qkv": qkv})
    qkv = a["qkv"]
    if not isinstance(num_heads, (int, np.integer)) or isinstance(num_heads, bool) \
            or num_heads < 1:
        raise ValueError(f"num_heads must be a positive integer, got {num_heads!r}")
    if qkv.ndim != 3 or int(qkv.shape[2]) % (3 * num_heads) or int(qkv.shape[2]) == 0:
        raise ValueError(f"qkv has shape {shape_of(qkv)}; expected (B, N, 3 * H * D): q, k "
                         f"and v side by side, their last axis divisible by 3 * num_heads = "
                         f"{3 * num_heads}")
    views = short_sequence_kernels(device, int(qkv.shape[1])) is not None
    q, k, v = heads_of(qkv, num_heads, 3) if views else split_heads(qkv, num_heads, parts=3)
    call = prepare_attention(q, k, v, keep_views=views, **options)
    return PackedAttentionCall(call, int(num_heads), views)


def packed_attention(qkv, num_heads, *, causal=False, key_padding_mask=None, attn_mask=None,
                     bias=None, alibi_slopes=None, window=None, scale=None, distance_bias=None,
                     pair_bias=None, return_lse=False):
    """Self-attention of the heads in a packed projection, qkv (B, N, 3 * H * D) -> tokens
    (B, N, H * D): ``merge_heads(attention(*split_heads(qkv, H, parts=3), ...))`` without the
    copies of the split and the merge where the short-sequence CPU kernels run.

    Parameters
    ----------
    qkv : float32 or float64 array (B, N, 3 * H * D)
        q, k and v side by side along the last axis, each of the H heads side by side.
    num_heads : int
        H.
    causal, key_padding_mask, attn_mask, bias, alibi_slopes, window, scale : optional
        The options of :func:`~seqattn.ops.attention`, with the same meaning (M = N).
    distance_bias, pair_bias : optional
        The structured biases of :func:`~seqattn.ops.attention`.
    return_lse : bool, default False
        Also return the per-row log-sum-exp (B, H, N), which
        :func:`packed_attention_backward` needs.

    Returns
    -------
    out : array (B, N, H * D)
        The heads' outputs side by side, on the device of ``qkv``.
    lse : array (B, H, N)
        Only with ``return_lse``.
    """
    packed = prepare_packed_attention(
        qkv, num_heads, causal=causal, key_padding_mask=key_padding_mask, attn_mask=attn_mask,
        bias=bias, alibi_slopes=alibi_slopes, window=window, scale=scale,
        distance_bias=distance_bias, pair_bias=pair_bias)
    out, _, lse = packed_attention_of_call(packed)
    return (out, lse) if return_lse else out


def packed_attention_of_call(packed):
    """:func:`packed_attention` of a prepared call: (out (B, N, H * D), its heads (B, H, N, D)
    as :func:`packed_attention_backward_of_call` reads them, lse (B, H, N))."""
    call = packed.call
    if not packed.views:
        heads, lse = attention_of_call(call, return_lse=True)
        return merge_heads(heads), heads, lse
    B, H, N, D = shape_of(call.q)
    out = empty_like_on(call.device, (B, N, H * D), call.q.dtype)
    heads = heads_of(out, H)
    _, lse = attention_of_call(call, return_lse=True, out=heads)
    return out, heads, lse


def packed_attention_backward(dout, qkv, num_heads, out, lse, *, causal=False,
                              key_padding_mask=None, attn_mask=None, bias=None,
                              alibi_slopes=None, window=None, scale=None, distance_bias=None,
                              pair_bias=None, bias_requires_grad=False, deterministic=True):
    """Gradients of :func:`packed_attention` given ``dout`` = dLoss/dout (B, N, H * D).

    Parameters
    ----------
    dout : array (B, N, H * D)
        The gradient of the loss with respect to the output.
    qkv, num_heads : array (B, N, 3 * H * D) and int
        The inputs of the forward call.
    out, lse : arrays (B, N, H * D) and (B, H, N)
        What ``packed_attention(..., return_lse=True)`` returned for these inputs and options.
    causal, key_padding_mask, attn_mask, bias, alibi_slopes, window, scale : optional
        The forward call's options, passed again.
    distance_bias, pair_bias : optional
        The forward call's structured biases, passed again.
    bias_requires_grad, deterministic : bool
        As in :func:`~seqattn.ops.attention_backward`.

    Returns
    -------
    PackedAttentionGradients
        Unpacks as ``(dqkv, dbias)``: dqkv (B, N, 3 * H * D) in the layout of qkv, dbias as in
        :func:`~seqattn.ops.attention_backward`; the structured biases' gradients in its
        attributes ``distance_bias`` and ``pair_bias``.
    """
    packed = prepare_packed_attention(
        qkv, num_heads, causal=causal, key_padding_mask=key_padding_mask, attn_mask=attn_mask,
        bias=bias, alibi_slopes=alibi_slopes, window=window, scale=scale,
        distance_bias=distance_bias, pair_bias=pair_bias)
    B, H, N, D = shape_of(packed.call.q)
    _, a = prepared({"out": out})
    expect_shape("out", a["out"], (B, N, H * D), "(B, N, H * D)")
    heads = heads_of(a["out"], H) if packed.views else split_heads(a["out"], H)
    return packed_attention_backward_of_call(packed, dout, heads, lse,
                                             bias_requires_grad=bias_requires_grad,
                                             deterministic=deterministic)


def packed_attention_backward_of_call(packed, dout, out, lse, *, bias_requires_grad=False,
                                      positions_require_grad=True, deterministic=True):
    """:func:`packed_attention_backward` of the forward's prepared call, given ``out`` as
    :func:`packed_attention_of_call` returned its heads; ``positions_require_grad`` as in
    :func:`~seqattn.ops.attention.attention_backward_of_call`."""
    call, H = packed.call, packed.num_heads
    B, _, N, D = shape_of(call.q)
    _, a = prepared({"dout": dout})
    dout = a["dout"]
    expect_shape("dout", dout, (B, N, H * D), "(B, N, H * D)")
    if not packed.views:
        grads = attention_backward_of_call(
            call, split_heads(dout, H), out, lse, bias_requires_grad=bias_requires_grad,
            positions_require_grad=positions_require_grad, deterministic=deterministic)
        return PackedAttentionGradients(merge_heads(grads.dq, grads.dk, grads.dv), grads.dbias,
                                        grads.distance_bias, grads.pair_bias)
    if bias_requires_grad and not call.has_bias:
        raise ValueError("bias_requires_grad=True but no bias was passed")
    dqkv = empty_like_on(call.device, (B, N, 3 * H * D), call.q.dtype)
    dout_heads = heads_of(dout, H)
    grads = attention_backward_of_call(call, dout_heads, out, lse,
                                       positions_require_grad=positions_require_grad,
                                       grads=heads_of(dqkv, H, 3))
    dbias = None
    if bias_requires_grad:  # the tiled kernel's, which takes contiguous heads
        dense = call._replace(**{name: np.ascontiguousarray(getattr(call, name))
                                 for name in "qkv"})
        dbias = bias_gradient(dense, np.ascontiguousarray(dout_heads),
                              np.ascontiguousarray(out), lse)
    return PackedAttentionGradients(dqkv, dbias, grads.distance_bias, grads.pair_bias)
