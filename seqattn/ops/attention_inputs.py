"""Checking and normalising the arguments of the attention operator.

Every attention entry point (forward, backward, weights, on either device) passes its arguments
through :func:`prepare_attention`, which raises clear errors for bad input and returns an
:class:`AttentionCall` in the canonical form the kernels expect:

* q (B, H, N, D); k, v (B, Hkv, M, D); C-contiguous, one float dtype (with ``keep_views``,
  strided views with unit stride along D as they are: the heads of a packed projection).
* ``bias`` 4-D (Bb, Hb, Nb, Mb), each dim either full or 1 (broadcast by indexing in the kernel).
* ``attn_mask`` 4-D bool, same broadcasting rule, True = may attend.
* ``key_padding_mask`` (B, M) bool, True = padded key to ignore.
* ``alibi_slopes`` (H,).
* ``distance`` and ``pair``: the structured biases in kernel form (``DistanceCall``,
  ``PairCall`` of :mod:`seqattn.ops.structured_bias`), placeholders when absent.
* ``causal`` and ``window`` folded into one band: key j is visible from query i only when
  ``i + (M - N) - left <= j <= i + (M - N) + right``. "No limit" is the exact value N + M, which no
  ``|i - j|`` can exceed, so the kernels need no special case for it.

Absent options are passed to the kernels as 1-element placeholders plus a ``has_*`` flag, so each
dtype compiles one kernel signature instead of one per combination of options.
"""
from collections import namedtuple
import numbers

import numpy as np

from ..backend import CUDA, backend_of, placeholder_on
from .checks import FLOAT_DTYPES, contiguous, shape_of
from .structured_bias import bias_arrays, prepare_distance_bias, prepare_pair_bias

AttentionCall = namedtuple(
    "AttentionCall",
    "device q k v bias attn_mask key_padding_mask alibi_slopes scale left right "
    "has_bias has_mask has_kpm has_alibi bias_shape distance pair",
)
AttentionCall.__doc__ = "Canonical, validated attention arguments (see the module docstring)."

def _check_float(name, x, dtype=None):
    dt = np.dtype(x.dtype)
    if dt not in FLOAT_DTYPES:
        raise TypeError(f"{name} has dtype {dt}; expected float32 or float64")
    if dtype is not None and dt != dtype:
        raise TypeError(
            f"{name} has dtype {dt} but q has dtype {dtype}; cast them to one dtype "
            f"(e.g. {name}.astype(q.dtype))"
        )


def _as_array(name, x, device):
    if device == CUDA or isinstance(x, np.ndarray):
        return x
    if not hasattr(x, "__array__") and not isinstance(x, (list, tuple)):
        raise TypeError(f"{name} must be an array, got {type(x).__name__}")
    return np.asarray(x)


def _broadcast_4d(name, x, full_shape, device):
    """Reshape x to 4-D with leading 1s; each dim must be 1 or match (B, H, N, M)."""
    shape = shape_of(x)
    if len(shape) > 4:
        raise ValueError(f"{name} has {len(shape)} dims {shape}; expected at most 4, "
                         f"broadcastable to (B, H, N, M) = {full_shape}")
    shape4 = (1,) * (4 - len(shape)) + shape
    for have, want in zip(shape4, full_shape):
        if have not in (1, want):
            raise ValueError(f"{name} has shape {shape}, which does not broadcast to "
                             f"(B, H, N, M) = {full_shape}; each dim must be 1 or the full size")
    x = contiguous(name, x, device)
    return x.reshape(shape4)


def _band(causal, window, n, m):
    """The (left, right) band of visible keys around each query's aligned position."""
    unlimited = n + m
    left = right = unlimited
    if window is not None:
        if not isinstance(window, (tuple, list)) or len(window) != 2:
            raise ValueError(f"window must be a pair (left, right), got {window!r}")
        sizes = []
        for side, w in zip(("left", "right"), window):
            if w is None:
                sizes.append(unlimited)
                continue
            if not isinstance(w, numbers.Integral) or isinstance(w, bool):
                raise TypeError(f"window {side} size must be an int or None, got {w!r}")
            if w < 0:
                raise ValueError(f"window {side} size must be >= 0, got {w}")
            sizes.append(min(int(w), unlimited))
        left, right = sizes
    if causal:
        right = 0
    return left, right


def _kernel_layout(name, x, device, keep_views):
    """x as the kernels take it: C-contiguous, or with ``keep_views`` (CPU) any view whose
    rows along D have unit stride, as it is (the short-sequence kernels read (N, D) row views
    only; a copy here is what ops.packed_attention avoids)."""
    if keep_views and isinstance(x, np.ndarray) and x.strides[-1] == x.itemsize:
        return x
    return contiguous(name, x, device)


