"""The attention backward's dq on NVIDIA GPUs, parallel over query tiles: deterministic.

Shapes: q, dout (B, H, N, D); k, v (B, Hkv, M, D); lse, delta (B, H, N); dq (B, H, N, D); dx
(H, B, 3, N). One block of THREADS = 128 threads per (batch x head, query tile of BQ rows), the
forward's grid. For each key tile the band lets the query tile see, the block recomputes the
scores S and dP = dout v^T, forms dS = P (dP - delta) with the key-tile pass's device function
(``attention_score_tile``), and adds scale dS k into a register tile. Each element of dq, and with
a distance bias each query position's gradient dx, has one writer, which sums the key tiles in
order: the same bits every run, at the price of computing the scores a second time (the key-tile
pass, built without dq, computes dk, dv, dy and the tables' gradients).

Thread (ty, tx) of the 16 x 8 grid owns the query rows ty + 16 r and the keys tx + 8 c of each
score tile, and the head dims 32 g + 4 tx + f of its rows of dq (the forward's layout). Shared
memory holds q (times scale * log2(e)) and dout [row][d], k and v [key][d], and dS [row][key].
"""
import functools

import numba
import numpy as np
from numba import cuda

from .attention_forward import HEAD_TILE_STEP, SHUFFLE_SCRATCH, tile_loader
from .attention_score_tile import (PAD, THREAD_COLS, THREAD_ROWS, THREADS, VECTOR,
                                   buffer_offsets, operand_buffer_sizes, score_tile_functions)
from .attention_scores import D_HAS, LEFT, LOG2E, RIGHT, SCALE, score_functions
from .compile_target import VECTOR_ALIGNMENT, jit_options

# (query rows, keys) per tile, largest first; the first whose buffers fit is used.
TILE_SHAPES = ((64, 64), (64, 32), (32, 32), (32, 16), (16, 16), (16, 8))


def blocks_per_sm(itemsize, head_tile):
    """Resident blocks per SM the compiler must leave registers for (launch bounds): 3 (at most
    168 registers a thread) for float32 up to D = 64, else 2 (as the key-tile pass)."""
    return 3 if itemsize == 4 and head_tile <= 64 else 2


def buffer_sizes(head_tile, block_q, block_k):
    """Elements of each shared-memory buffer, in layout order."""
    return {**operand_buffer_sizes(head_tile, block_q, block_k), "ds": block_q * (block_k + PAD)}


