"""The CUDA attention kernels' thread layout, a thread's register tile of scores, and its rows'
statistics across lanes.

The device functions the forward, backward, weights and bias-gradient kernels build their scores
with (``attention_forward``, ``attention_backward``, ``attention_backward_dq``,
``attention_weights``, ``attention_bias_grad``), and the step from scores to dS that the three
backward kernels share, in their common thread layout: the 128 threads of a block form a
16 x 8 grid (t = 8 ty + tx); thread (ty, tx) owns the query rows ty + 16 r (r < TR = BQ / 16)
and the keys tx + 8 c (c < TC = BK / 8) of a BQ x BK tile, whose operands lie in shared memory
as rows of DT (the head tile) elements padded by PAD, 16-byte aligned, read 4 consecutive
elements at a time (one vector load each in float32). A row's 8 threads are 8 consecutive lanes
of one warp: its statistics are combined with three xor shuffles.

Shared-memory offsets are unsigned 32-bit (no negative-index fix-up, provable alignment).
"""
import collections
import functools
import math

import numba
import numpy as np
from numba import cuda

from .attention_scores import LOG2E, NEG_INF, score_functions
from .compile_target import shuffle_xor

THREADS = 128
THREAD_COLS = 8  # threads across a tile's keys (a row's lanes in a warp)
THREAD_ROWS = THREADS // THREAD_COLS  # 16 threads across a tile's rows
VECTOR = 4  # consecutive elements per shared-memory read (a float4)
PAD = 4  # elements added to each padded row: keeps rows 16-byte aligned, moves their banks

def operand_buffer_sizes(head_tile, block_q, block_k):
    """Elements of the backward kernels' operand buffers in shared memory, in layout order: q
    and dout [row][d] (block_q rows), k and v [key][d] (block_k keys), rows padded by PAD."""
    rows, keys = block_q * (head_tile + PAD), block_k * (head_tile + PAD)
    return {"q": rows, "do": rows, "k": keys, "v": keys}


def buffer_offsets(sizes):
    """{name: its first element} of buffers laid out one after another in ``sizes``' order in
    one shared array, as unsigned 32-bit offsets."""
    offsets, total = {}, 0
    for name, size in sizes.items():
        offsets[name] = np.uint32(total)
        total += size
    return offsets


ScoreTile = collections.namedtuple("ScoreTile", "dot dot_pair modify lanes_max lanes_sum add_ds_k "
                                                "row_stats probability_and_ds")


