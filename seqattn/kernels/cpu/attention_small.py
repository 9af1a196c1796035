"""Fused attention for short sequences on the CPU: one task per (batch, head), whole rows.

Legend: q (B, H, N, D); k, v (B, Hkv, M, D); query head h reads key/value head h // (H // Hkv);
off = M - N aligns the last query with the last key. Arguments are an ``AttentionCall`` already
checked by ``seqattn.ops.attention_inputs``.

At the shortest lengths small models train on (a few dozen tokens at most, head dims of 4-16),
the tiled kernel of attention.py spends its time on what makes it fast at long sequences: panels
of k and v prepared per call, query blocks and key blocks, strips of rows. Here a task takes one
(batch, head) whole, with k and v transposed into (D, M) rows of its own, so that every product
runs along the keys (contiguous, vectorised) and a query's row of scores is complete at once:
an exact softmax (max, exp and sum over the row), no online rescaling. The same numbers come
out (the same masks, band, biases, scale, lse saved per row), within rounding.

Forward, in blocks of BLOCK query rows whose products share each pass over k and v; per query
row i: s = scale q_i k^T over the keys its band lets it see; the dense
score modifications (bias, ALiBi, band, attn_mask, key padding); m = max s, p = exp(s - m),
out_i = (p v) / sum p, lse_i = m + log(sum p). A row that sees no key gets zeros and -inf.

Backward, one task per (batch, kv head) so that the query heads sharing k and v add their dK and
dV into the task's own rows (no two tasks write the same memory: deterministic), in blocks of
BLOCK query rows. Per query row: p = exp(s - lse_i) recomputed, dP = dout_i v^T,
dS = p (dP - delta_i) with delta_i = dout_i . out_i, dq_i = scale dS k, dK += scale dS^T q_i,
dV += p^T dout_i; the products over the keys of a block's rows share each pass over k, v, dK
and dV.

The structured biases (distances, pair codes) are not computed here: the op
(``seqattn.ops.attention``) sends those calls, and the longer sequences
(MAX_LENGTH_TIMES_HEAD_DIM), to attention.py.
"""
import numpy as np
from numba import njit, prange

from .float32_math import FASTMATH
from .softmax_rows import exp_shifted, row_max, softmax_grad_row
from .threads import sized_kernel

NEG_INF = -np.inf

# This path serves calls whose longest length (N or M) times the head dim D is at most this
# (benchmarks/attention_short.py, one thread: a forward and backward with padding masks ran
# faster here than on the tiled kernel up to N 8-16 at D 16 and N 16-24 at D 8).
MAX_LENGTH_TIMES_HEAD_DIM = 192

# Multiply-adds of q k^T a thread must have before a launch takes it, as attention.py's GRAIN.
GRAIN = 2 ** 20


def _score_work(out, lse, q, k, *rest):
    B, H, N, D = q.shape
    return B * H * N * k.shape[2] * D


@njit(cache=True, fastmath=FASTMATH)
def _transpose_into(xt, x):
    """xt (D, M) = x (M, D) transposed."""
    for j in range(x.shape[0]):
        for d in range(x.shape[1]):
            xt[d, j] = x[j, d]


@njit(cache=True, fastmath=FASTMATH)
def _scores(s, q_row, kt, lo, scale):
    """s[c] = scale * q_row . k[lo + c] for the len(s) keys from lo (kt is k transposed)."""
    s[:] = 0
    width = s.shape[0]
    for d in range(q_row.shape[0]):
        qd = q_row[d] * scale
        # a slice, not kt[d, lo + c]: an index that may be negative wraps around, and that
        # check per element kept the loop off the vector path (2.3x slower, measured)
        keys = kt[d][lo:lo + width]
        for c in range(width):
            s[c] += qd * keys[c]


