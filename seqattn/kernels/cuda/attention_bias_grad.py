"""The dense attention bias's gradient on NVIDIA GPUs, on the fused backward's tiles.

Shapes: q, dout (B, H, N, D); k, v (B, Hkv, M, D); lse, delta (B, H, N); dbias (Bb, Hb, Nb, Mb),
each dim either the full one or 1 (broadcast). dbias = dS = P (dP - delta) summed over the
broadcast dims, with P = exp2(S - lse) and dP = dout v^T recomputed as the backward does
(``attention_backward``, with the same device functions of ``attention_score_tile``). One block
of THREADS = 128 threads per tile of dbias (BQ x BK; one row where Nb = 1, one column where
Mb = 1) and (bb, hb): it loops over every (b, h, query tile, key tile) that maps onto its tile,
so it is the one writer of each element, and sums in a fixed order: the result is deterministic
(no atomics).

Thread (ty, tx) owns the query rows ty + 16 r and the keys tx + 8 c of each tile (the forward's
layout, ``attention_score_tile``), and adds its dS into a register tile; at the end the block's
tile goes through shared memory, where each output element sums its rows and columns in order.
Shared memory holds q (times scale * log2(e)) and dout [row][d], k and v [key][d].
"""
import functools

import numba
import numpy as np
from numba import cuda

from .attention_forward import tile_loader
from .attention_score_tile import (PAD, THREAD_COLS, THREAD_ROWS, THREADS, buffer_offsets,
                                   operand_buffer_sizes, score_tile_functions)
from .attention_scores import LEFT, LOG2E, RIGHT, SCALE, score_functions
from .compile_target import VECTOR_ALIGNMENT, jit_options

# (query rows, keys) per tile, largest first; the first whose buffers fit is used. Three
# register tiles per thread (scores, dP, the dS sum) keep these smaller than the forward's.
TILE_SHAPES = ((32, 32), (32, 16), (16, 16), (16, 8))


def blocks_per_sm(itemsize):
    """Resident blocks per SM the compiler must leave registers for (launch bounds): 3 (at most
    168 registers a thread) in float32, where the census shows no spill at any head tile; 2 in
    float64 (at 3, the 32-wide tiles spill)."""
    return 3 if itemsize == 4 else 2


def buffer_sizes(head_tile, block_q, block_k):
    """Elements of each shared-memory buffer, in layout order. The block's final dS tile
    [row][key] (block_q x (block_k + PAD)) reuses the space of q and dout, which holds it since
    head tiles are at least 32 wide and key tiles at most 64."""
    return operand_buffer_sizes(head_tile, block_q, block_k)


