"""The fused attention backward on NVIDIA GPUs, parallel over key tiles: FlashAttention-2's plan.

Shapes: q, dout (B, H, N, D); k, v (B, Hkv, M, D); lse, delta (B, H, N); dq (B, H, N, D); dk,
dv (B, Hkv, M, D). One block of THREADS = 128 threads per (batch x kv head, key tile of BK keys).
For each query head that shares the kv head and each query tile of BQ rows that the band lets
see the key tile, the block recomputes the scores once, and from them P = exp2(S - lse),
dP = dout v^T and dS = P (dP - delta) (``delta`` = rowsum(dout * out), computed before). Then

* dv += P^T dout and dk += scale dS^T q stay in registers and are written once, at the end (one
  writer per element: deterministic);
* with structured biases, their tables' gradients (fixed-point atomics: deterministic, see
  ``attention_scores.structured_grads``) and the key positions' gradient dy (Hkv, B, 3, M),
  summed inside the block (one writer);
* only in the kernel built ``with_dq`` (the launcher's ``deterministic=False``): dq += scale dS k
  is added into dq (zeroed first) with atomic adds, one per element and key tile, and the query
  positions' gradient dx (H, B, 3, N) likewise. The order of those adds follows the blocks, so
  dq is not bit-reproducible (FlashAttention-2 does the same: the scores are computed once
  instead of twice). Otherwise the query-tile pass of ``attention_backward_dq`` computes them.

The thread layout is the forward's (``attention_forward``): thread (ty, tx) of the 16 x 8 grid
owns the query rows ty + 16 r and keys tx + 8 c of each score tile; in the key-side accumulators
(dk, dv) the keys ty + 16 r and head dims 32 g + 4 tx + e; in the dq tile the query rows ty + 16 r
and the same head dims. Shared memory holds q (times scale * log2(e)) and dout [row][d], k and v
[key][d], P and dS transposed [key][row] (for dv and dk) and, with dq, dS [row][key]; every inner
loop reads 4 consecutive elements of a 16-byte aligned row.
"""
import functools
import math

import numba
import numpy as np
from numba import cuda

from .attention_forward import HEAD_TILE_STEP, SHUFFLE_SCRATCH, tile_loader
from .attention_score_tile import (PAD, THREAD_COLS, THREAD_ROWS, THREADS, VECTOR,
                                   buffer_offsets, operand_buffer_sizes, score_tile_functions)
from .attention_scores import D_HAS, LEFT, LOG2E, P_MODE, RIGHT, SCALE, score_functions
from .compile_target import VECTOR_ALIGNMENT, jit_options
from .. import structured_bias_math as sbm

# (query rows, keys) per tile, largest first; the first whose buffers fit is used. Keys come in
# multiples of THREAD_ROWS: each thread owns at least one key of dk and dv.
TILE_SHAPES = ((64, 64), (64, 32), (32, 32), (32, 16), (16, 16))


def blocks_per_sm(itemsize, head_tile):
    """Resident blocks per SM the compiler must leave registers for (launch bounds): 3 (at most
    168 registers a thread) for float32 up to D = 64, else 2."""
    return 3 if itemsize == 4 and head_tile <= 64 else 2


def buffer_sizes(head_tile, block_q, block_k, with_dq=True):
    """Elements of each shared-memory buffer, in layout order (dS [row][key] only ``with_dq``)."""
    transposed = block_k * (block_q + PAD)
    return {**operand_buffer_sizes(head_tile, block_q, block_k), "pt": transposed,
            "dst": transposed, "ds": block_q * (block_k + PAD) if with_dq else 0}


