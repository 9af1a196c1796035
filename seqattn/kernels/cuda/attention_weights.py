"""Attention weights on NVIDIA GPUs: the softmax probabilities, on the fused forward's tiles.

Shapes: q (B, H, N, D); k (B, Hkv, M, D); weights (B, H, N, M). One block of THREADS = 128
threads per (batch x head, query tile of BQ rows), in the forward's layout (``attention_forward``,
``attention_score_tile``): thread (ty, tx) owns the query rows ty + 16 r and the keys tx + 8 c of
each score tile. Two passes over the key tiles, made by one loop:

1. the key tiles the band lets the query tile see: each row's max and sum of exp2 (online, as
   in the forward, combined across the row's 8 lanes by shuffles), giving its log-sum-exp;
2. every key tile: the scores again and weights = exp2(score - log-sum-exp) (0 where hidden); a
   tile outside the band is written as zeros without computing it.

Shared memory holds the q tile [row][d], multiplied by scale * log2(e) as it is loaded (scores
in log2 units, see ``attention_scores``), and the k tile [key][d], rows padded by PAD.
"""
import functools
import math

import numba
import numpy as np
from numba import cuda

from .attention_forward import SHUFFLE_SCRATCH, tile_loader
from .attention_score_tile import (PAD, THREAD_COLS, THREAD_ROWS, THREADS,
                                   score_tile_functions)
from .attention_scores import LEFT, LOG2E, NEG_INF, RIGHT, SCALE, score_functions
from .compile_target import VECTOR_ALIGNMENT, jit_options

# (query rows, keys) per tile, largest first; the first whose buffers fit is used.
TILE_SHAPES = ((64, 64), (64, 32), (32, 32), (32, 16), (16, 16), (16, 8))
# Resident blocks per SM the compiler must leave registers for (launch bounds): 2, at most 255
# registers a thread. At the forward's 4 (128 registers) this kernel spilled (the census).
BLOCKS_PER_SM = 2


def buffer_sizes(head_tile, block_q, block_k):
    """Elements of each shared-memory buffer, in layout order."""
    return {"q": block_q * (head_tile + PAD), "k": block_k * (head_tile + PAD)}


@functools.lru_cache(maxsize=None)
def weights_kernel(dtype_name, head_tile, block_q, block_k):
    """The weights kernel for one dtype and tiling (compiled on its first launch)."""
    dtype = np.dtype(dtype_name)
    ftype = dtype.type
    element = numba.from_dtype(dtype)
    zero, one, neg_inf, log2e = ftype(0), ftype(1), ftype(NEG_INF), ftype(LOG2E)
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
    Q_AT, K_AT, STRIDE = u(0), u(sizes["q"]), u(DT + PAD)

    @cuda.jit(**jit_options(launch_bounds=(THREADS, BLOCKS_PER_SM)))
    def attention_weights_kernel(weights, q, k, mods):
        """Grid (B*H, query tiles): weights (B, H, N, M) of one query tile."""
        smem = cuda.shared.array(SIZE, element, alignment=VECTOR_ALIGNMENT)
        scratch = cuda.shared.array(SHUFFLE_SCRATCH, element)
        s = cuda.local.array((TR, TC), element)
        row_max = cuda.local.array(TR, element)  # in log2 units, like the scores
        row_sum = cuda.local.array(TR, element)  # of this thread's keys only, until pass 2
        n_heads, n_q, D = q.shape[1], q.shape[2], q.shape[3]
        n_k = k.shape[2]
        b = cuda.blockIdx.x // n_heads
        h = cuda.blockIdx.x - b * n_heads
        kv_h = h // (n_heads // k.shape[1])
        q0 = cuda.blockIdx.y * BQ
        ty = cuda.threadIdx.x // THREAD_COLS
        tx = cuda.threadIdx.x - ty * THREAD_COLS
        q_row = Q_AT + u(ty) * STRIDE
        k_row = K_AT + u(tx) * STRIDE
        left, right = mods[LEFT], mods[RIGHT]
        plain = not modified(mods)
        for r in range(TR):
            row_max[r] = neg_inf
            row_sum[r] = zero
        load_tile(smem, Q_AT, STRIDE, q, b, h, q0, n_q, BQ, D, mods[SCALE] * log2e)
        first, stop = key_tiles(q0, BQ, BK, n_q, n_k, left, right)
        # One loop for both passes (one inlined copy of the score code, fewer registers): the
        # visible key tiles, then every key tile.
        n_visible = (stop - first + BK - 1) // BK
        for step in range(n_visible + (n_k + BK - 1) // BK):
            second = step >= n_visible  # the same for every thread of the block
            k0 = (step - n_visible) * BK if second else first + step * BK
            visible = k0 >= first and k0 < stop
            if visible:
                cuda.syncthreads()  # the previous k tile is no longer read
                load_tile(smem, K_AT, STRIDE, k, b, kv_h, k0, n_k, BK, D, one)
                cuda.syncthreads()
                tile.dot(s, smem, q_row, k_row)
                if not (plain and band_covers_tile(q0, BQ, k0, BK, n_q, n_k, left, right)):
                    tile.modify(s, b, h, q0, k0, n_q, n_k, ty, tx, mods)
            if not second:
                # Pass 1: each row's running max and sum, as in the forward.
                for r in range(TR):
                    tile_max = s[r, 0]
                    for c in range(1, TC):
                        tile_max = max(tile_max, s[r, c])
                    new_max = max(row_max[r], tile.lanes_max(tile_max, scratch))
                    # A row that has seen no visible key keeps max -inf: shift by 0 (no NaN).
                    shift = new_max if new_max != neg_inf else zero
                    total = zero
                    for c in range(TC):
                        total += math.exp2(s[r, c] - shift)
                    row_sum[r] = row_sum[r] * math.exp2(row_max[r] - shift) + total
                    row_max[r] = new_max
                if step == n_visible - 1:
                    # row_max becomes each row's log-sum-exp (log2 units), -inf for a row that
                    # sees no key.
                    for r in range(TR):
                        total = tile.lanes_sum(row_sum[r], scratch)
                        row_max[r] = row_max[r] + math.log2(total) if total > zero else neg_inf
            else:
                # Pass 2: weights = exp2(score - lse), 0 where hidden and outside the band.
                for r in range(TR):
                    i = q0 + ty + THREAD_ROWS * r
                    for c in range(TC):
                        j = k0 + tx + THREAD_COLS * c
                        if i < n_q and j < n_k:
                            p = zero
                            if visible and row_max[r] != neg_inf:
                                p = math.exp2(s[r, c] - row_max[r])
                            weights[b, h, i, j] = p

    return attention_weights_kernel