@functools.lru_cache(maxsize=None)
def bias_grad_kernel(dtype_name, head_tile, block_q, block_k):
    """The bias-gradient kernel for one dtype and tiling (compiled on its first launch)."""
    dtype = np.dtype(dtype_name)
    ftype = dtype.type
    element = numba.from_dtype(dtype)
    zero, one, log2e = ftype(0), ftype(1), ftype(LOG2E)
    scores = score_functions(dtype_name)
    modified, key_tiles, band_covers_tile = scores.modified, scores.key_tiles, \
        scores.band_covers_tile
    tile = score_tile_functions(dtype_name, head_tile, block_q, block_k)
    load_tile = tile_loader(dtype_name, head_tile)

    DT, BQ, BK = head_tile, block_q, block_k
    TR, TC = BQ // THREAD_ROWS, BK // THREAD_COLS
    sizes = buffer_sizes(head_tile, block_q, block_k)
    SIZE = sum(sizes.values())
    u = np.uint32
    offsets = buffer_offsets(sizes)
    Q_AT, DO_AT, K_AT, V_AT = (offsets[name] for name in ("q", "do", "k", "v"))
    DS_AT, STRIDE, DS_STRIDE = u(0), u(DT + PAD), u(BK + PAD)

    @cuda.jit(**jit_options(launch_bounds=(THREADS, blocks_per_sm(dtype.itemsize))))
    def attention_bias_grad_kernel(dbias, dout, lse, delta, q, k, v, mods):
        """Grid (bias tiles, Bb*Hb): one tile of dbias (Bb, Hb, Nb, Mb)."""
        smem = cuda.shared.array(SIZE, element, alignment=VECTOR_ALIGNMENT)
        s = cuda.local.array((TR, TC), element)
        dp = cuda.local.array((TR, TC), element)
        acc = cuda.local.array((TR, TC), element)
        row_lse = cuda.local.array(TR, element)  # in log2 units, like the scores
        row_delta = cuda.local.array(TR, element)
        n_batch, n_heads, n_q, D = q.shape[0], q.shape[1], q.shape[2], q.shape[3]
        n_k = k.shape[2]
        group = n_heads // k.shape[1]
        bias_b, bias_h, bias_n, bias_m = dbias.shape[0], dbias.shape[1], dbias.shape[2], \
            dbias.shape[3]
        rows_summed, cols_summed = bias_n == 1, bias_m == 1
        tiles_m = (bias_m + BK - 1) // BK
        bb = cuda.blockIdx.y // bias_h
        hb = cuda.blockIdx.y - bb * bias_h
        tile_i = cuda.blockIdx.x // tiles_m
        tile_j = cuda.blockIdx.x - tile_i * tiles_m
        ty = cuda.threadIdx.x // THREAD_COLS
        tx = cuda.threadIdx.x - ty * THREAD_COLS
        q_row, do_row = Q_AT + u(ty) * STRIDE, DO_AT + u(ty) * STRIDE
        k_row, v_row = K_AT + u(tx) * STRIDE, V_AT + u(tx) * STRIDE
        left, right = mods[LEFT], mods[RIGHT]
        plain = not modified(mods)
        for r in range(TR):
            for c in range(TC):
                acc[r, c] = zero
        # The (b, h, query tile, key tile) that map onto this block's tile, as one flat loop:
        # nothing that depends on b or h is loop-invariant, so the compiler keeps no per-head
        # value of the score modifications live across an inner loop (fewer registers).
        b_first, n_b = (0, n_batch) if bias_b == 1 else (bb, 1)
        h_first, n_h = (0, n_heads) if bias_h == 1 else (hb, 1)
        q_first, n_qt = (0, (n_q + BQ - 1) // BQ) if rows_summed else (tile_i * BQ, 1)
        k_first, n_kt = (0, (n_k + BK - 1) // BK) if cols_summed else (tile_j * BK, 1)
        for item in range(n_b * n_h * n_qt * n_kt):
            rest = item // n_kt
            k0 = k_first + (item - rest * n_kt) * BK
            q0 = q_first + (rest - (rest // n_qt) * n_qt) * BQ
            rest = rest // n_qt
            h = h_first + rest - (rest // n_h) * n_h
            b = b_first + rest // n_h
            kv_h = h // group
            visible_first, visible_stop = key_tiles(q0, BQ, BK, n_q, n_k, left, right)
            if k0 + BK <= visible_first or k0 >= visible_stop:
                continue  # the whole tile is outside the band: dS = 0
            cuda.syncthreads()  # the previous tiles are no longer read
            load_tile(smem, Q_AT, STRIDE, q, b, h, q0, n_q, BQ, D, mods[SCALE] * log2e)
            load_tile(smem, DO_AT, STRIDE, dout, b, h, q0, n_q, BQ, D, one)
            load_tile(smem, K_AT, STRIDE, k, b, kv_h, k0, n_k, BK, D, one)
            load_tile(smem, V_AT, STRIDE, v, b, kv_h, k0, n_k, BK, D, one)
            for r in range(TR):
                row_lse[r], row_delta[r] = tile.row_stats(lse, delta, b, h,
                                                          q0 + ty + THREAD_ROWS * r, n_q)
            cuda.syncthreads()
            # scores (log2 units) and dP = dout v^T
            tile.dot_pair(s, dp, smem, q_row, k_row, do_row, v_row)
            if not (plain and band_covers_tile(q0, BQ, k0, BK, n_q, n_k, left, right)):
                tile.modify(s, b, h, q0, k0, n_q, n_k, ty, tx, mods)
            for r in range(TR):
                for c in range(TC):
                    _, ds = tile.probability_and_ds(s[r, c], dp[r, c], row_lse[r], row_delta[r])
                    acc[r, c] += ds
        cuda.syncthreads()
        for r in range(TR):
            for c in range(TC):
                smem[DS_AT + u(ty + THREAD_ROWS * r) * DS_STRIDE + u(tx + THREAD_COLS * c)] = \
                    acc[r, c]
        cuda.syncthreads()
        # Each output element sums its share of the tile in a fixed order: deterministic.
        out_rows = 1 if rows_summed else BQ
        out_cols = 1 if cols_summed else BK
        for idx in range(cuda.threadIdx.x, out_rows * out_cols, THREADS):
            rr = idx // out_cols
            cc = idx - rr * out_cols
            i = tile_i * BQ + rr
            j = tile_j * BK + cc
            if i < bias_n and j < bias_m:
                r_first, r_stop = (0, BQ) if rows_summed else (rr, rr + 1)
                c_first, c_stop = (0, BK) if cols_summed else (cc, cc + 1)
                total = zero
                for row in range(r_first, r_stop):
                    for col in range(c_first, c_stop):
                        total += smem[DS_AT + u(row) * DS_STRIDE + u(col)]
                dbias[bb, hb, i, j] = total

    return attention_bias_grad_kernel