@functools.lru_cache(maxsize=None)
def score_tile_functions(dtype_name, head_tile, block_q, block_k):
    """The :class:`ScoreTile` device functions for one dtype and tiling:

    * ``dot(s, smem, rows_at, cols_at)``: s[r, c] = sum over d < DT of
      smem[rows_at + (ty + 16 r) (DT + PAD) + d] * smem[cols_at + (tx + 8 c) (DT + PAD) + d],
      given this thread's rows_at = A + ty (DT + PAD) and cols_at = B + tx (DT + PAD);
    * ``dot_pair(s, dp, smem, rows_at, cols_at, rows2_at, cols2_at)``: ``dot`` of both pairs
      in one pass over d (the backward's scores and dP = dout v^T);
    * ``modify(s, b, h, q0, k0, n_q, n_k, ty, tx, mods)``: each s[r, c] becomes the score of
      its (query, key) by ``attention_scores.score_at``, NEG_INF outside the arrays;
    * ``add_ds_k(acc, smem, ds_at, k_at)``: acc[r, 4 g + f] += sum over keys kk < BK of
      smem[ds_at + 16 r (BK + PAD) + kk] * smem[k_at + kk (DT + PAD) + 32 g + f], given this
      thread's ds_at = S + ty (BK + PAD) (dS [row][key]) and k_at = K + 4 tx (k [key][d]): the
      thread's query rows and head dims 32 g + 4 tx + f of dS k;
    * ``lanes_max(value, scratch)``, ``lanes_sum(value, scratch)``: over a row's 8 lanes;
    * ``row_stats(lse, delta, b, h, i, n_q)``: (lse[b, h, i] in log2 units, delta[b, h, i]) of
      query row i; (NEG_INF, 0) past the end;
    * ``probability_and_ds(score, dp, lse, delta)``: the backward's step from a score (log2
      units, as its row's lse from ``row_stats``) and its dP = dout v^T to (P, dS), with
      P = exp2(score - lse) (0 in a row that sees no key) and dS = P (dP - delta). Per element,
      so that each kernel uses P and dS where it computes them (a pass over the whole tile
      first kept them all live at once: the key-tile pass spilled 204 bytes instead of 48).
    """
    dtype = np.dtype(dtype_name)
    zero, neg_inf, log2e = dtype.type(0), dtype.type(NEG_INF), dtype.type(LOG2E)
    element = numba.from_dtype(dtype)
    score_at = score_functions(dtype_name).score_at
    TR, TC = block_q // THREAD_ROWS, block_k // THREAD_COLS
    TG = head_tile // (VECTOR * THREAD_COLS)  # groups of 4 head dims a thread accumulates
    TD = TG * VECTOR
    u = np.uint32
    D_STEPS, K_STEPS, U_VECTOR = u(head_tile // VECTOR), u(block_k // VECTOR), u(VECTOR)
    ROW_STEP, COL_STEP = u(THREAD_ROWS * (head_tile + PAD)), u(THREAD_COLS * (head_tile + PAD))
    KEY_STRIDE, DS_ROW_STEP = u(head_tile + PAD), u(THREAD_ROWS * (block_k + PAD))
    GROUP_STEP = u(VECTOR * THREAD_COLS)
    device = cuda.jit(device=True)

    @device
    def dot(s, smem, rows_at, cols_at):
        a_vec = cuda.local.array((TR, VECTOR), element)
        b_vec = cuda.local.array((TC, VECTOR), element)
        for r in range(TR):
            for c in range(TC):
                s[r, c] = zero
        for step in range(D_STEPS):
            d = step * U_VECTOR
            for r in range(TR):
                for e in range(VECTOR):
                    a_vec[r, e] = smem[rows_at + u(r) * ROW_STEP + d + u(e)]
            for c in range(TC):
                for e in range(VECTOR):
                    b_vec[c, e] = smem[cols_at + u(c) * COL_STEP + d + u(e)]
            for r in range(TR):
                for c in range(TC):
                    for e in range(VECTOR):
                        s[r, c] += a_vec[r, e] * b_vec[c, e]

    @device
    def dot_pair(s, dp, smem, rows_at, cols_at, rows2_at, cols2_at):
        a_vec = cuda.local.array((TR, VECTOR), element)
        b_vec = cuda.local.array((TR, VECTOR), element)
        c_vec = cuda.local.array((TC, VECTOR), element)
        e_vec = cuda.local.array((TC, VECTOR), element)
        for r in range(TR):
            for c in range(TC):
                s[r, c] = zero
                dp[r, c] = zero
        for step in range(D_STEPS):
            d = step * U_VECTOR
            for r in range(TR):
                for e in range(VECTOR):
                    a_vec[r, e] = smem[rows_at + u(r) * ROW_STEP + d + u(e)]
                    b_vec[r, e] = smem[rows2_at + u(r) * ROW_STEP + d + u(e)]
            for c in range(TC):
                for e in range(VECTOR):
                    c_vec[c, e] = smem[cols_at + u(c) * COL_STEP + d + u(e)]
                    e_vec[c, e] = smem[cols2_at + u(c) * COL_STEP + d + u(e)]
            for r in range(TR):
                for c in range(TC):
                    for e in range(VECTOR):
                        s[r, c] += a_vec[r, e] * c_vec[c, e]
                        dp[r, c] += b_vec[r, e] * e_vec[c, e]

    @device
    def add_ds_k(acc, smem, ds_at, k_at):
        ds_vec = cuda.local.array((TR, VECTOR), element)
        k_row = cuda.local.array(TD, element)
        for step in range(K_STEPS):
            kk = step * U_VECTOR
            for r in range(TR):
                for e in range(VECTOR):
                    ds_vec[r, e] = smem[ds_at + u(r) * DS_ROW_STEP + kk + u(e)]
            for e in range(VECTOR):
                for g in range(TG):
                    for f in range(VECTOR):
                        k_row[g * VECTOR + f] = smem[k_at + (kk + u(e)) * KEY_STRIDE
                                                     + u(g) * GROUP_STEP + u(f)]
                for r in range(TR):
                    for c in range(TD):
                        acc[r, c] += ds_vec[r, e] * k_row[c]

    @device
    def modify(s, b, h, q0, k0, n_q, n_k, ty, tx, mods):
        for r in range(TR):
            i = q0 + ty + THREAD_ROWS * r
            for c in range(TC):
                j = k0 + tx + THREAD_COLS * c
                score = neg_inf
                if i < n_q and j < n_k:
                    score = score_at(s[r, c], b, h, i, j, n_q, n_k, mods)
                s[r, c] = score

    @device
    def lanes_max(value, scratch):
        for lane_mask in (1, 2, 4):
            value = max(value, shuffle_xor(value, lane_mask, scratch))
        return value

    @device
    def lanes_sum(value, scratch):
        for lane_mask in (1, 2, 4):
            value += shuffle_xor(value, lane_mask, scratch)
        return value

    @device
    def row_stats(lse, delta, b, h, i, n_q):
        if i < n_q:
            return lse[b, h, i] * log2e, delta[b, h, i]
        return neg_inf, zero  # a row past the end: P = 0, as in a row that sees no key

    @device
    def probability_and_ds(score, dp, lse, delta):
        prob = zero
        if lse != neg_inf:
            prob = math.exp2(score - lse)
        # forward: out = P v, P = softmax(S)  =>  dS = P (dP - delta)
        return prob, prob * (dp - delta)

    return ScoreTile(dot, dot_pair, modify, lanes_max, lanes_sum, add_ds_k, row_stats,
                     probability_and_ds)