@functools.lru_cache(maxsize=None)
def backward_kernel(dtype_name, head_tile, block_q, block_k, with_dq=True):
    """The key-tile backward kernel for one dtype and tiling (compiled on its first launch);
    ``with_dq``: it also adds dq and dx with atomics (see the module's docstring)."""
    dtype = np.dtype(dtype_name)
    ftype = dtype.type
    element = numba.from_dtype(dtype)
    zero, one = ftype(0), ftype(1)
    log2e, ln2 = ftype(LOG2E), ftype(math.log(2))
    scores = score_functions(dtype_name)
    modified, structured_grads = scores.modified, scores.structured_grads
    tile = score_tile_functions(dtype_name, head_tile, block_q, block_k)
    query_tiles, band_covers_tile = scores.query_tiles, scores.band_covers_tile

    DT, BQ, BK = head_tile, block_q, block_k
    TR, TC, TK = BQ // THREAD_ROWS, BK // THREAD_COLS, BK // THREAD_ROWS
    TG = DT // HEAD_TILE_STEP
    TD = TG * VECTOR
    sizes = buffer_sizes(head_tile, block_q, block_k, with_dq)
    SIZE = sum(sizes.values())
    u = np.uint32
    offsets = buffer_offsets(sizes)
    Q_AT, DO_AT, K_AT, V_AT = offsets["q"], offsets["do"], offsets["k"], offsets["v"]
    PT_AT, DST_AT, DS_AT = offsets["pt"], offsets["dst"], offsets["ds"]
    RS, KS, TS, SS = u(DT + PAD), u(DT + PAD), u(BQ + PAD), u(BK + PAD)
    U_VECTOR, U_ROWS, U_COLS, U_STEP = u(VECTOR), u(THREAD_ROWS), u(THREAD_COLS), \
        u(HEAD_TILE_STEP)
    Q_STEPS = u(BQ // VECTOR)

    load_tile = tile_loader(dtype_name, head_tile)

    @cuda.jit(**jit_options(launch_bounds=(THREADS, blocks_per_sm(dtype.itemsize, DT))))
    def attention_backward_kernel(dq, dk, dv, dx, dy, dtable, dpair, table_scale, dout, lse,
                                  delta, q, k, v, mods):
        """Grid (B*Hkv, key tiles): dk, dv of one key tile; with a distance bias dy (Hkv, B,
        3, M) of its keys; its part of the tables' gradients (int64, unit 1 / table_scale);
        ``with_dq``, its part of dq (and of dx) by atomics."""
        smem = cuda.shared.array(SIZE, element, alignment=VECTOR_ALIGNMENT)
        scratch = cuda.shared.array(SHUFFLE_SCRATCH, element)
        s = cuda.local.array((TR, TC), element)
        dp = cuda.local.array((TR, TC), element)
        acc_dk = cuda.local.array((TK, TD), element)
        acc_dv = cuda.local.array((TK, TD), element)
        acc_dq = cuda.local.array((TR, TD), element)
        row_lse = cuda.local.array(TR, element)  # in log2 units, like the scores
        row_delta = cuda.local.array(TR, element)
        grad_x = cuda.local.array((TR, 3), element)
        grad_y = cuda.local.array((TC, 3), element)
        t_vec = cuda.local.array((TK, VECTOR), element)
        w_vec = cuda.local.array((TK, VECTOR), element)
        o_row = cuda.local.array(TD, element)
        q_row = cuda.local.array(TD, element)
        n_heads, n_q, D = q.shape[1], q.shape[2], q.shape[3]
        n_kv_heads, n_k = k.shape[1], k.shape[2]
        group = n_heads // n_kv_heads
        b = cuda.blockIdx.x // n_kv_heads
        kv_h = cuda.blockIdx.x - b * n_kv_heads
        k0 = cuda.blockIdx.y * BK
        ty = cuda.threadIdx.x // THREAD_COLS
        tx = cuda.threadIdx.x - ty * THREAD_COLS
        row_q = u(ty) * RS  # this thread's first query row in q, dout and dS
        row_k = u(tx) * KS  # its first key in k and v (score tile)
        row_t = u(ty) * TS  # its first key in the transposed P and dS (dk, dv)
        row_s = DS_AT + u(ty) * SS
        col_d = u(tx) * U_VECTOR  # its first head dim in the accumulators
        left, right = mods[LEFT], mods[RIGHT]
        scale = mods[SCALE]
        plain = not modified(mods)
        has_distance = mods[D_HAS]
        structured = has_distance or mods[P_MODE] != sbm.NO_PAIR
        for r in range(TK):
            for c in range(TD):
                acc_dk[r, c] = zero
                acc_dv[r, c] = zero
        for c in range(TC):
            for axis in range(3):
                grad_y[c, axis] = zero
        load_tile(smem, K_AT, KS, k, b, kv_h, k0, n_k, BK, D, one)
        load_tile(smem, V_AT, KS, v, b, kv_h, k0, n_k, BK, D, one)
        first, stop = query_tiles(k0, BQ, BK, n_q, n_k, left, right)
        for h in range(kv_h * group, (kv_h + 1) * group):
            for q0 in range(first, stop, BQ):
                cuda.syncthreads()  # the previous query tile is no longer read
                load_tile(smem, Q_AT, RS, q, b, h, q0, n_q, BQ, D, scale * log2e)
                load_tile(smem, DO_AT, RS, dout, b, h, q0, n_q, BQ, D, one)
                for r in range(TR):
                    row_lse[r], row_delta[r] = tile.row_stats(lse, delta, b, h,
                                                              q0 + ty + THREAD_ROWS * r, n_q)
                    for axis in range(3):
                        grad_x[r, axis] = zero
                cuda.syncthreads()
                # s = (scale log2(e) q) k^T and dp = dout v^T
                tile.dot_pair(s, dp, smem, Q_AT + row_q, K_AT + row_k, DO_AT + row_q,
                              V_AT + row_k)
                if not (plain and band_covers_tile(q0, BQ, k0, BK, n_q, n_k, left, right)):
                    tile.modify(s, b, h, q0, k0, n_q, n_k, ty, tx, mods)
                for r in range(TR):
                    i = q0 + ty + THREAD_ROWS * r
                    for c in range(TC):
                        j = k0 + tx + THREAD_COLS * c
                        prob, ds = tile.probability_and_ds(s[r, c], dp[r, c], row_lse[r],
                                                           row_delta[r])
                        key = u(tx) + u(c) * U_COLS
                        query = u(ty) + u(r) * U_ROWS
                        smem[PT_AT + key * TS + query] = prob
                        smem[DST_AT + key * TS + query] = ds
                        if with_dq:
                            smem[row_s + u(r) * U_ROWS * SS + key] = ds
                        if structured and ds != zero:  # hidden pairs have dS = 0
                            gx, gy, gz = structured_grads(ds, b, h, i, j, mods, dtable, dpair,
                                                          table_scale)
                            grad_x[r, 0] += gx
                            grad_x[r, 1] += gy
                            grad_x[r, 2] += gz
                            grad_y[c, 0] -= gx
                            grad_y[c, 1] -= gy
                            grad_y[c, 2] -= gz
                if with_dq and has_distance:
                    for r in range(TR):
                        i = q0 + ty + THREAD_ROWS * r
                        for axis in range(3):
                            total = tile.lanes_sum(grad_x[r, axis], scratch)
                            if tx == 0 and i < n_q:
                                cuda.atomic.add(dx, (h, b, axis, i), total)
                cuda.syncthreads()
                # dv += P^T dout and dk += dS^T (scale log2(e) q), 4 queries per step
                for step in range(Q_STEPS):
                    qq = step * U_VECTOR
                    for r in range(TK):
                        for e in range(VECTOR):
                            at = row_t + u(r) * U_ROWS * TS + qq + u(e)
                            t_vec[r, e] = smem[PT_AT + at]
                            w_vec[r, e] = smem[DST_AT + at]
                    for e in range(VECTOR):
                        for g in range(TG):
                            for f in range(VECTOR):
                                at = (qq + u(e)) * RS + u(g) * U_STEP + col_d + u(f)
                                o_row[g * VECTOR + f] = smem[DO_AT + at]
                                q_row[g * VECTOR + f] = smem[Q_AT + at]
                        for r in range(TK):
                            for c in range(TD):
                                acc_dv[r, c] += t_vec[r, e] * o_row[c]
                                acc_dk[r, c] += w_vec[r, e] * q_row[c]
                if with_dq:
                    # dq += scale dS k, added into dq
                    for r in range(TR):
                        for c in range(TD):
                            acc_dq[r, c] = zero
                    tile.add_ds_k(acc_dq, smem, row_s, K_AT + col_d)
                    for r in range(TR):
                        i = q0 + ty + THREAD_ROWS * r
                        if i < n_q:
                            for g in range(TG):
                                for f in range(VECTOR):
                                    d = g * HEAD_TILE_STEP + tx * VECTOR + f
                                    if d < D:
                                        cuda.atomic.add(dq, (b, h, i, d),
                                                        scale * acc_dq[r, g * VECTOR + f])
        # q was multiplied by scale log2(e) in shared memory: dk = ln(2) acc_dk = scale dS^T q
        for r in range(TK):
            key = k0 + ty + THREAD_ROWS * r
            if key < n_k:
                for g in range(TG):
                    for f in range(VECTOR):
                        d = g * HEAD_TILE_STEP + tx * VECTOR + f
                        if d < D:
                            dk[b, kv_h, key, d] = ln2 * acc_dk[r, g * VECTOR + f]
                            dv[b, kv_h, key, d] = acc_dv[r, g * VECTOR + f]
        if has_distance:
            # Each key's THREAD_ROWS threads hold parts of its dy: add them up in a fixed order,
            # through the space of P^T (at least THREAD_ROWS x BK elements).
            for axis in range(3):
                cuda.syncthreads()
                for c in range(TC):
                    smem[PT_AT + u(ty) * u(BK) + u(tx) + u(c) * U_COLS] = grad_y[c, axis]
                cuda.syncthreads()
                for jj in range(cuda.threadIdx.x, BK, THREADS):
                    if k0 + jj < n_k:
                        total = zero
                        for t in range(THREAD_ROWS):
                            total += smem[PT_AT + u(t) * u(BK) + u(jj)]
                        dy[kv_h, b, axis, k0 + jj] = total

    return attention_backward_kernel
