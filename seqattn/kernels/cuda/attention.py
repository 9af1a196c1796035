"""Fused attention on NVIDIA GPUs (numba.cuda): forward, backward, bias gradient and weights.

The CUDA twin of ``seqattn/kernels/cpu/attention.py``: the same launchers with the same semantics
(see :class:`seqattn.ops.attention_inputs.AttentionCall`). Shapes: q (B, H, N, D); k, v (B, Hkv,
M, D). Every score modification (band, masks, dense bias, ALiBi, and the structured biases) is
made in one device function, ``score_at`` in ``cuda/attention_scores.py``; the kernels receive
them as one tuple, ``mods`` (see ``attention_scores.score_args``). Scores are in log2 units and
the softmax takes exp2; lse is saved in natural units. The plan is FlashAttention-2's, on CUDA
cores (Numba has no tensor-core intrinsics):

* forward (``cuda/attention_forward.py``): one block per (batch x head, query tile), each thread
  owning a register tile of scores and of the output; the row statistics stay in registers.
* backward (``cuda/attention_backward.py``): delta = rowsum(dout * out) first; then one pass
  parallel over key tiles that recomputes the scores once per (query tile, key tile): dk and dv
  in registers (deterministic), dq added with atomics (not bit-reproducible), as are the
  structured biases' tables and query positions' gradient; the key positions' gradient is summed
  inside the block.
* bias gradient: one block per tile of the bias's own (broadcast) shape, looping over the dims it
  was broadcast along, so every dbias element has exactly one writer.

The kernels of this file (weights, bias gradient) are register-blocked: the 128 threads of a
block form a 16 x 8 grid over a (query x key) tile; each thread owns ``rows_per_thread``
contiguous rows and every 8th column, so neighbouring threads read neighbouring shared-memory
words. Keys and values are stored transposed with an odd row stride, which makes both q.k (along
a key row) and p.v (down a key column) free of bank conflicts. Tile sizes are picked per kernel
and head dim to fit 48 KiB of static shared memory (:func:`_plan`).

Kernels compile lazily, once per (dtype, head tile, tile shape), from :func:`_tile_kernels`,
``attention_forward.forward_kernel`` and ``attention_backward.backward_kernel``, which bake
dtype-typed constants into the code so that float32 kernels never promote to float64.
"""
from collections import namedtuple
import functools
import math

import numba
import numpy as np
from numba import cuda

from . import attention_backward as fused_backward
from . import attention_forward as fused_forward
from .elementwise import fill
from .attention_scores import LEFT, LOG2E, NEG_INF, RIGHT, SCALE, score_args, score_functions

THREADS = 128
THREAD_COLS = 8  # threads across a tile's columns (keys, or head dims of an accumulator)
THREAD_ROWS = THREADS // THREAD_COLS  # 16 threads across a tile's rows
SHARED_BYTES = 48 * 1024  # the static shared memory one block may declare
# (query rows, key columns) per tile, largest first; the first whose buffers fit is used.
TILE_SHAPES = ((64, 32), (32, 32), (32, 16), (16, 16))
LARGEST_HEAD_TILE = 256
MAX_GRID_Y = 65535  # CUDA's limit on the grid's second dim (the first allows 2**31 - 1)

Tiles = namedtuple("Tiles", "head_tile block_q block_k")
StructuredGrads = namedtuple("StructuredGrads", "distance_table x y pair_table")
StructuredGrads.__doc__ = """Outputs for the structured biases' gradients, in kernel layout:
distance_table (H, P, C), x (B, 3, N), y (B, 3, M), pair_table (H, C); None where absent."""