@njit(cache=True, fastmath=FASTMATH)
def _modify_row(s, b, h, i, lo, off, bias, attn_mask, key_padding_mask, alibi_slopes,
                has_bias, has_mask, has_kpm, has_alibi):
    """Add the dense bias and ALiBi to the scores s of query i (keys lo..), and set the keys
    the masks hide to -inf; the band was applied by choosing lo and len(s)."""
    width = s.shape[0]
    if has_bias:
        # A dim of size 1 broadcasts: index 0 there.
        brow = bias[b if bias.shape[0] > 1 else 0, h if bias.shape[1] > 1 else 0,
                    i if bias.shape[2] > 1 else 0]
        if brow.shape[0] > 1:
            for c in range(width):
                s[c] += brow[lo + c]
        else:
            for c in range(width):
                s[c] += brow[0]
    if has_alibi:
        slope = alibi_slopes[h]
        for c in range(width):
            s[c] -= slope * abs(i + off - lo - c)
    if has_mask:
        mrow = attn_mask[b if attn_mask.shape[0] > 1 else 0,
                         h if attn_mask.shape[1] > 1 else 0,
                         i if attn_mask.shape[2] > 1 else 0]
        for c in range(width):
            if not mrow[lo + c if mrow.shape[0] > 1 else 0]:
                s[c] = NEG_INF
    if has_kpm:
        padded = key_padding_mask[b][lo:lo + width]
        for c in range(width):
            if padded[c]:
                s[c] = NEG_INF


@njit(cache=True)
def _band(i, off, left, right, M):
    """[lo, hi): the keys query i may see through the band (causal and window)."""
    return max(0, i + off - left), min(M, i + off + right + 1)


# Query rows taken together: each pass over the transposed rows of k, v (and the backward's dK
# and dV) serves the block's rows, not one (the backward ran 1.6-2.5x slower than the forward
# row by row).
BLOCK = 4


@njit(cache=True, fastmath=FASTMATH)
def _add_outers(xt, lo, w0, w1, w2, w3, rows, factor):
    """xt[d, lo + c] += factor * sum over r of rows[r, d] w_r[c]: the rank-one updates of a
    block's four rows in one pass over the transposed rows of xt."""
    width = w0.shape[0]
    for d in range(rows.shape[1]):
        f0, f1 = rows[0, d] * factor, rows[1, d] * factor
        f2, f3 = rows[2, d] * factor, rows[3, d] * factor
        keys = xt[d][lo:lo + width]
        for c in range(width):
            keys[c] += f0 * w0[c] + f1 * w1[c] + f2 * w2[c] + f3 * w3[c]


@njit(cache=True, fastmath=FASTMATH)
def _products(s0, s1, s2, s3, rows, xt, lo):
    """s_r[c] = rows[r] . x[lo + c] for the four rows of a block (xt is x transposed)."""
    width = s0.shape[0]
    s0[:] = 0
    s1[:] = 0
    s2[:] = 0
    s3[:] = 0
    for d in range(rows.shape[1]):
        g0, g1, g2, g3 = rows[0, d], rows[1, d], rows[2, d], rows[3, d]
        keys = xt[d][lo:lo + width]
        for c in range(width):
            s0[c] += g0 * keys[c]
            s1[c] += g1 * keys[c]
            s2[c] += g2 * keys[c]
            s3[c] += g3 * keys[c]


@njit(cache=True, fastmath=FASTMATH)
def _weighted_sums(out, s0, s1, s2, s3, xt, lo, factor):
    """out[r, d] = factor * sum over c of s_r[c] x[lo + c, d] for the four rows of a block."""
    width = s0.shape[0]
    zero = out.dtype.type(0)
    for d in range(out.shape[1]):
        keys = xt[d][lo:lo + width]
        t0 = t1 = t2 = t3 = zero
        for c in range(width):
            t0 += s0[c] * keys[c]
            t1 += s1[c] * keys[c]
            t2 += s2[c] * keys[c]
            t3 += s3[c] * keys[c]
        out[0, d], out[1, d] = t0 * factor, t1 * factor
        out[2, d], out[3, d] = t2 * factor, t3 * factor


