"""Self-attention of a packed projection's heads (``seqattn.ops.packed_attention``) as a
differentiable op: qkv, an optional dense bias, and the structured biases' tables and
positions, as :mod:`~seqattn.autodiff.attention_function` has them."""
from ..ops.packed_attention import (packed_attention_backward_of_call, packed_attention_of_call,
                                    prepare_packed_attention)
from .attention_function import biases_gradients, biases_tensors, received_biases
from .function import Function
from .tensor import unwrap


class PackedAttention(Function):
    @staticmethod
    def forward(ctx, qkv, bias, distance_table, distance_x, distance_y, pair_table, num_heads,
                options, distance_bias, pair_bias, deterministic=True):
        distance_bias, pair_bias = received_biases(distance_bias, pair_bias, distance_table,
                                                   distance_x, distance_y, pair_table)
        # the checked arguments serve the backward too
        packed = prepare_packed_attention(qkv, num_heads, bias=bias, distance_bias=distance_bias,
                                          pair_bias=pair_bias, **options)
        out, heads, lse = packed_attention_of_call(packed)
        ctx.save(packed=packed, heads=heads, lse=lse, deterministic=deterministic)
        return out

    @staticmethod
    def backward(ctx, dout):
        s = ctx.saved
        grads = packed_attention_backward_of_call(s["packed"], dout, s["heads"], s["lse"],
                                                  bias_requires_grad=ctx.needs_grad[1],
                                                  positions_require_grad=any(ctx.needs_grad[3:5]),
                                                  deterministic=s["deterministic"])
        return (grads.dqkv, grads.dbias, *biases_gradients(grads), None, None, None, None)


def packed_attention(qkv, num_heads, bias=None, distance_bias=None, pair_bias=None,
                     deterministic=True, **options):
    """Self-attention of the heads packed side by side in qkv (B, N, 3 * H * D) -> tokens
    (B, N, H * D): ``merge_heads(attention(*split_heads(qkv, H, parts=3), ...))`` without
    splitting and merging the heads where the kernels read them in place
    (:mod:`seqattn.ops.packed_attention`). Gradients as in :func:`attention`: qkv's in its
    layout, a dense bias's and the structured biases' tables' and positions' where they are
    Tensors that require them.

    Parameters
    ----------
    qkv : Tensor or array (B, N, 3 * H * D)
        q, k and v side by side (a packed in-projection's output), each of H heads of D.
    num_heads : int
        H.
    bias : Tensor or array, broadcastable to (B, H, N, N), optional
        Added to the scores; default None.
    distance_bias, pair_bias : seqattn.ops.DistanceBias, seqattn.ops.PairBias, optional
        The structured biases, as in :func:`attention`; default None.
    deterministic : bool, default True
        Whether the backward pass adds the gradients in a fixed order (the same bits every run)
        rather than with atomics.
    **options
        Further options of :func:`seqattn.ops.attention`: ``causal``, ``key_padding_mask``,
        ``attn_mask``, ``alibi_slopes``, ``window``, ``scale``.

    Returns
    -------
    Tensor (B, N, H * D)
        The heads' outputs side by side.
    """
    options = {name: unwrap(x) for name, x in options.items()}
    return PackedAttention.apply(qkv, bias, *biases_tensors(distance_bias, pair_bias),
                                 num_heads, options, distance_bias, pair_bias,
                                 deterministic=deterministic)
