"""The fused attention operator: forward, backward and the weights for plots."""
from collections import namedtuple

import numpy as np

from ..backend import CPU, CUDA, backend_of, empty_like_on
from ..backend import kernels_for
from .attention_inputs import prepare_attention, shapes_of
from .structured_bias import PairBiasGradients, distance_gradients


class AttentionGradients(namedtuple("AttentionGradients", "dq dk dv dbias")):
    """What :func:`attention_backward` returns: unpacks as ``dq, dk, dv, dbias``.

    ``distance_bias`` (a :class:`~seqattn.ops.structured_bias.DistanceBiasGradients`: table, x,
    y) and ``pair_bias`` (a :class:`~seqattn.ops.structured_bias.PairBiasGradients`: table) are
    the structured biases' gradients, None where that bias was not passed.

    Parameters
    ----------
    dq : array (B, H, N, D)
        dLoss/dq.
    dk : array (B, Hkv, M, D)
        dLoss/dk.
    dv : array (B, Hkv, M, D)
        dLoss/dv.
    dbias : array or None
        dLoss/dbias in the shape of the bias as passed (broadcast dims summed); None unless
        the bias requires a gradient.
    distance_bias : DistanceBiasGradients, optional
        The distance bias's gradients; default None (no distance bias).
    pair_bias : PairBiasGradients, optional
        The pair bias's table gradient; default None (no pair bias).
    """

    def __new__(cls, dq, dk, dv, dbias, distance_bias=None, pair_bias=None):
        grads = super().__new__(cls, dq, dk, dv, dbias)
        grads.distance_bias = distance_bias
        grads.pair_bias = pair_bias
        return grads


def _attention_kernels(call):
    return kernels_for(call.device, "attention")


def short_sequence_kernels(device, longest):
    """attention_small.py's kernels where they serve a call on ``device`` whose longer
    sequence has ``longest`` tokens (on the CPU, at most its MAX_LENGTH), else None: there a
    task per (batch, head) over whole rows beats the tiled kernel, which then does not compile
    at all."""
    if device != CPU:
        return None
    small = kernels_for(CPU, "attention_small")
    return small if longest <= small.MAX_LENGTH else None


def _short_sequence_kernels(call):
    return short_sequence_kernels(call.device, max(call.q.shape[2], call.k.shape[2]))


def attention(q, k, v, *, causal=False, key_padding_mask=None, attn_mask=None, bias=None,
              alibi_slopes=None, window=None, scale=None, distance_bias=None, pair_bias=None,
              return_lse=False):
    """Fused scaled dot-product attention, softmax(q k^T * scale + bias) v, in O(N + M) memory.

    Shapes: q (B, H, N, D); k and v (B, Hkv, M, D) with H a multiple of Hkv (grouped-query
    attention; Hkv == H is ordinary multi-head attention, M != N is cross-attention).

    Parameters
    ----------
    q : float32 or float64 array (B, H, N, D)
        Queries: a NumPy array runs on the CPU, a numba.cuda device array on the GPU.
    k : array (B, Hkv, M, D)
        Keys, on the same device and of the same dtype as ``q``.
    v : array (B, Hkv, M, D)
        Values, like ``k``.
    causal : bool, default False
        Query i sees keys j <= i + (M - N) (aligned bottom-right, as FlashAttention does).
    key_padding_mask : bool (B, M), optional
        True marks a padded key to ignore (as in torch.nn).
    attn_mask : bool, broadcastable to (B, H, N, M), optional
        True means "may attend" (as in torch's scaled_dot_product_attention).
    bias : float, broadcastable to (B, H, N, M), optional
        Added to the scaled scores.
    alibi_slopes : float (H,), optional
        Adds ``-slope[h] * |i + M - N - j|`` to the scores of head h.
    window : (left, right), optional
        Key j is visible only if i + M - N - left <= j <= i + M - N + right; None on a side
        means unlimited.
    scale : float, optional
        Defaults to 1 / sqrt(D).
    distance_bias : DistanceBias, optional
        Adds a learnable function of the distance between query and key positions, computed
        in the kernel (see :class:`~seqattn.ops.structured_bias.DistanceBias`).
    pair_bias : PairBias, optional
        Adds a learnable per-head table indexed by an integer code per pair, or by a clipped
        relative offset (see :class:`~seqattn.ops.structured_bias.PairBias`).
    return_lse : bool, default False
        Also return the per-row log-sum-exp (B, H, N), which :func:`attention_backward` needs.

    Returns
    -------
    out : array (B, H, N, D)
        The attention output, on the device of ``q``. A query row that may attend to nothing
        gets zeros (and lse = -inf).
    lse : array (B, H, N)
        The per-row log-sum-exp, only with ``return_lse``.
    """
    call = prepare_attention(q, k, v, causal=causal, key_padding_mask=key_padding_mask,
                             attn_mask=attn_mask, bias=bias, alibi_slopes=alibi_slopes,
                             window=window, scale=scale, distance_bias=distance_bias,
                             pair_bias=pair_bias)
    return attention_of_call(call, return_lse)


