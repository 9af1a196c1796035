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


def _pair_displacements(x, y, cell):
    """(B, N, M, 3) displacements x_i - y_j; with a cell, the shortest over the images
    n @ cell for n in {-2..2}^3 (brute force, independent of the kernels' wrapping)."""
    r = x[:, :, None, :] - y[:, None, :, :]
    if cell is None:
        return r
    cell = np.broadcast_to(np.asarray(cell, r.dtype), (x.shape[0], 3, 3))
    shifts = np.array(np.meshgrid(*[np.arange(-2, 3)] * 3, indexing="ij")).reshape(3, -1).T
    images = np.einsum("in,bnk->bik", shifts.astype(r.dtype), cell)  # (B, 125, 3)
    candidates = r[:, :, :, None, :] + images[:, None, None, :, :]
    best = np.argmin((candidates ** 2).sum(-1), axis=-1)
    return np.take_along_axis(candidates, best[..., None, None], axis=3)[:, :, :, 0]


def _distance_pieces(bias, dtype):
    """Dense pieces of a DistanceBias: displacements r, distances d, per-pair tables
    (B, H, N, M, C), and visibility (B, N, M)."""
    x = np.asarray(bias.x, dtype)
    y = x if bias.y is None else np.asarray(bias.y, dtype)
    table = np.asarray(bias.table, dtype)
    r = _pair_displacements(x, y, bias.cell)
    d = np.sqrt((r ** 2).sum(-1))
    if bias.types is None:
        tables = np.broadcast_to(table[None, :, None, None, :], d.shape[:1] + table.shape[:1]
                                 + d.shape[1:] + table.shape[1:])
    else:
        tq = np.asarray(bias.types)
        tk = tq if bias.y is None else np.asarray(bias.key_types)
        pair_tables = table[tq[:, :, None], tk[:, None, :]]  # (B, N, M, H, C)
        tables = pair_tables.transpose(0, 3, 1, 2, 4)
    cutoff = np.inf if bias.cutoff is None else bias.cutoff
    visible = d <= cutoff
    if bias.smooth_cutoff:
        visible &= d < cutoff
    return r, d, tables, visible


def _interpolation(d, r_max, C):
    u = np.minimum(d * (C - 1) / r_max, C - 1)
    lower = np.minimum(np.floor(u), C - 2).astype(int)
    return lower, u - lower, d * (C - 1) / r_max < C - 1


def distance_bias_dense(bias, dtype=np.float64):
    """(B, H, N, M) float bias equal to a DistanceBias, -inf where it hides the key."""
    r, d, tables, visible = _distance_pieces(bias, dtype)
    C = tables.shape[-1]
    lower, w, _ = _interpolation(d, bias.r_max, C)
    lo = np.take_along_axis(tables, lower[:, None, :, :, None], -1)[..., 0]
    hi = np.take_along_axis(tables, lower[:, None, :, :, None] + 1, -1)[..., 0]
    value = lo + w[:, None] * (hi - lo)
    if bias.smooth_cutoff:
        with np.errstate(divide="ignore", invalid="ignore"):
            value = value + np.log(0.5 * (1 + np.cos(np.pi * d / bias.cutoff)))[:, None]
    return np.where(visible[:, None], value, -np.inf)


def distance_bias_backward(bias, dbias, dtype=np.float64):
    """(dtable, dx, dy) of a DistanceBias from the gradient of its dense form, dbias (B, H, N, M).
    dy is None in self-attention (y is x), where dx holds both parts."""
    dbias = np.asarray(dbias, dtype)
    r, d, tables, visible = _distance_pieces(bias, dtype)
    C = tables.shape[-1]
    lower, w, inside = _interpolation(d, bias.r_max, C)
    g = np.where(visible[:, None], dbias, 0)  # (B, H, N, M)
    table = np.asarray(bias.table, dtype)
    dtable = np.zeros_like(table)
    B, H, N, M = g.shape
    b, h, i, j = np.meshgrid(*map(np.arange, (B, H, N, M)), indexing="ij")
    if bias.types is None:
        index_lo = (h, lower[b, i, j])
        index_hi = (h, lower[b, i, j] + 1)
    else:
        tq = np.asarray(bias.types)
        tk = tq if bias.y is None else np.asarray(bias.key_types)
        index_lo = (tq[b, i], tk[b, j], h, lower[b, i, j])
        index_hi = (tq[b, i], tk[b, j], h, lower[b, i, j] + 1)
    np.add.at(dtable, index_lo, g * (1 - w[:, None]))
    np.add.at(dtable, index_hi, g * w[:, None])
    lo = np.take_along_axis(tables, lower[:, None, :, :, None], -1)[..., 0]
    hi = np.take_along_axis(tables, lower[:, None, :, :, None] + 1, -1)[..., 0]
    slope = np.where(inside[:, None], (hi - lo) * (C - 1) / bias.r_max, 0)
    if bias.smooth_cutoff:
        a = np.pi / (2 * bias.cutoff)
        with np.errstate(invalid="ignore", over="ignore"):
            slope = slope - 2 * a * np.tan(a * d)[:, None]
    with np.errstate(invalid="ignore", divide="ignore"):
        direction = np.where(d[..., None] > 0, r / d[..., None], 0)  # dd/dx_i
    coef = np.where(visible[:, None], g * slope, 0).sum(axis=1)  # (B, N, M)
    dx = np.einsum("bnm,bnmk->bnk", coef, direction)
    dy = -np.einsum("bnm,bnmk->bmk", coef, direction)
    if bias.y is None:
        return dtable, dx + dy, None
    return dtable, dx, dy


def pair_codes_dense(bias, N, M):
    """(Bc, N, M) integer codes of a PairBias (computed for the relative form)."""
    if not bias.relative_form:
        codes = np.asarray(bias.codes, np.int64)
        return codes.reshape(-1, N, M)
    R = (np.shape(bias.table)[1] - 1) // 2
    qp = np.arange(N) + (M - N) if bias.query_positions is None else bias.query_positions
    kp = np.arange(M) if bias.key_positions is None else bias.key_positions
    qp, kp = np.asarray(qp).reshape(-1, N), np.asarray(kp).reshape(-1, M)
    return np.clip(kp[:, None, :] - qp[:, :, None], -R, R) + R


def pair_bias_dense(bias, N, M, dtype=np.float64):
    """(Bc, H, N, M) float bias equal to a PairBias, -inf where a code is negative."""
    codes = pair_codes_dense(bias, N, M)
    table = np.asarray(bias.table, dtype)
    values = table[:, np.maximum(codes, 0)].transpose(1, 0, 2, 3)
    return np.where(codes[:, None] >= 0, values, -np.inf)


def pair_bias_backward(bias, dbias, dtype=np.float64):
    """dtable (H, C) of a PairBias from the gradient of its dense form, dbias (B, H, N, M)."""
    B, H, N, M = np.shape(dbias)
    codes = np.broadcast_to(pair_codes_dense(bias, N, M), (B, N, M))
    dtable = np.zeros(np.shape(bias.table), dtype)
    for h in range(H):
        connected = codes >= 0
        np.add.at(dtable[h], codes[connected], np.asarray(dbias, dtype)[:, h][connected])
    return dtable


REFERENCES = {
    "attention": {"forward": attention_forward, "backward": attention_backward,
                  "weights": attention_weights},
}
