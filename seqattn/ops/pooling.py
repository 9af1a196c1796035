"""Pooling tokens into one vector per sequence, class tokens, and key/value cache writes."""
import numpy as np

from ..backend import CPU, backend_of, empty_like_on, kernels_for
from .checks import expect_shape, expect_updatable, prepared, shape_of


def _tokens_and_padding(x, key_padding_mask):
    device, a = prepared({"x": x, "key_padding_mask": key_padding_mask},
                         float_names=("x",))
    x = a["x"]
    if x.ndim != 3:
        raise ValueError(f"x has shape {shape_of(x)}; expected tokens (B, N, E)")
    B, N, _ = shape_of(x)
    padding = a["key_padding_mask"]
    if padding is None:
        padding = np.zeros((B, N), np.bool_)
        if device != CPU:
            from numba import cuda

            padding = cuda.to_device(padding)
    else:
        expect_shape("key_padding_mask", padding, (B, N), "(B, N)")
        if np.dtype(padding.dtype) != np.bool_:
            raise TypeError(f"key_padding_mask has dtype {np.dtype(padding.dtype)}; expected "
                            "bool (True = padded)")
    return device, x, padding


def masked_mean(x, key_padding_mask=None):
    """The mean of tokens over the unpadded ones; a sequence that is all padding pools to
    zeros.

    Parameters
    ----------
    x : array (B, N, E)
        Tokens, on the CPU (NumPy) or the GPU (numba.cuda device array).
    key_padding_mask : bool array (B, N), optional
        True where a token is padding.

    Returns
    -------
    array (B, E)
        One vector per sequence.
    """
    device, x, padding = _tokens_and_padding(x, key_padding_mask)
    out = empty_like_on(device, (shape_of(x)[0], shape_of(x)[2]), x.dtype)
    kernels_for(device, "pooling").masked_mean_forward(out, x, padding)
    return out


def masked_mean_backward(dout, x, key_padding_mask=None):
    """dx of :func:`masked_mean`.

    Parameters
    ----------
    dout : array (B, E)
        dLoss/dout.
    x : array (B, N, E)
        The forward call's tokens (for their shape and device).
    key_padding_mask : bool array (B, N), optional
        As in the forward call.

    Returns
    -------
    array (B, N, E)
        dx.
    """
    device, x, padding = _tokens_and_padding(x, key_padding_mask)
    B, N, E = shape_of(x)
    expect_shape("dout", dout, (B, E), "(B, E)")
    dx = empty_like_on(device, (B, N, E), x.dtype)
    kernels_for(device, "pooling").masked_mean_backward(dx, dout, padding)
    return dx


def prepend_token(x, token, length=None):
    """A token in front of every sequence: ``token`` at position 0, then ``x``.

    Works for float tokens, integer ids (E = 1) and bool masks.

    Parameters
    ----------
    x : array (B, N, E)
        The sequences, on the CPU (NumPy) or the GPU (numba.cuda device array).
    token : array (E,)
        The token put first.
    length : int, optional
        L, the output length: N + 1 by default (a class token); N shifts ``x`` right by one
        and drops its last token (decoder inputs).

    Returns
    -------
    array (B, L, E)
        The sequences with the token first.
    """
    device = backend_of(x=x, token=token)
    if x.ndim != 3 or shape_of(token) != (shape_of(x)[2],):
        raise ValueError(f"x {shape_of(x)} and token {shape_of(token)} must be (B, N, E), (E,)")
    B, N, E = shape_of(x)
    length = N + 1 if length is None else int(length)
    if not 1 <= length <= N + 1:
        raise ValueError(f"length must lie in [1, N + 1 = {N + 1}], got {length}")
    if device == CPU:
        x, token = np.ascontiguousarray(x), np.ascontiguousarray(token, dtype=x.dtype)
    out = empty_like_on(device, (B, length, E), x.dtype)
    kernels_for(device, "pooling").prepend_token_forward(out, x, token)
    return out


def prepend_token_backward(dout, x, *, token_grad):
    """dx of :func:`prepend_token`; adds the token's gradient into ``token_grad``.

    Parameters
    ----------
    dout : array (B, L, E)
        dLoss/dout.
    x : array (B, N, E)
        The forward call's sequences.
    token_grad : array (E,)
        The token's gradient is added into it.

    Returns
    -------
    array (B, N, E)
        dx.
    """
    device, a = prepared({"dout": dout, "x": x, "token_grad": token_grad})
    B, N, E = shape_of(a["x"])
    if a["dout"].ndim != 3 or shape_of(a["dout"])[::2] != (B, E):
        raise ValueError(f"dout has shape {shape_of(dout)}; expected (B, L, E) with B, E of x")
    expect_shape("token_grad", a["token_grad"], (E,), "(E,)")
    expect_updatable("token_grad", token_grad, a["token_grad"])
    dx = empty_like_on(device, (B, N, E), a["x"].dtype)
    kernels_for(device, "pooling").prepend_token_backward(dx, a["token_grad"], a["dout"])
    return dx


def first_token(x):
    """The first token of every sequence, ``x[:, 0]``.

    Parameters
    ----------
    x : array (B, N, E)
        Tokens, on the CPU (NumPy) or the GPU (numba.cuda device array).

    Returns
    -------
    array (B, E)
        Token 0 of each sequence.
    """
    device, a = prepared({"x": x})
    x = a["x"]
    if x.ndim != 3 or not x.shape[1]:
        raise ValueError(f"x has shape {shape_of(x)}; expected tokens (B, N, E) with N >= 1")
    out = empty_like_on(device, (shape_of(x)[0], shape_of(x)[2]), x.dtype)
    kernels_for(device, "pooling").first_token_forward(out, x)
    return out


def first_token_backward(dout, x):
    """dx of :func:`first_token`: ``dout`` at token 0, zeros elsewhere.

    Parameters
    ----------
    dout : array (B, E)
        dLoss/dout.
    x : array (B, N, E)
        The forward call's tokens (for their shape and device).

    Returns
    -------
    array (B, N, E)
        dx.
    """
    device, a = prepared({"dout": dout, "x": x})
    B, N, E = shape_of(a["x"])
    expect_shape("dout", a["dout"], (B, E), "(B, E)")
    dx = empty_like_on(device, (B, N, E), a["x"].dtype)
    kernels_for(device, "pooling").first_token_backward(dx, a["dout"])
    return dx


def write_positions(cache, new, start):
    """In place: ``cache[:, :, start:start + n] = new``, for a key/value cache.

    Parameters
    ----------
    cache : array (B, H, M, D)
        The cache, written in place, on the CPU (NumPy) or the GPU (numba.cuda device array).
    new : array (B, H, n, D)
        New keys or values.
    start : int
        The first position written.

    Returns
    -------
    array (B, H, M, D)
        ``cache``.
    """
    device, a = prepared({"cache": cache, "new": new})
    expect_updatable("cache", cache, a["cache"])
    B, H, M, D = shape_of(cache)
    n = shape_of(new)[2] if new.ndim == 4 else -1
    expect_shape("new", a["new"], (B, H, n, D), "(B, H, n, D)")
    if not 0 <= start <= M - n:
        raise ValueError(f"positions {start}..{start + n - 1} do not fit a cache of {M}")
    kernels_for(device, "kv_cache").write_positions(cache, a["new"], int(start))
    return cache