def _head_tile(kind, D):
    """Shared-memory width of kernel ``kind`` for head dim D, D padded with zeros: for the
    forward a multiple of 32; for the others a multiple of THREAD_COLS, powers of two up to 32,
    then multiples of 32, to keep the number of compiled variants small."""
    if kind in ("forward", "backward"):
        return fused_forward.head_tile(D)
    if D <= 32:
        return max(THREAD_COLS, 1 << (D - 1).bit_length())
    return 32 * -(-D // 32)


def _buffer_sizes(kind, head_tile, block_q, block_k):
    """Elements of each shared-memory buffer a kernel kind uses, in layout order."""
    if kind == "forward":
        return fused_forward.buffer_sizes(head_tile, block_q, block_k)
    if kind == "backward":
        return fused_backward.buffer_sizes(head_tile, block_q, block_k)
    rows = block_q * (head_tile + 1)  # a query-side tile, [row][d]
    keys = head_tile * (block_k + 1)  # a key-side tile stored transposed, [d][key]
    scores = block_q * (block_k + 1)  # a score tile, [row][key]
    partials = block_q * THREAD_COLS  # each thread's partial row statistic, [row][thread col]
    return {
        "weights": {"q": rows, "kt": keys, "partial": partials},
        "dbias": {"q": rows, "do": rows, "kt": keys, "vt": keys, "ds": scores},
    }[kind]


def _layout(kind, tiles):
    """(offsets by buffer name, total elements) of a kernel's one flat shared array."""
    offsets, total = {}, 0
    for name, size in _buffer_sizes(kind, *tiles).items():
        offsets[name] = total
        total += size
    return offsets, total


def _fitting_tiles(kind, itemsize, head_tile):
    shapes = {"forward": fused_forward.TILE_SHAPES,
              "backward": fused_backward.TILE_SHAPES}.get(kind, TILE_SHAPES)
    for block_q, block_k in shapes:
        tiles = Tiles(head_tile, block_q, block_k)
        if _layout(kind, tiles)[1] * itemsize <= SHARED_BYTES:
            return tiles
    return None


def _largest_head_dim(kind, itemsize):
    supported = [t for t in range(THREAD_COLS, LARGEST_HEAD_TILE + 1, THREAD_COLS)
                 if _head_tile(kind, t) == t and _fitting_tiles(kind, itemsize, t) is not None]
    return max(supported)


@functools.lru_cache(maxsize=None)
def _plan(kind, dtype_name, D):
    """The tiles kernel ``kind`` uses for head dim D, or a ValueError if its buffers cannot fit."""
    itemsize = np.dtype(dtype_name).itemsize
    tiles = _fitting_tiles(kind, itemsize, _head_tile(kind, D))
    if D > LARGEST_HEAD_TILE or tiles is None:
        float32_hint = " or use float32" if dtype_name == "float64" else ""
        raise ValueError(
            f"q has head dim D={D}, but the CUDA attention kernels ({kind}) hold their "
            f"{dtype_name} tiles in {SHARED_BYTES // 1024} KiB of shared memory and support "
            f"D <= {_largest_head_dim(kind, itemsize)}; use more, smaller heads{float32_hint}"
        )
    return tiles


def _kernel(kind, dtype, D):
    """(kernel, tiles) of kernel ``kind`` at this dtype and head dim."""
    dtype_name = np.dtype(dtype).name
    tiles = _plan(kind, dtype_name, D)
    if kind == "forward":
        return fused_forward.forward_kernel(dtype_name, *tiles), tiles
    if kind == "backward":
        return fused_backward.backward_kernel(dtype_name, *tiles), tiles
    return getattr(_tile_kernels(dtype_name, *tiles), kind), tiles


def _cdiv(a, b):
    return -(-a // b)


def _launch(kernel, grid, *args):
    """Launch over ``grid`` blocks of THREADS threads; an empty grid has nothing to compute."""
    if grid[1] > MAX_GRID_Y:
        raise ValueError(f"attention on the GPU needs a grid of {grid} blocks, but CUDA allows at "
                         f"most {MAX_GRID_Y} along y; split the batch or the sequence")
    if min(grid) > 0:
        kernel[grid, THREADS](*args)


def _sizes(call):
    """(B, H, Hkv, N, M, D) of a prepared call."""
    B, H, N, D = (int(s) for s in call.q.shape)
    return B, H, int(call.k.shape[1]), N, int(call.k.shape[2]), D


@functools.lru_cache(maxsize=None)
def _tile_kernels(dtype_name, head_tile, block_q, block_k):
    """Compile-on-first-launch kernels for one dtype and tiling, as a namespace of kernels."""
    dtype = np.dtype(dtype_name)
    ftype = dtype.type  # casts ints and literals so float32 code stays float32
    element = numba.from_dtype(dtype)
    zero, neg_inf = ftype(0), ftype(NEG_INF)

    DT = head_tile
    BQ, BK = block_q, block_k
    TR = BQ // THREAD_ROWS  # score rows per thread
    TC = BK // THREAD_COLS  # score columns per thread
    QS, KS, PS = DT + 1, BK + 1, BK + 1  # odd row strides: no shared-memory bank conflicts
    TX = THREAD_COLS
    # Offsets in the inner loops are unsigned: Numba then skips its negative-index fix-up, which
    # otherwise costs several 64-bit integer instructions per shared-memory load.
    index = np.uint64
    U_DT, U_TR, U_TC, U_TX = (index(n) for n in (DT, TR, TC, TX))
    U_QS, U_KS = index(QS), index(KS)
    tiles = Tiles(head_tile, block_q, block_k)
    W, W_SIZE = _layout("weights", tiles)
    DB, DB_SIZE = _layout("dbias", tiles)
    W_Q, W_KT, W_PART = W["q"], W["kt"], W["partial"]
    DB_Q, DB_DO, DB_KT, DB_VT, DB_DS = DB["q"], DB["do"], DB["kt"], DB["vt"], DB["ds"]

    log2e = ftype(LOG2E)
    scores = score_functions(dtype_name)
    score_at, key_tiles = scores.score_at, scores.key_tiles

    device = cuda.jit(device=True)

    @device
    def load_rows(smem, at, src, b, h, row0, n_rows, D):
        """smem[at + r*QS + d] = src[b, h, row0 + r, d], zero outside the array."""
        for idx in range(cuda.threadIdx.x, BQ * DT, THREADS):
            r = idx // DT
            d = idx - r * DT
            value = zero
            if row0 + r < n_rows and d < D:
                value = src[b, h, row0 + r, d]
            smem[at + r * QS + d] = value

    @device
    def load_transposed(smem, at, src, b, h, col0, n_cols, D):
        """smem[at + d*KS + j] = src[b, h, col0 + j, d], zero outside the array."""
        for idx in range(cuda.threadIdx.x, BK * DT, THREADS):
            j = idx // DT
            d = idx - j * DT
            value = zero
            if col0 + j < n_cols and d < D:
                value = src[b, h, col0 + j, d]
            smem[at + d * KS + j] = value

    @device
    def dot_tile(acc, smem, rows_at, cols_at, ty, tx, has_work):
        """acc[r, c] = rows[ty*TR + r] . cols[tx + c*TX] (rows [row][d], cols transposed)."""
        a = cuda.local.array(TR, element)
        w = cuda.local.array(TC, element)
        for r in range(TR):
            for c in range(TC):
                acc[r, c] = zero
        if has_work:
            a_at = index(rows_at + ty * TR * QS)
            w_at = index(cols_at + tx)
            for d in range(U_DT):
                for r in range(U_TR):
                    a[r] = smem[a_at + r * U_QS + d]
                for c in range(U_TC):
                    w[c] = smem[w_at + d * U_KS + c * U_TX]
                for r in range(TR):
                    for c in range(TC):
                        acc[r, c] += a[r] * w[c]

    @device
    def scores_tile(s, smem, q_at, kt_at, b, h, q0, k0, n_q, n_k, ty, tx, mods):
        """s[r, c] = score of query q0 + ty*TR + r and key k0 + tx + c*TX, NEG_INF outside."""
        row0 = q0 + ty * TR
        dot_tile(s, smem, q_at, kt_at, ty, tx, row0 < n_q and k0 + tx < n_k)
        for r in range(TR):
            for c in range(TC):
                i = row0 + r
                j = k0 + tx + c * TX
                score = neg_inf
                if i < n_q and j < n_k:
                    score = score_at(s[r, c] * mods[SCALE] * log2e, b, h, i, j, n_q, n_k,
                                     mods)
                s[r, c] = score

    @device
    def softmax_step(s, row_max, row_sum, rescale, smem, part_at, ty, tx):
        """Online softmax over one score tile: s becomes exp(s - new row max).

        row_sum gathers this thread's columns only (rescaled like everything else) and is totalled
        across the row's threads once, at the end, by ``total_rows``.
        """
        for r in range(TR):
            tile_max = neg_inf
            for c in range(TC):
                tile_max = max(tile_max, s[r, c])
            smem[part_at + (ty * TR + r) * TX + tx] = tile_max
        cuda.syncthreads()
        for r in range(TR):
            new_max = row_max[r]
            for t in range(TX):
                new_max = max(new_max, smem[part_at + (ty * TR + r) * TX + t])
            # A row that has seen no visible key keeps max -inf; shifting by 0 instead keeps
            # exp's argument at -inf rather than NaN (-inf - -inf), so its weights stay 0.
            shift = new_max if new_max != neg_inf else zero
            rescale[r] = math.exp2(row_max[r] - shift)
            row_max[r] = new_max
            total = row_sum[r] * rescale[r]
            for c in range(TC):
                p = math.exp2(s[r, c] - shift)
                s[r, c] = p
                total += p
            row_sum[r] = total

    @device
    def total_rows(row_sum, smem, part_at, ty, tx):
        """Sum each row's per-thread partial sums across the row's TX threads."""
        cuda.syncthreads()  # other threads may still be reading the last tile's partial maxima
        for r in range(TR):
            smem[part_at + (ty * TR + r) * TX + tx] = row_sum[r]
        cuda.syncthreads()
        for r in range(TR):
            total = zero
            for t in range(TX):
                total += smem[part_at + (ty * TR + r) * TX + t]
            row_sum[r] = total

    @device
    def load_row_stats(row_lse, row_delta, lse, delta, b, h, row0, n_q):
        """This thread's rows of lse and delta; rows past the end count as empty."""
        for r in range(TR):
            row_lse[r] = neg_inf
            row_delta[r] = zero
            if row0 + r < n_q:
                row_lse[r] = lse[b, h, row0 + r] * log2e  # in log2 units, as the scores
                row_delta[r] = delta[b, h, row0 + r]

    @device
    def score_gradient_tile(ds, p, smem, q_at, do_at, kt_at, vt_at, row_lse, row_delta, b, h,
                            q0, k0, n_q, n_k, ty, tx, mods):
        """p = softmax probabilities recomputed from lse; ds = p * (dout.v - delta)."""
        scores_tile(p, smem, q_at, kt_at, b, h, q0, k0, n_q, n_k, ty, tx, mods)
        dot_tile(ds, smem, do_at, vt_at, ty, tx, q0 + ty * TR < n_q and k0 + tx < n_k)
        for r in range(TR):
            for c in range(TC):
                prob = zero
                if row_lse[r] != neg_inf:  # a row that sees no key has no gradient
                    prob = math.exp2(p[r, c] - row_lse[r])
                p[r, c] = prob
                ds[r, c] = prob * (ds[r, c] - row_delta[r])

    @cuda.jit
    def attention_weights_kernel(weights, q, k, mods):
        """Grid (B*H, query tiles): weights (B, H, N, M) of one query tile, in two passes."""
        smem = cuda.shared.array(W_SIZE, element)
        s = cuda.local.array((TR, TC), element)
        row_max = cuda.local.array(TR, element)
        row_sum = cuda.local.array(TR, element)
        rescale = cuda.local.array(TR, element)
        n_heads, n_q, D = q.shape[1], q.shape[2], q.shape[3]
        n_k = k.shape[2]
        b = cuda.blockIdx.x // n_heads
        h = cuda.blockIdx.x - b * n_heads
        kv_h = h // (n_heads // k.shape[1])
        q0 = cuda.blockIdx.y * BQ
        ty = cuda.threadIdx.x // TX
        tx = cuda.threadIdx.x - ty * TX
        row0 = q0 + ty * TR
        for r in range(TR):
            row_max[r] = neg_inf
            row_sum[r] = zero
        load_rows(smem, W_Q, q, b, h, q0, n_q, D)
        first, stop = key_tiles(q0, BQ, BK, n_q, n_k, mods[LEFT], mods[RIGHT])
        # Pass 1: each row's max and sum, as in the forward pass.
        for k0 in range(first, stop, BK):
            cuda.syncthreads()
            load_transposed(smem, W_KT, k, b, kv_h, k0, n_k, D)
            cuda.syncthreads()
            scores_tile(s, smem, W_Q, W_KT, b, h, q0, k0, n_q, n_k, ty, tx, mods)
            softmax_step(s, row_max, row_sum, rescale, smem, W_PART, ty, tx)
        total_rows(row_sum, smem, W_PART, ty, tx)
        # Pass 2: every key tile, hidden ones included, so that each weight is written.
        for k0 in range(0, n_k, BK):
            cuda.syncthreads()
            load_transposed(smem, W_KT, k, b, kv_h, k0, n_k, D)
            cuda.syncthreads()
            scores_tile(s, smem, W_Q, W_KT, b, h, q0, k0, n_q, n_k, ty, tx, mods)
            for r in range(TR):
                i = row0 + r
                for c in range(TC):
                    j = k0 + tx + c * TX
                    if i < n_q and j < n_k:
                        p = zero
                        if row_sum[r] > zero:
                            p = math.exp2(s[r, c] - row_max[r]) / row_sum[r]
                        weights[b, h, i, j] = p

    @cuda.jit
    def attention_bias_grad_kernel(dbias, dout, lse, delta, q, k, v, mods):
        """Grid (bias tiles, Bb*Hb): dbias (Bb, Hb, Nb, Mb) = dS summed over broadcast dims.

        A block owns one tile of dbias (a single row or column where that dim is broadcast) and
        loops over every (b, h, query tile, key tile) that maps onto it, so it is the only writer.
        """
        smem = cuda.shared.array(DB_SIZE, element)
        p = cuda.local.array((TR, TC), element)
        ds = cuda.local.array((TR, TC), element)
        acc = cuda.local.array((TR, TC), element)
        row_lse = cuda.local.array(TR, element)
        row_delta = cuda.local.array(TR, element)
        n_batch, n_heads, n_q, D = q.shape[0], q.shape[1], q.shape[2], q.shape[3]
        n_kv_heads, n_k = k.shape[1], k.shape[2]
        group = n_heads // n_kv_heads
        bias_b, bias_h, bias_n, bias_m = dbias.shape[0], dbias.shape[1], dbias.shape[2], \
            dbias.shape[3]
        rows_summed = bias_n == 1
        cols_summed = bias_m == 1
        tiles_m = (bias_m + BK - 1) // BK
        bb = cuda.blockIdx.y // bias_h
        hb = cuda.blockIdx.y - bb * bias_h
        tile_i = cuda.blockIdx.x // tiles_m
        tile_j = cuda.blockIdx.x - tile_i * tiles_m
        ty = cuda.threadIdx.x // TX
        tx = cuda.threadIdx.x - ty * TX
        for r in range(TR):
            for c in range(TC):
                acc[r, c] = zero
        b_first, b_stop = (0, n_batch) if bias_b == 1 else (bb, bb + 1)
        h_first, h_stop = (0, n_heads) if bias_h == 1 else (hb, hb + 1)
        q_first, q_stop = (0, n_q) if rows_summed else (tile_i * BQ, tile_i * BQ + 1)
        k_first, k_stop = (0, n_k) if cols_summed else (tile_j * BK, tile_j * BK + 1)
        for b in range(b_first, b_stop):
            for h in range(h_first, h_stop):
                kv_h = h // group
                for q0 in range(q_first, q_stop, BQ):
                    visible_first, visible_stop = key_tiles(q0, BQ, BK, n_q, n_k, mods[LEFT],
                                                            mods[RIGHT])
                    for k0 in range(k_first, k_stop, BK):
                        if k0 + BK <= visible_first or k0 >= visible_stop:
                            continue  # the whole tile is outside the band: dS = 0
                        cuda.syncthreads()
                        load_rows(smem, DB_Q, q, b, h, q0, n_q, D)
                        load_rows(smem, DB_DO, dout, b, h, q0, n_q, D)
                        load_transposed(smem, DB_KT, k, b, kv_h, k0, n_k, D)
                        load_transposed(smem, DB_VT, v, b, kv_h, k0, n_k, D)
                        load_row_stats(row_lse, row_delta, lse, delta, b, h, q0 + ty * TR, n_q)
                        cuda.syncthreads()
                        score_gradient_tile(ds, p, smem, DB_Q, DB_DO, DB_KT, DB_VT, row_lse,
                                            row_delta, b, h, q0, k0, n_q, n_k, ty, tx, mods)
                        for r in range(TR):
                            for c in range(TC):
                                acc[r, c] += ds[r, c]
        cuda.syncthreads()
        for r in range(TR):
            for c in range(TC):
                smem[DB_DS + (ty * TR + r) * PS + tx + c * TX] = acc[r, c]
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
                for r in range(r_first, r_stop):
                    for c in range(c_first, c_stop):
                        total += smem[DB_DS + r * PS + c]
                dbias[bb, hb, i, j] = total

    return _KernelFamily(attention_weights_kernel, attention_bias_grad_kernel)


_KernelFamily = namedtuple("_KernelFamily", "weights dbias")


@functools.lru_cache(maxsize=None)
def _row_delta_kernel(dtype_name):
    zero = np.dtype(dtype_name).type(0)

    @cuda.jit
    def row_delta_kernel(delta, dout, out):
        """delta (B, H, N) = rowsum(dout * out): the softmax backward's per-row term."""
        n_heads, n_q, D = out.shape[1], out.shape[2], out.shape[3]
        row = cuda.grid(1)
        if row < out.shape[0] * n_heads * n_q:
            b = row // (n_heads * n_q)
            h = (row // n_q) - b * n_heads
            i = row - (row // n_q) * n_q
            total = zero
            for d in range(D):
                total += dout[b, h, i, d] * out[b, h, i, d]
            delta[b, h, i] = total

    return row_delta_kernel


def _row_delta(dout, out, call):
    B, H, Hkv, N, M, D = _sizes(call)
    delta = cuda.device_array((B, H, N), dtype=call.q.dtype)
    rows = B * H * N
    if rows > 0:
        _row_delta_kernel(np.dtype(call.q.dtype).name)[_cdiv(rows, THREADS), THREADS](
            delta, dout, out)
    return delta


def attention_forward(out, lse, call):
    """out (B, H, N, D) and lse (B, H, N) for a prepared call; empty rows get 0 and -inf."""
    B, H, Hkv, N, M, D = _sizes(call)
    kernel, tiles = _kernel("forward", call.q.dtype, D)
    _launch(kernel, (B * H, _cdiv(N, tiles.block_q)), out, lse, call.q, call.k, call.v,
            score_args(call))


def _zeros(shape, dtype):
    return cuda.to_device(np.zeros(shape, dtype))


def attention_backward(dq, dk, dv, structured, dout, out, lse, call):
    """dq (B, H, N, D), dk and dv (B, Hkv, M, D), and the :class:`StructuredGrads`
    ``structured`` (its arrays not None where the call has that bias), given dout and the
    forward's out and lse."""
    B, H, Hkv, N, M, D = _sizes(call)
    dtype = call.q.dtype
    delta = _row_delta(dout, out, call)
    has_distance = call.distance.has
    P, C = (int(n) for n in call.distance.table.shape[1:])
    # dq, the per-head parts of the query positions' gradient and the tables receive atomic
    # adds from every key tile (zeroed first); the key positions' gradient has one writer per
    # element. 1-element placeholders where unused.
    fill(dq.reshape(dq.size), 0.0)
    dx = _zeros((H, B, 3, N) if has_distance else (1, 1, 3, 1), dtype)
    dy = cuda.device_array((Hkv, B, 3, M) if has_distance else (1, 1, 3, 1), dtype)
    dtable = _zeros((H, P, C) if has_distance else (1, 1, 2), dtype)
    dpair = _zeros(tuple(call.pair.table.shape) if call.pair.mode else (1, 1), dtype)
    kernel, tiles = _kernel("backward", dtype, D)
    _launch(kernel, (B * Hkv, _cdiv(M, tiles.block_k)), dq, dk, dv, dx, dy, dtable, dpair, dout,
            lse, delta, call.q, call.k, call.v, score_args(call))
    if has_distance:
        structured.distance_table.copy_to_device(dtable)
        structured.x.copy_to_device(dx.copy_to_host().sum(axis=0))
        structured.y.copy_to_device(dy.copy_to_host().sum(axis=0))
    if call.pair.mode:
        structured.pair_table.copy_to_device(dpair)


def attention_bias_grad(dbias, dout, out, lse, call):
    """dbias, shaped like call.bias (each dim full or 1): dS summed over the broadcast dims."""
    B, H, Hkv, N, M, D = _sizes(call)
    delta = _row_delta(dout, out, call)
    kernel, tiles = _kernel("dbias", call.q.dtype, D)
    bias_b, bias_h, bias_n, bias_m = (int(s) for s in dbias.shape)
    grid = (_cdiv(bias_n, tiles.block_q) * _cdiv(bias_m, tiles.block_k), bias_b * bias_h)
    _launch(kernel, grid, dbias, dout, lse, delta, call.q, call.k, call.v,
            score_args(call))


def attention_weights(weights, call):
    """weights (B, H, N, M): the attention probabilities."""
    B, H, Hkv, N, M, D = _sizes(call)
    kernel, tiles = _kernel("weights", call.q.dtype, D)
    _launch(kernel, (B * H, _cdiv(N, tiles.block_q)), weights, call.q, call.k,
            score_args(call))