def attention_of_call(call, return_lse=False, out=None):
    """:func:`attention` of the arguments that :func:`prepare_attention` checked and put in
    kernel form: the recorded op keeps ``call`` for :func:`attention_backward_of_call`, so a
    training step checks each attention's arguments once. ``out``: a (B, H, N, D) array to
    fill (a view of tokens, for a call that keeps views: ops.packed_attention)."""
    B, H, Hkv, N, M, D = shapes_of(call)
    if out is None:
        out = empty_like_on(call.device, (B, H, N, D), call.q.dtype)
    lse = empty_like_on(call.device, (B, H, N), call.q.dtype)
    short = _short_sequence_kernels(call)
    if short is not None and (call.distance.has or call.pair.mode or call.has_bias
                              or call.has_mask or call.has_alibi):
        _hand_over_backward(call)
    (short or _attention_kernels(call)).attention_forward(out, lse, call)
    return (out, lse) if return_lse else out


def _hand_over_backward(call):
    """On a first run, the compile helper compiles this call's backward meanwhile: a call of
    the short kernels whose signature none of its fixed jobs has (structured biases, or a
    dense bias, mask or ALiBi: kernels/cpu/attention_small.py leaves those out of the
    others')."""
    from ..first_run import hand_over_structured_backward

    hand_over_structured_backward(call)


def _check_saved(name, x, shape, dtype):
    if tuple(int(s) for s in x.shape) != shape:
        raise ValueError(f"{name} has shape {tuple(x.shape)}; expected {shape}")
    if np.dtype(x.dtype) != dtype:
        raise TypeError(f"{name} has dtype {np.dtype(x.dtype)}; expected {dtype} like q")


def _structured_outputs(call, positions=True):
    """Kernel-layout outputs for the structured biases' gradients (None where absent, and for
    the positions' without ``positions``)."""
    B, H, Hkv, N, M, D = shapes_of(call)
    distance, pair = call.distance, call.pair
    table = x = y = pair_table = None
    if distance.has:
        table = empty_like_on(call.device, tuple(distance.table.shape), call.q.dtype)
    if distance.has and positions:
        x = empty_like_on(call.device, (B, 3, N), call.q.dtype)
        y = empty_like_on(call.device, (B, 3, M), call.q.dtype)
    if pair.mode:
        pair_table = empty_like_on(call.device, tuple(pair.table.shape), call.q.dtype)
    return table, x, y, pair_table


def _to_device(device, x):
    if x is None or device != CUDA:
        return x
    from numba import cuda

    return cuda.to_device(x)


def _host(x):
    return x.copy_to_host() if hasattr(x, "copy_to_host") else x


def attention_backward(dout, q, k, v, out, lse, *, causal=False, key_padding_mask=None,
                       attn_mask=None, bias=None, alibi_slopes=None, window=None, scale=None,
                       distance_bias=None, pair_bias=None, bias_requires_grad=False,
                       deterministic=True):
    """Gradients of :func:`attention` given ``dout`` = dLoss/dout.

    Scores are recomputed tile by tile from ``lse``, so memory stays O(N + M) per batch and
    head.

    Parameters
    ----------
    dout : array (B, H, N, D)
        The gradient of the loss with respect to the attention output.
    q, k, v : arrays (B, H, N, D), (B, Hkv, M, D), (B, Hkv, M, D)
        The inputs of the forward call.
    out, lse : arrays (B, H, N, D) and (B, H, N)
        What ``attention(..., return_lse=True)`` returned for these inputs and options.
    causal, key_padding_mask, attn_mask, bias, alibi_slopes, window, scale : optional
        The forward call's options, passed again (see :func:`attention`).
    distance_bias, pair_bias : optional
        The forward call's structured biases, passed again.
    bias_requires_grad : bool, default False
        Also compute ``dbias``, the gradient of ``bias`` (a learnable bias).
    deterministic : bool, default True
        Give the same bits each time the same call runs (see below).

    Returns
    -------
    AttentionGradients
        Unpacks as ``(dq, dk, dv, dbias)``. ``dbias`` is None unless ``bias_requires_grad``; it
        then has the shape of ``bias`` as passed (broadcast dims summed), e.g. a learnable
        (1, H, N, M) bias gets the gradient summed over the batch. With ``distance_bias`` or
        ``pair_bias``, its attributes of the same names hold the gradients of their tables and
        of the positions, computed in the same pass without any N x M array.

    Notes
    -----
    With ``deterministic=True`` every gradient is the same bits each time the same call
    runs. On the CPU that holds for any value (each thread sums into buffers of its own, added
    in a fixed order; a different thread count may change the last bits). On the GPU, dq and
    the query positions' gradient then come from a second pass over the query tiles, which
    computes the scores again (about 1.4 times the backward's arithmetic); with
    ``deterministic=False`` the one pass over key tiles adds them with atomics, which is faster
    but varies in the last bits from run to run. The tables' gradients are deterministic either
    way (summed as 64-bit fixed-point numbers).
    """
    call = prepare_attention(q, k, v, causal=causal, key_padding_mask=key_padding_mask,
                             attn_mask=attn_mask, bias=bias, alibi_slopes=alibi_slopes,
                             window=window, scale=scale, distance_bias=distance_bias,
                             pair_bias=pair_bias)
    return attention_backward_of_call(call, dout, out, lse,
                                      bias_requires_grad=bias_requires_grad,
                                      deterministic=deterministic)