@functools.lru_cache(maxsize=None)
def backward_dq_kernel(dtype_name, head_tile, block_q, block_k):
    """The dq kernel for one dtype and tiling (compiled on its first launch)."""
    dtype = np.dtype(dtype_name)
    ftype = dtype.type
    element = numba.from_dtype(dtype)
    zero, one, log2e = ftype(0), ftype(1), ftype(LOG2E)
    scores = score_functions(dtype_name)
    modified, position_grads = scores.modified, scores.position_grads
    key_tiles, band_covers_tile = scores.key_tiles, scores.band_covers_tile
    tile = score_tile_functions(dtype_name, head_tile, block_q, block_k)
    load_tile = tile_loader(dtype_name, head_tile)

    DT, BQ, BK = head_tile, block_q, block_k
    TR, TC = BQ // THREAD_ROWS, BK // THREAD_COLS
    TG = DT // HEAD_TILE_STEP
    TD = TG * VECTOR
    sizes = buffer_sizes(head_tile, block_q, block_k)
    SIZE = sum(sizes.values())
    u = np.uint32
    offsets = buffer_offsets(sizes)
    Q_AT, DO_AT, K_AT, V_AT, DS_AT = (offsets[name] for name in ("q", "do", "k", "v", "ds"))
    STRIDE, DS_STRIDE = u(DT + PAD), u(BK + PAD)
    U_VECTOR, U_ROWS, U_COLS = u(VECTOR), u(THREAD_ROWS), u(THREAD_COLS)

    @cuda.jit(**jit_options(launch_bounds=(THREADS, blocks_per_sm(dtype.itemsize, DT))))
    def attention_backward_dq_kernel(dq, dx, dout, lse, delta, q, k, v, mods):
        """Grid (B*H, query tiles): dq (B, H, N, D) of one query tile; with a distance bias its
        rows of dx (H, B, 3, N)."""
        smem = cuda.shared.array(SIZE, element, alignment=VECTOR_ALIGNMENT)
        scratch = cuda.shared.array(SHUFFLE_SCRATCH, element)
        s = cuda.local.array((TR, TC), element)
        dp = cuda.local.array((TR, TC), element)
        acc = cuda.local.array((TR, TD), element)
        row_lse = cuda.local.array(TR, element)  # in log2 units, like the scores
        row_delta = cuda.local.array(TR, element)
        grad_x = cuda.local.array((TR, 3), element)
        n_heads, n_q, D = q.shape[1], q.shape[2], q.shape[3]
        n_k = k.shape[2]
        b = cuda.blockIdx.x // n_heads
        h = cuda.blockIdx.x - b * n_heads
        kv_h = h // (n_heads // k.shape[1])
        # Last query tile first: under a causal mask it has the most keys to visit.
        q0 = (cuda.gridDim.y - 1 - cuda.blockIdx.y) * BQ
        ty = cuda.threadIdx.x // THREAD_COLS
        tx = cuda.threadIdx.x - ty * THREAD_COLS
        row_q = u(ty) * STRIDE  # this thread's first query row in q and dout
        row_k = u(tx) * STRIDE  # its first key in k and v
        row_s = DS_AT + u(ty) * DS_STRIDE  # its first row in dS
        left, right = mods[LEFT], mods[RIGHT]
        scale = mods[SCALE]
        plain = not modified(mods)
        has_distance = mods[D_HAS]
        for r in range(TR):
            row_lse[r], row_delta[r] = tile.row_stats(lse, delta, b, h, q0 + ty + THREAD_ROWS * r,
                                                      n_q)
            for axis in range(3):
                grad_x[r, axis] = zero
            for c in range(TD):
                acc[r, c] = zero
        load_tile(smem, Q_AT, STRIDE, q, b, h, q0, n_q, BQ, D, scale * log2e)
        load_tile(smem, DO_AT, STRIDE, dout, b, h, q0, n_q, BQ, D, one)
        first, stop = key_tiles(q0, BQ, BK, n_q, n_k, left, right)
        for k0 in range(first, stop, BK):
            cuda.syncthreads()  # the previous key tile and its dS are no longer read
            load_tile(smem, K_AT, STRIDE, k, b, kv_h, k0, n_k, BK, D, one)
            load_tile(smem, V_AT, STRIDE, v, b, kv_h, k0, n_k, BK, D, one)
            cuda.syncthreads()
            # s = (scale log2(e) q) k^T and dp = dout v^T
            tile.dot_pair(s, dp, smem, Q_AT + row_q, K_AT + row_k, DO_AT + row_q, V_AT + row_k)
            if not (plain and band_covers_tile(q0, BQ, k0, BK, n_q, n_k, left, right)):
                tile.modify(s, b, h, q0, k0, n_q, n_k, ty, tx, mods)
            for r in range(TR):
                i = q0 + ty + THREAD_ROWS * r
                for c in range(TC):
                    j = k0 + tx + THREAD_COLS * c
                    _, ds = tile.probability_and_ds(s[r, c], dp[r, c], row_lse[r], row_delta[r])
                    smem[row_s + u(r) * U_ROWS * DS_STRIDE + u(tx) + u(c) * U_COLS] = ds
                    if has_distance and ds != zero:  # hidden pairs have dS = 0
                        gx, gy, gz = position_grads(ds, b, h, i, j, mods)
                        grad_x[r, 0] += gx
                        grad_x[r, 1] += gy
                        grad_x[r, 2] += gz
            cuda.syncthreads()
            tile.add_ds_k(acc, smem, row_s, K_AT + u(tx) * U_VECTOR)  # acc += dS k
        for r in range(TR):
            i = q0 + ty + THREAD_ROWS * r
            if has_distance:
                for axis in range(3):
                    total = tile.lanes_sum(grad_x[r, axis], scratch)
                    if tx == 0 and i < n_q:
                        dx[h, b, axis, i] = total
            if i < n_q:
                for g in range(TG):
                    for f in range(VECTOR):
                        d = g * HEAD_TILE_STEP + tx * VECTOR + f
                        if d < D:
                            dq[b, h, i, d] = scale * acc[r, g * VECTOR + f]

    return attention_backward_dq_kernel