@sized_kernel(GRAIN, work=_score_work)
def _forward_tasks(out, lse, q, k, v, scale, bias, attn_mask, key_padding_mask, alibi_slopes,
                   left, right, has_bias, has_mask, has_kpm, has_alibi):
    B, H, N, D = q.shape
    Hkv, M = k.shape[1], k.shape[2]
    group, off = H // Hkv, M - N
    one = q.dtype.type(1)
    for task in prange(B * H):
        b, h = task // H, task % H
        hk = h // group
        kt = np.empty((D, M), q.dtype)
        vt = np.empty((D, M), q.dtype)
        _transpose_into(kt, k[b, hk])
        _transpose_into(vt, v[b, hk])
        s_buf = np.empty((BLOCK, M), q.dtype)
        # the block's rows of scale q and of out; rows past N stay zero
        q_rows = np.empty((BLOCK, D), q.dtype)
        out_rows = np.empty((BLOCK, D), q.dtype)
        factors = np.empty(BLOCK, q.dtype)
        for i0 in range(0, N, BLOCK):
            rows = min(BLOCK, N - i0)
            # as in the backward: the block's keys from the first row's band start to the
            # last row's band end, each row masking those outside its own band
            lo = _band(i0, off, left, right, M)[0]
            hi = _band(i0 + rows - 1, off, left, right, M)[1]
            width = max(hi - lo, 0)
            q_rows[:] = 0
            for r in range(rows):
                for d in range(D):
                    q_rows[r, d] = q[b, h, i0 + r, d] * scale
            s0, s1, s2, s3 = (s_buf[0][:width], s_buf[1][:width], s_buf[2][:width],
                              s_buf[3][:width])
            # s = scale q k^T
            _products(s0, s1, s2, s3, q_rows, kt, lo)
            for r in range(BLOCK):
                s = s_buf[r][:width]
                factors[r] = 0
                if r >= rows:
                    s[:] = 0
                    continue
                i = i0 + r
                row_lo, row_hi = _band(i, off, left, right, M)
                lse[b, h, i] = NEG_INF
                if row_hi <= row_lo:  # sees no key: zeros
                    s[:] = 0
                    continue
                _modify_row(s, b, h, i, lo, off, bias, attn_mask, key_padding_mask,
                            alibi_slopes, has_bias, has_mask, has_kpm, has_alibi)
                s[:row_lo - lo] = NEG_INF
                s[row_hi - lo:] = NEG_INF
                m = row_max(s)
                if m == NEG_INF:
                    s[:] = 0
                    continue
                total = exp_shifted(s, m)  # s holds exp(s - m) from here
                factors[r] = one / total
                lse[b, h, i] = m + np.log(total)
            # out_i = p v / sum p
            _weighted_sums(out_rows, s0, s1, s2, s3, vt, lo, one)
            for r in range(rows):
                for d in range(D):
                    out[b, h, i0 + r, d] = out_rows[r, d] * factors[r]


@sized_kernel(GRAIN, work=lambda dq, dk, dv, dout, out, lse, q, k, *rest: _score_work(
    dq, lse, q, k))