def attention_backward_of_call(call, dout, out, lse, *, bias_requires_grad=False,
                               positions_require_grad=True, deterministic=True, grads=None):
    """:func:`attention_backward` of the forward's prepared ``call`` (see
    :func:`attention_of_call`); ``dout``, ``out`` and ``lse`` are checked here. Without
    ``positions_require_grad`` the distance bias's position gradients may be None (the
    short-sequence kernels then skip them). ``grads``: the (dq, dk, dv) arrays to fill, for a
    call that keeps views on the short-sequence kernels (views of one packed gradient:
    ops.packed_attention); ``dout`` and ``out`` are then taken as the views they are."""
    if bias_requires_grad and not call.has_bias:
        raise ValueError("bias_requires_grad=True but no bias was passed")
    B, H, Hkv, N, M, D = shapes_of(call)
    dtype = np.dtype(call.q.dtype)
    kernels = _attention_kernels(call)
    backend_of(q=call.q, dout=dout, out=out, lse=lse)
    for name, x in (("dout", dout), ("out", out)):
        _check_saved(name, x, (B, H, N, D), dtype)
    _check_saved("lse", lse, (B, H, N), dtype)
    if call.device == CPU:
        lse = np.ascontiguousarray(lse)
        if grads is None:
            dout, out = np.ascontiguousarray(dout), np.ascontiguousarray(out)
    dq, dk, dv = grads or (empty_like_on(call.device, shape, dtype)
                           for shape in ((B, H, N, D), (B, Hkv, M, D), (B, Hkv, M, D)))
    short = _short_sequence_kernels(call)
    structured = kernels.StructuredGrads(*_structured_outputs(
        call, positions=positions_require_grad or short is None))
    if short is not None:  # deterministic whatever the flag: each task owns its outputs
        short.attention_backward(dq, dk, dv, structured, dout, out, lse, call)
    else:
        # Only the GPU has a faster, non-deterministic order of summation to choose.
        options = {"deterministic": bool(deterministic)} if call.device == CUDA else {}
        kernels.attention_backward(dq, dk, dv, structured, dout, out, lse, call, **options)
    dbias = bias_gradient(call, dout, out, lse) if bias_requires_grad else None
    distance_grads = pair_grads = None
    if call.distance.has:
        distance_grads = distance_gradients(call.distance, *(_host(a) for a in structured[:3]))
        distance_grads = type(distance_grads)(*(_to_device(call.device, a)
                                                for a in distance_grads))
    if call.pair.mode:
        pair_grads = PairBiasGradients(structured.pair_table)
    return AttentionGradients(dq, dk, dv, dbias, distance_grads, pair_grads)


def bias_gradient(call, dout, out, lse):
    """dLoss/dbias of a call with a dense bias, in the shape it was passed (the tiled
    kernels', whatever the length: C-contiguous arrays only)."""
    dbias = empty_like_on(call.device, tuple(call.bias.shape), call.q.dtype)
    _attention_kernels(call).attention_bias_grad(dbias, dout, out, lse, call)
    return dbias.reshape(call.bias_shape)


def attention_weights(q, k, *, causal=False, key_padding_mask=None, attn_mask=None, bias=None,
                      alibi_slopes=None, window=None, scale=None, distance_bias=None,
                      pair_bias=None):
    """The attention probabilities (B, H, N, M), for inspection and plots.

    This is the only attention function that uses O(N * M) memory: it materialises what the
    fused operator never stores.

    Parameters
    ----------
    q, k : arrays (B, H, N, D) and (B, Hkv, M, D)
        Queries and keys, as in :func:`attention`.
    causal, key_padding_mask, attn_mask, bias, alibi_slopes, window, scale : optional
        The options of :func:`attention`, with the same meaning.
    distance_bias, pair_bias : optional
        The structured biases of :func:`attention`.

    Returns
    -------
    array (B, H, N, M)
        Each query row's probabilities over the keys (zeros for a row that may attend to
        nothing).
    """
    call = prepare_attention(q, k, None, causal=causal, key_padding_mask=key_padding_mask,
                             attn_mask=attn_mask, bias=bias, alibi_slopes=alibi_slopes,
                             window=window, scale=scale, distance_bias=distance_bias,
                             pair_bias=pair_bias)
    B, H, Hkv, N, M, D = shapes_of(call)
    weights = empty_like_on(call.device, (B, H, N, M), call.q.dtype)
    _attention_kernels(call).attention_weights(weights, call)
    return weights
