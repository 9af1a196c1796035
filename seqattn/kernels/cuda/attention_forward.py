"""The fused attention forward on NVIDIA GPUs: register tiles on the CUDA cores.

FlashAttention-2's plan with CUDA-core arithmetic (Numba has no tensor-core intrinsics). Shapes:
q (B, H, N, D); k, v (B, Hkv, M, D); out (B, H, N, D); lse (B, H, N). One block of THREADS = 128
threads per (batch x head, query tile of BQ rows); the key/value tiles of BK keys that the band
lets the tile see stream through shared memory; only each row's log-sum-exp is stored.

Each thread owns a register tile. The threads form a 16 x 8 grid (t = 8 ty + tx); thread (ty, tx)
owns the query rows ty + 16 r (r < TR = BQ / 16) and the keys tx + 8 c (c < TC = BK / 8) of each
score tile, and the head dims 32 g + 4 tx + e (g < DT / 32, e < 4) of the output accumulator:
TR x TC scores and TR x DT / 8 outputs. A row's 8 threads are 8 consecutive lanes of one warp, so
its running max and sum stay in registers and are combined with three xor shuffles (no shared
memory and no barrier for the row statistics).

Shared memory holds the q tile [row][d] (multiplied by scale * log2(e) as it is loaded, so that
the softmax takes exp2 of the scores as they are), the k and v tiles [key][d] and the tile of
probabilities [row][key]. Every inner-loop read is 4 consecutive elements of a 16-byte aligned
row (along d for q.k, along the keys and along d for p.v): one vector load each in float32. Rows
of q, k and p are padded by 4 elements so that the rows the lanes of a warp read at once (4
consecutive ty, or 8 consecutive tx) start in different banks.

The score tile and the shuffles come from ``attention_score_tile`` (shared with the backward,
weights and bias-gradient kernels), and every score modification (band, masks, biases, ALiBi,
structured biases) from ``attention_scores.score_at``; a tile that the band covers entirely, in
a call without other modifications, skips it.
"""
import functools
import math

import numba
import numpy as np
from numba import cuda

from .attention_score_tile import (PAD, THREAD_COLS, THREAD_ROWS, THREADS, VECTOR,
                                   score_tile_functions)
from .attention_scores import LEFT, LOG2E, NEG_INF, RIGHT, SCALE, score_functions
from .compile_target import VECTOR_ALIGNMENT, jit_options, shuffle_scratch_size
HEAD_TILE_STEP = VECTOR * THREAD_COLS  # 32: the head dims one accumulator column group covers
# (query rows, keys) per tile, largest first; the first whose buffers fit is used.
TILE_SHAPES = ((64, 64), (64, 32), (32, 32), (32, 16), (16, 16), (16, 8))
SHUFFLE_SCRATCH = shuffle_scratch_size(THREADS)


def blocks_per_sm(itemsize, head_tile):
    """Resident blocks per SM the compiler must leave registers for (launch bounds): 4 (16
    warps, at most 128 registers a thread) where the register tiles fit that, else 2."""
    return 4 if itemsize == 4 and head_tile <= 128 else 2


