"""The fused attention operator: forward, backward and the weights for plots."""
import numpy as np

from ..backend import CPU, backend_of, empty_like_on
from ..backend import kernels_for
from .attention_inputs import prepare_attention, shapes_of


def _attention_kernels(call):
    return kernels_for(call.device, "attention")


def attention(q, k, v, *, causal=False, key_padding_mask=None, attn_mask=None, bias=None,
              alibi_slopes=None, window=None, scale=None, return_lse=False):
    """Fused scaled dot-product attention, softmax(q k^T * scale + bias) v, in O(N + M) memory.

    Shapes: q (B, H, N, D); k and v (B, Hkv, M, D) with H a multiple of Hkv (grouped-query
    attention; Hkv == H is ordinary multi-head attention, M != N is cross-attention).

    Parameters
    ----------
    causal : bool
        Query i sees keys j <= i + (M - N) (aligned bottom-right, as FlashAttention does).
    key_padding_mask : bool (B, M), optional
        True marks a padded key to ignore (as in torch.nn).
    attn_mask : bool, broadcastable to (B, H, N, M), optional
        True means "may attend" (as in torch's scaled_dot_product_attention).
    bias : float, broadcastable to (B, H, N, M), optional
        Added to the scaled scores.
    alibi_slopes : float (H,), optional
        Adds -slope[h] * |i + M - N - j| to the scores of head h.
    window : (left, right), optional
        Key j is visible only if i + M - N - left <= j <= i + M - N + right; None on a side
        means unlimited.
    scale : float, optional
        Defaults to 1 / sqrt(D).
    return_lse : bool
        Also return the per-row log-sum-exp (B, H, N), which :func:`attention_backward` needs.

    A query row that may attend to nothing returns zeros (and lse = -inf).
    Returns ``out`` (B, H, N, D), or ``(out, lse)`` with ``return_lse``.
    """
    call = prepare_attention(q, k, v, causal=causal, key_padding_mask=key_padding_mask,
                             attn_mask=attn_mask, bias=bias, alibi_slopes=alibi_slopes,
                             window=window, scale=scale)
    B, H, Hkv, N, M, D = shapes_of(call)
    out = empty_like_on(call.device, (B, H, N, D), call.q.dtype)
    lse = empty_like_on(call.device, (B, H, N), call.q.dtype)
    _attention_kernels(call).attention_forward(out, lse, call)
    return (out, lse) if return_lse else out


def _check_saved(name, x, shape, dtype):
    if tuple(int(s) for s in x.shape) != shape:
        raise ValueError(f"{name} has shape {tuple(x.shape)}; expected {shape}")
    if np.dtype(x.dtype) != dtype:
        raise TypeError(f"{name} has dtype {np.dtype(x.dtype)}; expected {dtype} like q")


def attention_backward(dout, q, k, v, out, lse, *, causal=False, key_padding_mask=None,
                       attn_mask=None, bias=None, alibi_slopes=None, window=None, scale=None,
                       bias_requires_grad=False):
    """Gradients of :func:`attention` given ``dout`` = dLoss/dout.

    ``out`` and ``lse`` are what ``attention(..., return_lse=True)`` returned for the same inputs
    and options, which must be passed again. Scores are recomputed tile by tile from ``lse``, so
    memory stays O(N + M) per batch and head.

    Returns ``(dq, dk, dv, dbias)``. ``dbias`` is None unless ``bias_requires_grad``; it then has
    the shape of ``bias`` as passed (broadcast dims summed), e.g. a learnable (1, H, N, M) bias
    gets the gradient summed over the batch.
    """
    call = prepare_attention(q, k, v, causal=causal, key_padding_mask=key_padding_mask,
                             attn_mask=attn_mask, bias=bias, alibi_slopes=alibi_slopes,
                             window=window, scale=scale)
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
        dout, out, lse = (np.ascontiguousarray(a) for a in (dout, out, lse))
    dq = empty_like_on(call.device, (B, H, N, D), dtype)
    dk = empty_like_on(call.device, (B, Hkv, M, D), dtype)
    dv = empty_like_on(call.device, (B, Hkv, M, D), dtype)
    kernels.attention_backward(dq, dk, dv, dout, out, lse, call)
    dbias = None
    if bias_requires_grad:
        dbias = empty_like_on(call.device, tuple(call.bias.shape), dtype)
        kernels.attention_bias_grad(dbias, dout, out, lse, call)
        dbias = dbias.reshape(call.bias_shape)
    return dq, dk, dv, dbias


def attention_weights(q, k, *, causal=False, key_padding_mask=None, attn_mask=None, bias=None,
                      alibi_slopes=None, window=None, scale=None):
    """The attention probabilities (B, H, N, M), for inspection and plots.

    Same arguments and semantics as :func:`attention`. This is the only attention function that
    uses O(N * M) memory: it materialises what the fused operator never stores.
    """
    call = prepare_attention(q, k, None, causal=causal, key_padding_mask=key_padding_mask,
                             attn_mask=attn_mask, bias=bias, alibi_slopes=alibi_slopes,
                             window=window, scale=scale)
    B, H, Hkv, N, M, D = shapes_of(call)
    weights = empty_like_on(call.device, (B, H, N, M), call.q.dtype)
    _attention_kernels(call).attention_weights(weights, call)
    return weights
