"""The fused attention operator as a differentiable op: q, k, v, an optional dense bias, and the
structured biases' tables and positions (``seqattn.ops.DistanceBias``, ``PairBias``)."""
import dataclasses

from ..ops.attention import attention_backward_of_call, attention_of_call
from ..ops.attention_inputs import prepare_attention
from .function import Function
from .tensor import unwrap


def _with(bias, **arrays):
    """The structured bias with its fields as arrays (Tensors unwrapped, the recorded ones
    replaced by the arrays the Function received)."""
    if bias is None:
        return None
    fields = {f.name: unwrap(getattr(bias, f.name)) for f in dataclasses.fields(bias)}
    fields.update(arrays)
    return dataclasses.replace(bias, **fields)


def received_biases(distance_bias, pair_bias, distance_table, distance_x, distance_y,
                    pair_table):
    """The structured biases with the arrays an attention Function received in place of their
    recorded tables and positions."""
    return (_with(distance_bias, table=distance_table, x=distance_x, y=distance_y),
            _with(pair_bias, table=pair_table))


def biases_tensors(distance_bias, pair_bias):
    """(distance table, x, y, pair table) of the structured biases, None where absent: the
    Tensors an attention Function records, in the order it takes them."""
    distance = (None, None, None) if distance_bias is None else (
        distance_bias.table, distance_bias.x, distance_bias.y)
    return (*distance, None if pair_bias is None else pair_bias.table)


def biases_gradients(grads):
    """(distance table, x, y, pair table) gradients of an attention backward's ``grads``, None
    where a bias is absent: in the order the Functions take them."""
    distance = grads.distance_bias or (None, None, None)
    return (*distance, None if grads.pair_bias is None else grads.pair_bias.table)


class Attention(Function):
    @staticmethod
    def forward(ctx, q, k, v, bias, distance_table, distance_x, distance_y, pair_table, options,
                distance_bias, pair_bias, deterministic=True):
        distance_bias, pair_bias = received_biases(distance_bias, pair_bias, distance_table,
                                                   distance_x, distance_y, pair_table)
        # the checked arguments serve the backward too
        call = prepare_attention(q, k, v, bias=bias, distance_bias=distance_bias,
                                 pair_bias=pair_bias, **options)
        out, lse = attention_of_call(call, return_lse=True)
        ctx.save(call=call, out=out, lse=lse, deterministic=deterministic)
        return out

    @staticmethod
    def backward(ctx, dout):
        s = ctx.saved
        grads = attention_backward_of_call(s["call"], dout, s["out"], s["lse"],
                                           bias_requires_grad=ctx.needs_grad[3],
                                           positions_require_grad=any(ctx.needs_grad[5:7]),
                                           deterministic=s["deterministic"])
        return (grads.dq, grads.dk, grads.dv, grads.dbias, *biases_gradients(grads),
                None, None, None)


def attention(q, k, v, bias=None, distance_bias=None, pair_bias=None, deterministic=True,
              **options):
    """softmax(q k^T * scale + bias) v for q (B, H, N, D), k, v (B, Hkv, M, D); ``options`` are
    those of :func:`seqattn.ops.attention` (causal, masks, ALiBi, window, scale), and
    ``deterministic`` that of :func:`seqattn.ops.attention_backward`. A dense bias,
    a structured bias's table or its positions that are Tensors requiring gradients get them
    (a dense bias's summed over its broadcast dims; in self-attention the positions' gradient
    holds both the query and the key part).

    Parameters
    ----------
    q : Tensor or array (B, H, N, D)
        Queries.
    k : Tensor or array (B, Hkv, M, D)
        Keys; H must be a multiple of Hkv (grouped-query attention).
    v : Tensor or array (B, Hkv, M, D)
        Values.
    bias : Tensor or array, broadcastable to (B, H, N, M), optional
        Added to the scores; default None.
    distance_bias : seqattn.ops.DistanceBias, optional
        A learned function of the distance between tokens, added to the scores; its ``table``
        and positions ``x``, ``y`` may be Tensors that get gradients; default None.
    pair_bias : seqattn.ops.PairBias, optional
        A learned value per pair code, added to the scores; its ``table`` may be a Tensor that
        gets a gradient; default None.
    deterministic : bool, default True
        Whether the backward pass adds the gradients in a fixed order (the same bits every run)
        rather than with atomics.
    **options
        Further options of :func:`seqattn.ops.attention`: ``causal``, ``key_padding_mask``,
        ``attn_mask``, ``alibi_slopes``, ``window``, ``scale``.

    Returns
    -------
    Tensor (B, H, N, D)
        The attention output.
    """
    options = {name: unwrap(x) for name, x in options.items()}
    return Attention.apply(q, k, v, bias, *biases_tensors(distance_bias, pair_bias), options,
                           distance_bias, pair_bias, deterministic=deterministic)