def head_tile(D):
    """Shared-memory width for head dim D: D padded with zeros to a multiple of 32."""
    return HEAD_TILE_STEP * max(1, -(-D // HEAD_TILE_STEP))


@functools.lru_cache(maxsize=None)
def tile_loader(dtype_name, head_tile):
    """The device function both attention kernels fill their shared-memory tiles with, for one
    dtype and head tile DT: ``load_tile(smem, at, stride, src, b, h, row0, n_rows, rows, D,
    factor)`` sets smem[at + r*stride + d] = factor * src[b, h, row0 + r, d] for r < rows,
    d < DT, zero outside the array. Consecutive threads take consecutive d: coalesced reads."""
    zero = np.dtype(dtype_name).type(0)
    DT, u = head_tile, np.uint32

    @cuda.jit(device=True)
    def load_tile(smem, at, stride, src, b, h, row0, n_rows, rows, D, factor):
        for idx in range(cuda.threadIdx.x, rows * DT, THREADS):
            r = idx // DT
            d = idx - r * DT
            value = zero
            if row0 + r < n_rows and d < D:
                value = src[b, h, row0 + r, d] * factor
            smem[at + u(r) * stride + u(d)] = value

    return load_tile


def buffer_sizes(head_tile, block_q, block_k):
    """Elements of each shared-memory buffer, in layout order."""
    return {"q": block_q * (head_tile + PAD), "k": block_k * (head_tile + PAD),
            "v": block_k * head_tile, "p": block_q * (block_k + PAD)}


@functools.lru_cache(maxsize=None)
def forward_kernel(dtype_name, head_tile, block_q, block_k):
    """The forward kernel for one dtype and tiling (compiled on its first launch)."""
    dtype = np.dtype(dtype_name)
    ftype = dtype.type  # casts literals so float32 code stays float32
    element = numba.from_dtype(dtype)
    zero, one, neg_inf = ftype(0), ftype(1), ftype(NEG_INF)
    log2e, ln2 = ftype(LOG2E), ftype(math.log(2))
    scores = score_functions(dtype_name)
    modified, key_tiles, band_covers_tile = scores.modified, scores.key_tiles, \
        scores.band_covers_tile
    tile = score_tile_functions(dtype_name, head_tile, block_q, block_k)

    DT, BQ, BK = head_tile, block_q, block_k
    TR, TC = BQ // THREAD_ROWS, BK // THREAD_COLS
    TG = DT // HEAD_TILE_STEP  # column groups of 4 head dims per thread in the accumulator
    TD = TG * VECTOR
    sizes = buffer_sizes(head_tile, block_q, block_k)
    SIZE = sum(sizes.values())
    # Shared-memory offsets are unsigned 32-bit: Numba then skips its negative-index fix-up, and
    # the compiler can prove the 16-byte alignment that vector loads need.
    u = np.uint32
    Q_AT, K_AT = u(0), u(sizes["q"])
    V_AT, P_AT = u(sizes["q"] + sizes["k"]), u(sizes["q"] + sizes["k"] + sizes["v"])
    QS, KS, VS, PS = u(DT + PAD), u(DT + PAD), u(DT), u(BK + PAD)
    U_VECTOR, U_ROWS, U_COLS, U_STEP = u(VECTOR), u(THREAD_ROWS), u(THREAD_COLS), \
        u(HEAD_TILE_STEP)
    K_STEPS = u(BK // VECTOR)

    load_tile = tile_loader(dtype_name, head_tile)

    @cuda.jit(**jit_options(launch_bounds=(THREADS, blocks_per_sm(dtype.itemsize, DT))))
    def attention_forward_kernel(out, lse, q, k, v, mods):
        """Grid (B*H, query tiles): out (B, H, N, D) and lse (B, H, N) of one query tile."""
        smem = cuda.shared.array(SIZE, element, alignment=VECTOR_ALIGNMENT)
        scratch = cuda.shared.array(SHUFFLE_SCRATCH, element)
        s = cuda.local.array((TR, TC), element)
        acc = cuda.local.array((TR, TD), element)
        row_max = cuda.local.array(TR, element)  # in log2 units, like the scores
        row_sum = cuda.local.array(TR, element)  # of this thread's keys only, until the end
        p_vec = cuda.local.array((TR, VECTOR), element)
        v_vec = cuda.local.array(TD, element)
        n_heads, n_q, D = q.shape[1], q.shape[2], q.shape[3]
        n_k = k.shape[2]
        b = cuda.blockIdx.x // n_heads
        h = cuda.blockIdx.x - b * n_heads
        kv_h = h // (n_heads // k.shape[1])
        # Last query tile first: under a causal mask it has the most keys to visit.
        q0 = (cuda.gridDim.y - 1 - cuda.blockIdx.y) * BQ
        ty = cuda.threadIdx.x // THREAD_COLS
        tx = cuda.threadIdx.x - ty * THREAD_COLS
        q_row = Q_AT + u(ty) * QS  # this thread's first row of q, key of k, row of p, dim of v
        k_row = K_AT + u(tx) * KS
        p_row = P_AT + u(ty) * PS
        v_col = V_AT + u(tx) * U_VECTOR
        left, right = mods[LEFT], mods[RIGHT]
        plain = not modified(mods)
        for r in range(TR):
            row_max[r] = neg_inf
            row_sum[r] = zero
            for c in range(TD):
                acc[r, c] = zero
        load_tile(smem, Q_AT, QS, q, b, h, q0, n_q, BQ, D, mods[SCALE] * log2e)
        first, stop = key_tiles(q0, BQ, BK, n_q, n_k, left, right)
        for k0 in range(first, stop, BK):
            cuda.syncthreads()  # the previous tile's k, v and p are no longer read
            load_tile(smem, K_AT, KS, k, b, kv_h, k0, n_k, BK, D, one)
            load_tile(smem, V_AT, VS, v, b, kv_h, k0, n_k, BK, D, one)
            cuda.syncthreads()
            tile.dot(s, smem, q_row, k_row)  # s = (scale log2(e) q) k^T
            if not (plain and band_covers_tile(q0, BQ, k0, BK, n_q, n_k, left, right)):
                tile.modify(s, b, h, q0, k0, n_q, n_k, ty, tx, mods)
            # Online softmax: rescale the row's sum and outputs by exp2(old max - new max).
            for r in range(TR):
                tile_max = s[r, 0]
                for c in range(1, TC):
                    tile_max = max(tile_max, s[r, c])
                new_max = max(row_max[r], tile.lanes_max(tile_max, scratch))
                # A row that has seen no visible key keeps max -inf; shifting by 0 instead keeps
                # exp2's argument at -inf rather than NaN (-inf - -inf), so its weights stay 0.
                shift = new_max if new_max != neg_inf else zero
                rescale = math.exp2(row_max[r] - shift)
                row_max[r] = new_max
                total = zero
                for c in range(TC):
                    p = math.exp2(s[r, c] - shift)
                    total += p
                    smem[p_row + u(r) * U_ROWS * PS + u(tx) + u(c) * U_COLS] = p
                row_sum[r] = row_sum[r] * rescale + total
                for c in range(TD):
                    acc[r, c] *= rescale
            cuda.syncthreads()
            # acc += p v: 4 keys per step (v rows past the end were loaded as zeros, p is 0 there)
            for step in range(K_STEPS):
                key = step * U_VECTOR
                for r in range(TR):
                    for e in range(VECTOR):
                        p_vec[r, e] = smem[p_row + u(r) * U_ROWS * PS + key + u(e)]
                for e in range(VECTOR):
                    for g in range(TG):
                        for f in range(VECTOR):
                            v_vec[g * VECTOR + f] = smem[v_col + (key + u(e)) * VS
                                                         + u(g) * U_STEP + u(f)]
                    for r in range(TR):
                        for c in range(TD):
                            acc[r, c] += p_vec[r, e] * v_vec[c]
        for r in range(TR):
            total = tile.lanes_sum(row_sum[r], scratch)
            i = q0 + ty + THREAD_ROWS * r
            if i < n_q:
                inverse = one / total if total > zero else zero  # no visible key: out = 0
                for g in range(TG):
                    for f in range(VECTOR):
                        d = g * HEAD_TILE_STEP + tx * VECTOR + f
                        if d < D:
                            out[b, h, i, d] = acc[r, g * VECTOR + f] * inverse
                if tx == 0:
                    lse[b, h, i] = (row_max[r] + math.log2(total)) * ln2 if total > zero \
                        else neg_inf

    return attention_forward_kernel
