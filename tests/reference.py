"""Plain NumPy float64 references for seqattn's ops, forward and backward.

These materialise everything (the full N x M score matrix included) and favour clarity over speed:
they define what the kernels must compute. ``REFERENCES`` maps each op to its reference functions
so that tests and benchmarks can loop over it.
"""
import numpy as np


def _visible(B, H, N, M, causal, key_padding_mask, attn_mask, window):
    """(B, H, N, M) bool: which keys each query may attend to."""
    i = np.arange(N)[:, None]
    j = np.arange(M)[None, :]
    aligned = i + (M - N)  # a query's position on the key axis (bottom-right alignment)
    vis = np.ones((N, M), dtype=bool)
    if causal:
        vis &= j <= aligned
    if window is not None:
        left, right = window
        if left is not None:
            vis &= j >= aligned - left
        if right is not None:
            vis &= j <= aligned + right
    vis = np.broadcast_to(vis, (B, H, N, M)).copy()
    if attn_mask is not None:
        vis &= np.broadcast_to(np.asarray(attn_mask, dtype=bool), (B, H, N, M))
    if key_padding_mask is not None:
        vis &= ~np.asarray(key_padding_mask, dtype=bool)[:, None, None, :]
    return vis


def _expand_kv(x, H):
    """Repeat each of the Hkv key/value heads H // Hkv times (grouped-query attention)."""
    return np.repeat(x, H // x.shape[1], axis=1)


def _scores(q, k, causal, key_padding_mask, attn_mask, bias, alibi_slopes, window, scale):
    B, H, N, D = q.shape
    M = k.shape[2]
    scale = 1.0 / np.sqrt(D) if scale is None else scale
    s = q.dtype.type(scale) * np.einsum("bhnd,bhmd->bhnm", q, _expand_kv(k, H))
    if bias is not None:
        s = s + np.asarray(bias, dtype=q.dtype)
    if alibi_slopes is not None:
        dist = np.abs(np.arange(N)[:, None] + (M - N) - np.arange(M)[None, :]).astype(q.dtype)
        s = s - np.asarray(alibi_slopes, dtype=q.dtype)[None, :, None, None] * dist
    vis = _visible(B, H, N, M, causal, key_padding_mask, attn_mask, window)
    return np.where(vis, s, -np.inf), scale


def _probabilities(s):
    """Row softmax of masked scores; rows with nothing visible get lse=-inf and zero weights."""
    if s.shape[-1] == 0:
        return np.zeros_like(s), np.full(s.shape[:-1], -np.inf, s.dtype)
    row_max = s.max(axis=-1, keepdims=True)
    safe_max = np.where(np.isfinite(row_max), row_max, 0.0)
    e = np.exp(s - safe_max)
    total = e.sum(axis=-1, keepdims=True)
    with np.errstate(divide="ignore"):
        lse = np.log(total) + safe_max
    p = np.where(total > 0, e / np.where(total > 0, total, 1.0), 0.0)
    return p, lse[..., 0]


def attention_weights(q, k, *, causal=False, key_padding_mask=None, attn_mask=None, bias=None,
                      alibi_slopes=None, window=None, scale=None, dtype=np.float64):
    """(B, H, N, M) attention probabilities."""
    q = np.asarray(q, dtype)
    k = np.asarray(k, dtype)
    s, _ = _scores(q, k, causal, key_padding_mask, attn_mask, bias, alibi_slopes, window, scale)
    return _probabilities(s)[0]


def attention_forward(q, k, v, *, causal=False, key_padding_mask=None, attn_mask=None,
                      bias=None, alibi_slopes=None, window=None, scale=None, dtype=np.float64):
    """Returns (out (B, H, N, D), lse (B, H, N)), computed in ``dtype`` (float64 by default)."""
    q, k, v = (np.asarray(a, dtype) for a in (q, k, v))
    s, _ = _scores(q, k, causal, key_padding_mask, attn_mask, bias, alibi_slopes, window, scale)
    p, lse = _probabilities(s)
    out = np.einsum("bhnm,bhmd->bhnd", p, _expand_kv(v, q.shape[1]))
    return out, lse


def _sum_groups(x, Hkv):
    """(B, H, ...) -> (B, Hkv, ...): add up the query heads that share a key/value head."""
    B, H = x.shape[:2]
    return x.reshape(B, Hkv, H // Hkv, *x.shape[2:]).sum(axis=2)


def reduce_to_shape(x, shape):
    """Sum a (B, H, N, M) gradient down to the shape it was broadcast from."""
    lead = x.ndim - len(shape)
    x = x.sum(axis=tuple(range(lead)))
    axes = tuple(a for a, n in enumerate(shape) if n == 1 and x.shape[a] != 1)
    return x.sum(axis=axes, keepdims=True).reshape(shape)


def attention_backward(dout, q, k, v, *, causal=False, key_padding_mask=None, attn_mask=None,
                       bias=None, alibi_slopes=None, window=None, scale=None,
                       bias_requires_grad=False, dtype=np.float64):
    """Returns (dq, dk, dv, dbias) computed in ``dtype``; dbias is None unless asked for."""
    dout, q, k, v = (np.asarray(a, dtype) for a in (dout, q, k, v))
    H, Hkv = q.shape[1], k.shape[1]
    s, scale = _scores(q, k, causal, key_padding_mask, attn_mask, bias, alibi_slopes, window,
                       scale)
    p, _ = _probabilities(s)
    v_full = _expand_kv(v, H)
    dv = _sum_groups(np.einsum("bhnm,bhnd->bhmd", p, dout), Hkv)
    dp = np.einsum("bhnd,bhmd->bhnm", dout, v_full)
    ds = p * (dp - (dp * p).sum(axis=-1, keepdims=True))
    scale = q.dtype.type(scale)
    dq = scale * np.einsum("bhnm,bhmd->bhnd", ds, _expand_kv(k, H))
    dk = _sum_groups(scale * np.einsum("bhnm,bhnd->bhmd", ds, q), Hkv)
    dbias = None
    if bias_requires_grad:
        dbias = reduce_to_shape(ds, np.shape(bias))
    return dq, dk, dv, dbias


REFERENCES = {
    "attention": {"forward": attention_forward, "backward": attention_backward,
                  "weights": attention_weights},
}