def _backward_tasks(dq, dk, dv, dout, out, lse, q, k, v, scale, bias, attn_mask,
                    key_padding_mask, alibi_slopes, left, right, has_bias, has_mask, has_kpm,
                    has_alibi):
    B, H, N, D = q.shape
    Hkv, M = k.shape[1], k.shape[2]
    group, off = H // Hkv, M - N
    one = q.dtype.type(1)
    for task in prange(B * Hkv):
        b, hk = task // Hkv, task % Hkv
        kt = np.empty((D, M), q.dtype)
        vt = np.empty((D, M), q.dtype)
        _transpose_into(kt, k[b, hk])
        _transpose_into(vt, v[b, hk])
        dkt = np.zeros((D, M), q.dtype)
        dvt = np.zeros((D, M), q.dtype)
        p_buf = np.empty((BLOCK, M), q.dtype)
        ds_buf = np.empty((BLOCK, M), q.dtype)
        # the block's rows of q, dout and dq; rows past N or that saw no key stay zero
        q_rows = np.empty((BLOCK, D), q.dtype)
        dout_rows = np.empty((BLOCK, D), q.dtype)
        dq_rows = np.empty((BLOCK, D), q.dtype)
        for h in range(hk * group, (hk + 1) * group):
            for i0 in range(0, N, BLOCK):
                rows = min(BLOCK, N - i0)
                # the rows' bands move right with i: the block sees the first row's start to
                # the last row's end, and each row masks the keys outside its own band
                lo = _band(i0, off, left, right, M)[0]
                hi = _band(i0 + rows - 1, off, left, right, M)[1]
                width = max(hi - lo, 0)
                q_rows[:] = 0
                dout_rows[:] = 0
                for r in range(BLOCK):
                    p, ds = p_buf[r][:width], ds_buf[r][:width]
                    p[:] = 0
                    ds[:] = 0
                    if r >= rows:
                        continue
                    i = i0 + r
                    row_lo, row_hi = _band(i, off, left, right, M)
                    row_lse = lse[b, h, i]
                    if row_hi <= row_lo or row_lse == NEG_INF:  # saw no key: no gradient
                        continue
                    q_rows[r] = q[b, h, i]
                    dout_rows[r] = dout[b, h, i]
                    # forward: s = scale q_i k^T, modified, outside the row's band -inf
                    _scores(p, q_rows[r], kt, lo, scale)
                    _modify_row(p, b, h, i, lo, off, bias, attn_mask, key_padding_mask,
                                alibi_slopes, has_bias, has_mask, has_kpm, has_alibi)
                    p[:row_lo - lo] = NEG_INF
                    p[row_hi - lo:] = NEG_INF
                    # forward: p = exp(s - m) / sum = exp(s - lse)
                    exp_shifted(p, row_lse)
                p0, p1, p2, p3 = (p_buf[0][:width], p_buf[1][:width], p_buf[2][:width],
                                  p_buf[3][:width])
                ds0, ds1, ds2, ds3 = (ds_buf[0][:width], ds_buf[1][:width],
                                      ds_buf[2][:width], ds_buf[3][:width])
                # forward: out_i = p v  ->  dV += p^T dout_i, dP = dout_i v^T
                _add_outers(dvt, lo, p0, p1, p2, p3, dout_rows, one)
                _products(ds0, ds1, ds2, ds3, dout_rows, vt, lo)
                for r in range(rows):
                    delta = dout_rows.dtype.type(0)
                    out_row = out[b, h, i0 + r]
                    for d in range(D):
                        delta += dout_rows[r, d] * out_row[d]
                    # softmax: dS = p (dP - delta)
                    softmax_grad_row(ds_buf[r][:width], p_buf[r][:width], delta)
                # forward: s = scale q_i k^T  ->  dq_i = scale dS k, dK += scale dS^T q_i
                _weighted_sums(dq_rows, ds0, ds1, ds2, ds3, kt, lo, scale)
                _add_outers(dkt, lo, ds0, ds1, ds2, ds3, q_rows, scale)
                for r in range(rows):
                    dq[b, h, i0 + r] = dq_rows[r]
        _transpose_into(dk[b, hk], dkt)
        _transpose_into(dv[b, hk], dvt)


def _mods(call):
    return (call.bias, call.attn_mask, call.key_padding_mask, call.alibi_slopes, call.left,
            call.right, call.has_bias, call.has_mask, call.has_kpm, call.has_alibi)


def _scale(call):
    return call.q.dtype.type(call.scale)


def attention_forward(out, lse, call):
    """Fill out (B, H, N, D) and lse (B, H, N) for a prepared call without structured
    biases."""
    _forward_tasks(out, lse, call.q, call.k, call.v, _scale(call), *_mods(call))


def attention_backward(dq, dk, dv, dout, out, lse, call):
    """Fill dq, dk, dv for a prepared call without structured biases, given the forward's out
    and lse (all C-contiguous)."""
    _backward_tasks(dq, dk, dv, dout, out, lse, call.q, call.k, call.v, _scale(call),
                    *_mods(call))