def prepare_attention(q, k, v=None, *, causal=False, key_padding_mask=None, attn_mask=None,
                      bias=None, alibi_slopes=None, window=None, scale=None, distance_bias=None,
                      pair_bias=None, keep_views=False):
    """Validate attention arguments and return them as an :class:`AttentionCall`.

    ``v`` may be None (attention weights need only q and k); it is then returned as None.
    With ``keep_views``, q, k and v stay the strided views they are where their last axis has
    unit stride (for the short-sequence kernels only: ops.packed_attention).
    """
    device = backend_of(q=q, k=k, v=v, key_padding_mask=key_padding_mask, attn_mask=attn_mask,
                        bias=bias, alibi_slopes=alibi_slopes,
                        **bias_arrays(distance_bias, pair_bias))
    q = _as_array("q", q, device)
    k = _as_array("k", k, device)
    _check_float("q", q)
    dtype = np.dtype(q.dtype)
    _check_float("k", k, dtype)
    if q.ndim != 4:
        raise ValueError(f"q has shape {shape_of(q)}; expected 4 dims (B, H, N, D)")
    if k.ndim != 4:
        raise ValueError(f"k has shape {shape_of(k)}; expected 4 dims (B, Hkv, M, D)")
    B, H, N, D = shape_of(q)
    Bk, Hkv, M, Dk = shape_of(k)
    if Bk != B:
        raise ValueError(f"q has batch size {B} but k has {Bk}; expected the same B")
    if Dk != D:
        raise ValueError(f"q has shape {shape_of(q)} but k has head dim {Dk}; "
                         f"expected k of shape (B, Hkv, M, {D})")
    if D == 0:
        raise ValueError("q has head dim 0; expected D >= 1")
    if Hkv == 0 or H % Hkv != 0:
        raise ValueError(f"q has {H} heads but k has {Hkv}; H must be a multiple of Hkv "
                         "(grouped-query attention)")
    if v is not None:
        v = _as_array("v", v, device)
        _check_float("v", v, dtype)
        if shape_of(v) != shape_of(k):
            raise ValueError(f"v has shape {shape_of(v)} but k has shape {shape_of(k)}; "
                             "expected the same shape")
        v = _kernel_layout("v", v, device, keep_views)
    q = _kernel_layout("q", q, device, keep_views)
    k = _kernel_layout("k", k, device, keep_views)

    full = (B, H, N, M)
    has_bias = bias is not None
    bias_shape = None
    if has_bias:
        bias = _as_array("bias", bias, device)
        _check_float("bias", bias, dtype)
        bias_shape = shape_of(bias)
        bias = _broadcast_4d("bias", bias, full, device)
    else:
        bias = placeholder_on(device, (1, 1, 1, 1), dtype)

    has_mask = attn_mask is not None
    if has_mask:
        attn_mask = _as_array("attn_mask", attn_mask, device)
        if np.dtype(attn_mask.dtype) != np.bool_:
            raise TypeError(f"attn_mask has dtype {np.dtype(attn_mask.dtype)}; expected bool "
                            "(True = may attend). Pass additive float masks as bias=")
        attn_mask = _broadcast_4d("attn_mask", attn_mask, full, device)
    else:
        attn_mask = placeholder_on(device, (1, 1, 1, 1), np.bool_)

    has_kpm = key_padding_mask is not None
    if has_kpm:
        key_padding_mask = _as_array("key_padding_mask", key_padding_mask, device)
        if np.dtype(key_padding_mask.dtype) != np.bool_:
            raise TypeError(f"key_padding_mask has dtype {np.dtype(key_padding_mask.dtype)}; "
                            "expected bool (True = padded key to ignore)")
        if shape_of(key_padding_mask) != (B, M):
            raise ValueError(f"key_padding_mask has shape {shape_of(key_padding_mask)}; "
                             f"expected (B, M) = {(B, M)}")
        key_padding_mask = contiguous("key_padding_mask", key_padding_mask, device)
    else:
        key_padding_mask = placeholder_on(device, (1, 1), np.bool_)

    has_alibi = alibi_slopes is not None
    if has_alibi:
        alibi_slopes = _as_array("alibi_slopes", alibi_slopes, device)
        _check_float("alibi_slopes", alibi_slopes, dtype)
        if shape_of(alibi_slopes) != (H,):
            raise ValueError(f"alibi_slopes has shape {shape_of(alibi_slopes)}; "
                             f"expected (H,) = ({H},)")
        alibi_slopes = contiguous("alibi_slopes", alibi_slopes, device)
    else:
        alibi_slopes = placeholder_on(device, (1,), dtype)

    if scale is None:
        scale = 1.0 / np.sqrt(D)
    elif not isinstance(scale, numbers.Real) or not np.isfinite(scale):
        raise ValueError(f"scale must be a finite number or None, got {scale!r}")
    if not isinstance(causal, (bool, np.bool_)):
        raise TypeError(f"causal must be True or False, got {causal!r}")
    left, right = _band(bool(causal), window, N, M)

    distance = prepare_distance_bias(distance_bias, device, dtype, B, H, N, M)
    pair = prepare_pair_bias(pair_bias, device, dtype, B, H, N, M)
    return AttentionCall(device, q, k, v, bias, attn_mask, key_padding_mask, alibi_slopes,
                         float(scale), left, right, has_bias, has_mask, has_kpm, has_alibi,
                         bias_shape, distance, pair)


def shapes_of(call):
    """(B, H, Hkv, N, M, D) of a prepared call."""
    B, H, N, D = shape_of(call.q)
    Hkv, M = int(call.k.shape[1]), int(call.k.shape[2])
    return B, H, Hkv, N, M, D
