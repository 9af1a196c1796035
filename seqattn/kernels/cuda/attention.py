"""Fused attention on NVIDIA GPUs (numba.cuda): forward, backward, bias gradient and weights.

The CUDA twin of ``seqattn/kernels/cpu/attention.py``: the same launchers with the same semantics
(see :class:`seqattn.ops.attention_inputs.AttentionCall`). Shapes: q (B, H, N, D); k, v (B, Hkv, M, D).
Every score modification (band, masks, dense bias, ALiBi, and the structured biases: distances and
pair codes, with the per-pair formulas of ``kernels/structured_bias_math``) is made in one device
function, ``score_at``; the kernels receive them as one tuple, ``mods`` (see :func:`_score_args`).
The plan is FlashAttention-2's, on CUDA cores (Numba has no tensor-core intrinsics):

* forward: one block per (batch x head, query tile); key/value tiles stream through shared memory,
  an online softmax keeps each row's running max and sum, and only the log-sum-exp is stored.
* backward: delta = rowsum(dout * out) first; then a dK/dV pass parallel over key tiles (the query
  heads sharing a kv head are summed inside the block) and a dQ pass parallel over query tiles, both
  recomputing the probabilities from the lse. No atomics: the results are deterministic.
* structured biases' gradients, in the same backward kernels: the position gradients dx per query
  row (dQ kernel) and dy per key (dK/dV kernel) are summed inside their block and written per
  head, then added up over heads; the tables are summed with atomics (not bit-reproducible).
* bias gradient: one block per tile of the bias's own (broadcast) shape, looping over the dims it
  was broadcast along, so every dbias element has exactly one writer.

Tile products are register-blocked: the 128 threads of a block form a 16 x 8 grid over a
(query x key) tile; each thread owns ``rows_per_thread`` contiguous rows and every 8th column, so
neighbouring threads read neighbouring shared-memory words. Keys and values are stored transposed
with an odd row stride, which makes both q.k (along a key row) and p.v (down a key column) free of
bank conflicts. Tile sizes are picked per kernel and head dim to fit 48 KiB of static shared memory.

Kernels compile lazily, once per (dtype, head tile, tile shape), from :func:`_tile_kernels`, which
bakes dtype-typed constants into the code so that float32 kernels never promote to float64.
"""
from collections import namedtuple
import functools
import math

import numba
import numpy as np
from numba import cuda

from .. import structured_bias_math as sbm

THREADS = 128
THREAD_COLS = 8  # threads across a tile's columns (keys, or head dims of an accumulator)
THREAD_ROWS = THREADS // THREAD_COLS  # 16 threads across a tile's rows
SHARED_BYTES = 48 * 1024  # the static shared memory one block may declare
# (query rows, key columns) per tile, largest first; the first whose buffers fit is used.
TILE_SHAPES = ((64, 32), (32, 32), (32, 16), (16, 16))
LARGEST_HEAD_TILE = 256
MAX_GRID_Y = 65535  # CUDA's limit on the grid's second dim (the first allows 2**31 - 1)
NEG_INF = -math.inf  # score of a key a query may not see; lse of a row that sees no key

Tiles = namedtuple("Tiles", "head_tile block_q block_k")
StructuredGrads = namedtuple("StructuredGrads", "distance_table x y pair_table")
StructuredGrads.__doc__ = """Outputs for the structured biases' gradients, in kernel layout:
distance_table (H, P, C), x (B, 3, N), y (B, 3, M), pair_table (H, C); None where absent."""

_fractional = cuda.jit(device=True)(sbm.fractional)
_cartesian = cuda.jit(device=True)(sbm.cartesian)
_nearest_image = cuda.jit(device=True)(sbm.nearest_image)
_table_coordinate = cuda.jit(device=True)(sbm.table_coordinate)
_log_envelope = cuda.jit(device=True)(sbm.log_cosine_envelope)
_log_envelope_grad = cuda.jit(device=True)(sbm.log_cosine_envelope_grad)


def _head_tile(D):
    """Shared-memory width for head dim D: padded with zeros to a multiple of THREAD_COLS.

    Powers of two up to 32, then multiples of 32, to keep the number of compiled variants small.
    """
    if D <= 32:
        return max(THREAD_COLS, 1 << (D - 1).bit_length())
    return 32 * -(-D // 32)


def _buffer_sizes(kind, head_tile, block_q, block_k):
    """Elements of each shared-memory buffer a kernel kind uses, in layout order."""
    rows = block_q * (head_tile + 1)  # a query-side tile, [row][d]
    keys = head_tile * (block_k + 1)  # a key-side tile stored transposed, [d][key]
    scores = block_q * (block_k + 1)  # a score tile, [row][key]
    partials = block_q * THREAD_COLS  # each thread's partial row statistic, [row][thread col]
    return {
        "forward": {"q": rows, "kt": keys, "vt": keys, "p": scores, "partial": partials},
        "weights": {"q": rows, "kt": keys, "partial": partials},
        "dq": {"q": rows, "do": rows, "kt": keys, "vt": keys, "ds": scores},
        "dkdv": {"q": rows, "do": rows, "kt": keys, "vt": keys, "p": scores, "ds": scores},
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
    for block_q, block_k in TILE_SHAPES:
        tiles = Tiles(head_tile, block_q, block_k)
        if _layout(kind, tiles)[1] * itemsize <= SHARED_BYTES:
            return tiles
    return None


def _largest_head_dim(kind, itemsize):
    supported = [t for t in range(THREAD_COLS, LARGEST_HEAD_TILE + 1, THREAD_COLS)
                 if _head_tile(t) == t and _fitting_tiles(kind, itemsize, t) is not None]
    return max(supported)


@functools.lru_cache(maxsize=None)
def _plan(kind, dtype_name, D):
    """The tiles kernel ``kind`` uses for head dim D, or a ValueError if its buffers cannot fit."""
    itemsize = np.dtype(dtype_name).itemsize
    tiles = _fitting_tiles(kind, itemsize, _head_tile(D))
    if D > LARGEST_HEAD_TILE or tiles is None:
        float32_hint = " or use float32" if dtype_name == "float64" else ""
        raise ValueError(
            f"q has head dim D={D}, but the CUDA attention kernels ({kind}) hold their "
            f"{dtype_name} tiles in {SHARED_BYTES // 1024} KiB of shared memory and support "
            f"D <= {_largest_head_dim(kind, itemsize)}; use more, smaller heads{float32_hint}"
        )
    return tiles


def _kernels(kind, dtype, D):
    """(kernel family, tiles) for kernel ``kind`` at this dtype and head dim."""
    tiles = _plan(kind, np.dtype(dtype).name, D)
    return _tile_kernels(np.dtype(dtype).name, *tiles), tiles


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


# Positions in the tuple _score_args builds: the dense modifications, then the distance bias's
# fields, then the pair bias's. Plain names, since numba.cuda folds a global used as an index
# into a constant but not an expression such as DISTANCE_AT + 1.
DENSE_FIELDS = 11
(D_HAS, D_X, D_Y, D_TABLE, D_TYPES_Q, D_TYPES_K, D_N_TYPES, D_HAS_TYPES, D_CELL, D_INV_CELL,
 D_IMAGES, D_PERIODIC, D_INV_STEP, D_LAST, D_CUTOFF, D_SMOOTH, D_SMOOTH_A) = range(11, 28)
P_MODE, P_CODES, P_QUERY_POSITIONS, P_KEY_POSITIONS, P_TABLE, P_MAX_OFFSET = range(28, 34)


def _score_args(call):
    """The tuple ``mods`` that defines each score (see ``score_at``), scalars in the q dtype:
    bias, attn_mask, key_padding_mask, alibi_slopes, scale, left, right, has_bias, has_mask,
    has_kpm, has_alibi; then the distance bias (has, x, y, table, types_q, types_k, n_types,
    has_types, cell, inv_cell, images, periodic, inv_step, last, cutoff, smooth, smooth_a);
    then the pair bias (mode, codes, query_positions, key_positions, table, max_offset)."""
    f = np.dtype(call.q.dtype).type
    d, p = call.distance, call.pair
    C = int(d.table.shape[2])
    return (call.bias, call.attn_mask, call.key_padding_mask, call.alibi_slopes, f(call.scale),
            call.left, call.right, call.has_bias, call.has_mask, call.has_kpm, call.has_alibi,
            d.has, d.x, d.y, d.table, d.types_q, d.types_k, d.n_types, d.has_types, d.cell,
            d.inv_cell, d.images, d.periodic, f((C - 1) / d.r_max), f(C - 1), f(d.cutoff),
            d.smooth, f(math.pi / (2 * d.cutoff)),
            p.mode, p.codes, p.query_positions, p.key_positions, p.table, p.max_offset)


@functools.lru_cache(maxsize=None)
def _tile_kernels(dtype_name, head_tile, block_q, block_k):
    """Compile-on-first-launch kernels for one dtype and tiling, as a namespace of kernels."""
    dtype = np.dtype(dtype_name)
    ftype = dtype.type  # casts ints and literals so float32 code stays float32
    element = numba.from_dtype(dtype)
    zero, one, neg_inf = ftype(0), ftype(1), ftype(NEG_INF)
    half, two = ftype(0.5), ftype(2)

    DT = head_tile
    BQ, BK = block_q, block_k
    TR = BQ // THREAD_ROWS  # score rows per thread
    TC = BK // THREAD_COLS  # score columns per thread
    TD = DT // THREAD_COLS  # head dims per thread in an accumulator
    TK = BK // THREAD_ROWS  # key rows per thread in the dK/dV accumulators
    QS, KS, PS = DT + 1, BK + 1, BK + 1  # odd row strides: no shared-memory bank conflicts
    TX = THREAD_COLS
    # Offsets in the inner loops are unsigned: Numba then skips its negative-index fix-up, which
    # otherwise costs several 64-bit integer instructions per shared-memory load.
    index = np.uint64
    U_DT, U_TR, U_TC, U_TD, U_TK, U_TX = (index(n) for n in (DT, TR, TC, TD, TK, TX))
    U_QS, U_KS, U_PS = index(QS), index(KS), index(PS)
    tiles = Tiles(head_tile, block_q, block_k)
    F, F_SIZE = _layout("forward", tiles)
    W, W_SIZE = _layout("weights", tiles)
    G, G_SIZE = _layout("dq", tiles)
    KV, KV_SIZE = _layout("dkdv", tiles)
    DB, DB_SIZE = _layout("dbias", tiles)
    F_Q, F_KT, F_VT, F_P, F_PART = F["q"], F["kt"], F["vt"], F["p"], F["partial"]
    W_Q, W_KT, W_PART = W["q"], W["kt"], W["partial"]
    G_Q, G_DO, G_KT, G_VT, G_DS = G["q"], G["do"], G["kt"], G["vt"], G["ds"]
    KV_Q, KV_DO, KV_KT, KV_VT, KV_P, KV_DS = (index(KV[name])
                                               for name in ("q", "do", "kt", "vt", "p", "ds"))
    DB_Q, DB_DO, DB_KT, DB_VT, DB_DS = DB["q"], DB["do"], DB["kt"], DB["vt"], DB["ds"]

    device = cuda.jit(device=True)

    @device
    def floor(x):
        """floor(x) in the kernel's dtype (math.floor returns an int64)."""
        return ftype(math.floor(x))

    @device
    def displacement(b, i, j, mods):
        """(x_i - y_j by the minimum image, its length) for the distance bias."""
        x, y = mods[D_X], mods[D_Y]
        cell, inv_cell, images = mods[D_CELL], mods[D_INV_CELL], \
            mods[D_IMAGES]
        periodic = mods[D_PERIODIC]
        rx = x[b, 0, i] - y[b, 0, j]
        ry = x[b, 1, i] - y[b, 1, j]
        rz = x[b, 2, i] - y[b, 2, j]
        if periodic != sbm.NOT_PERIODIC:
            fx, fy, fz = _fractional(rx, ry, rz, inv_cell, b)
            rx, ry, rz = _cartesian(fx - floor(fx + half), fy - floor(fy + half),
                                    fz - floor(fz + half), cell, b)
            if periodic == sbm.TRICLINIC:
                rx, ry, rz = _nearest_image(rx, ry, rz, images, b)
        return rx, ry, rz, math.sqrt(rx * rx + ry * ry + rz * rz)

    @device
    def distance_entry(b, i, j, d, mods):
        """(pair p, bin c, weight w): f = (1 - w) table[h, p, c] + w table[h, p, c + 1]."""
        types_q, types_k = mods[D_TYPES_Q], mods[D_TYPES_K]
        p = 0
        if mods[D_HAS_TYPES]:
            p = types_q[b, i] * mods[D_N_TYPES] + types_k[b, j]
        u = _table_coordinate(d, mods[D_INV_STEP], mods[D_LAST])
        lower = min(floor(u), mods[D_LAST] - one)
        return p, int(lower), u - lower

    @device
    def distance_value(b, h, i, j, mods):
        """f_h(d_ij), or NEG_INF beyond the cutoff (and for NaN positions)."""
        rx, ry, rz, d = displacement(b, i, j, mods)
        if not d <= mods[D_CUTOFF]:
            return neg_inf
        table = mods[D_TABLE]
        p, c, w = distance_entry(b, i, j, d, mods)
        value = table[h, p, c] + w * (table[h, p, c + 1] - table[h, p, c])
        if mods[D_SMOOTH]:
            value += _log_envelope(d, mods[D_SMOOTH_A], two)
        return value

    @device
    def pair_code(b, i, j, mods):
        """The pair bias's code of (i, j); negative means hidden."""
        if mods[P_MODE] == sbm.CODE_ARRAY:
            codes = mods[P_CODES]
            return int(codes[min(b, codes.shape[0] - 1), i, j])
        query_positions, key_positions = mods[P_QUERY_POSITIONS], mods[P_KEY_POSITIONS]
        bp = min(b, query_positions.shape[0] - 1)
        max_offset = mods[P_MAX_OFFSET]
        offset = key_positions[bp, j] - query_positions[bp, i]
        return min(max(offset, -max_offset), max_offset) + max_offset

    @device
    def score_at(dot, b, h, i, j, n_q, n_k, mods):
        """Score of query i and key j from their dot product, or NEG_INF where j is hidden.

        The one place a score is modified. A dim of size 1 in bias or attn_mask is broadcast by
        clamping the index to 0.
        """
        bias, attn_mask, key_padding_mask, alibi_slopes, scale, left, right, has_bias, \
            has_mask, has_kpm, has_alibi = mods[:DENSE_FIELDS]
        aligned = i + n_k - n_q  # the query's position on the key axis (bottom-right alignment)
        if j < aligned - left or j > aligned + right:
            return neg_inf
        if has_kpm and key_padding_mask[b, j]:
            return neg_inf
        if has_mask and not attn_mask[min(b, attn_mask.shape[0] - 1),
                                      min(h, attn_mask.shape[1] - 1),
                                      min(i, attn_mask.shape[2] - 1),
                                      min(j, attn_mask.shape[3] - 1)]:
            return neg_inf
        score = scale * dot
        if has_bias:
            score += bias[min(b, bias.shape[0] - 1), min(h, bias.shape[1] - 1),
                          min(i, bias.shape[2] - 1), min(j, bias.shape[3] - 1)]
        if has_alibi:
            score -= alibi_slopes[h] * ftype(abs(aligned - j))
        if mods[D_HAS]:
            score += distance_value(b, h, i, j, mods)
        if mods[P_MODE] != sbm.NO_PAIR:
            code = pair_code(b, i, j, mods)
            if code < 0:
                return neg_inf
            pair_table = mods[P_TABLE]
            score += pair_table[h, min(code, pair_table.shape[1] - 1)]
        return score

    @device
    def distance_position_grad(g, b, h, i, j, rx, ry, rz, d, mods):
        """g df_h(d)/dx_i for the displacement r = x_i - y_j of length d (-that for y_j)."""
        table, inv_step = mods[D_TABLE], mods[D_INV_STEP]
        p, c, w = distance_entry(b, i, j, d, mods)
        slope = zero  # constant beyond r_max
        if d * inv_step < mods[D_LAST]:
            slope = (table[h, p, c + 1] - table[h, p, c]) * inv_step
        if mods[D_SMOOTH]:
            slope += _log_envelope_grad(d, mods[D_SMOOTH_A], two)
        # forward: d = |x_i - y_j|  =>  dd/dx_i = r / d (zero at d = 0)
        coef = zero
        if d > zero:
            coef = g * slope / d
        return coef * rx, coef * ry, coef * rz

    @device
    def structured_grads(g, b, h, i, j, mods, dtable, dpair):
        """The tables' gradients from g = dL/dscore of (i, j), added with atomics; returns
        g df_h(d_ij)/dx_i = -g df_h(d_ij)/dy_j as three components (0 without distances)."""
        gx = gy = gz = zero
        if mods[D_HAS]:
            rx, ry, rz, d = displacement(b, i, j, mods)
            p, c, w = distance_entry(b, i, j, d, mods)
            # forward: value = (1 - w) T[c] + w T[c + 1]
            cuda.atomic.add(dtable, (h, p, c), g - g * w)
            cuda.atomic.add(dtable, (h, p, c + 1), g * w)
            gx, gy, gz = distance_position_grad(g, b, h, i, j, rx, ry, rz, d, mods)
        if mods[P_MODE] != sbm.NO_PAIR:
            code = pair_code(b, i, j, mods)
            if code >= 0:
                cuda.atomic.add(dpair, (h, min(code, dpair.shape[1] - 1)), g)
        return gx, gy, gz

    @device
    def key_tiles(q0, n_q, n_k, left, right):
        """(first tile start, stop) of the key tiles any row of query tile q0 may see."""
        first = max(0, q0 + n_k - n_q - left)
        last = min(n_k - 1, min(q0 + BQ, n_q) - 1 + n_k - n_q + right)
        if last < first:
            return 0, 0
        return first - first % BK, last + 1

    @device
    def query_tiles(k0, n_q, n_k, left, right):
        """(first tile start, stop) of the query tiles whose rows may see a key of tile k0."""
        first = max(0, k0 - (n_k - n_q) - right)
        last = min(n_q - 1, min(k0 + BK, n_k) - 1 - (n_k - n_q) + left)
        if last < first:
            return 0, 0
        return first - first % BQ, last + 1

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
                    score = score_at(s[r, c], b, h, i, j, n_q, n_k, mods)
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
            rescale[r] = math.exp(row_max[r] - shift)
            row_max[r] = new_max
            total = row_sum[r] * rescale[r]
            for c in range(TC):
                p = math.exp(s[r, c] - shift)
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
    def accumulate_times_keys(acc, smem, tile_at, kt_at, ty, tx, n_cols):
        """acc[r, c] += sum_kk tile[ty*TR + r][kk] * keys[kk][tx + c*TX] over a tile's keys.

        ``keys`` is a transposed key-side buffer (values for p.v, keys for dS.k).
        """
        a = cuda.local.array(TR, element)
        a_at = index(tile_at + ty * TR * PS)
        w_at = index(kt_at + tx * KS)
        for kk in range(index(n_cols)):
            for r in range(U_TR):
                a[r] = smem[a_at + r * U_PS + kk]
            for c in range(U_TD):
                w = smem[w_at + c * U_TX * U_KS + kk]
                for r in range(TR):
                    acc[r, c] += a[r] * w

    @device
    def load_row_stats(row_lse, row_delta, lse, delta, b, h, row0, n_q):
        """This thread's rows of lse and delta; rows past the end count as empty."""
        for r in range(TR):
            row_lse[r] = neg_inf
            row_delta[r] = zero
            if row0 + r < n_q:
                row_lse[r] = lse[b, h, row0 + r]
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
                    prob = math.exp(p[r, c] - row_lse[r])
                p[r, c] = prob
                ds[r, c] = prob * (ds[r, c] - row_delta[r])

    @cuda.jit
    def attention_forward_kernel(out, lse, q, k, v, mods):
        """Grid (B*H, query tiles): out (B, H, N, D) and lse (B, H, N) of one query tile."""
        smem = cuda.shared.array(F_SIZE, element)
        s = cuda.local.array((TR, TC), element)
        acc = cuda.local.array((TR, TD), element)
        row_max = cuda.local.array(TR, element)
        row_sum = cuda.local.array(TR, element)
        rescale = cuda.local.array(TR, element)
        n_heads, n_q, D = q.shape[1], q.shape[2], q.shape[3]
        n_k = k.shape[2]
        b = cuda.blockIdx.x // n_heads
        h = cuda.blockIdx.x - b * n_heads
        kv_h = h // (n_heads // k.shape[1])
        # Last query tile first: under a causal mask it has the most keys to visit.
        q0 = (cuda.gridDim.y - 1 - cuda.blockIdx.y) * BQ
        ty = cuda.threadIdx.x // TX
        tx = cuda.threadIdx.x - ty * TX
        row0 = q0 + ty * TR
        for r in range(TR):
            row_max[r] = neg_inf
            row_sum[r] = zero
            for c in range(TD):
                acc[r, c] = zero
        load_rows(smem, F_Q, q, b, h, q0, n_q, D)
        first, stop = key_tiles(q0, n_q, n_k, mods[5], mods[6])
        for k0 in range(first, stop, BK):
            cuda.syncthreads()  # the previous tile's p and v are no longer read
            load_transposed(smem, F_KT, k, b, kv_h, k0, n_k, D)
            load_transposed(smem, F_VT, v, b, kv_h, k0, n_k, D)
            cuda.syncthreads()
            scores_tile(s, smem, F_Q, F_KT, b, h, q0, k0, n_q, n_k, ty, tx, mods)
            softmax_step(s, row_max, row_sum, rescale, smem, F_PART, ty, tx)
            for r in range(TR):
                for c in range(TD):
                    acc[r, c] *= rescale[r]
                for c in range(TC):
                    smem[F_P + (ty * TR + r) * PS + tx + c * TX] = s[r, c]
            cuda.syncthreads()
            if row0 < n_q and tx < D:
                accumulate_times_keys(acc, smem, F_P, F_VT, ty, tx, min(BK, n_k - k0))
        total_rows(row_sum, smem, F_PART, ty, tx)
        for r in range(TR):
            i = row0 + r
            if i < n_q:
                total = row_sum[r]
                inverse = one / total if total > zero else zero  # no visible key: out = 0
                for c in range(TD):
                    d = tx + c * TX
                    if d < D:
                        out[b, h, i, d] = acc[r, c] * inverse
                if tx == 0:
                    lse[b, h, i] = row_max[r] + math.log(total) if total > zero else neg_inf

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
        first, stop = key_tiles(q0, n_q, n_k, mods[5], mods[6])
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
                            p = math.exp(s[r, c] - row_max[r]) / row_sum[r]
                        weights[b, h, i, j] = p

    @cuda.jit
    def attention_dq_kernel(dq, dx, dtable, dpair, dout, lse, delta, q, k, v, mods):
        """Grid (B*H, query tiles): dq = scale * dS k for one query tile, over its key tiles.

        With structured biases also dx (H, B, 3, N), this head's part of the query positions'
        gradient, and, by atomics, dtable (H, P, C) and dpair (H, C).
        """
        smem = cuda.shared.array(G_SIZE, element)
        grad_x = cuda.local.array((TR, 3), element)
        p = cuda.local.array((TR, TC), element)
        ds = cuda.local.array((TR, TC), element)
        acc = cuda.local.array((TR, TD), element)
        row_lse = cuda.local.array(TR, element)
        row_delta = cuda.local.array(TR, element)
        n_heads, n_q, D = q.shape[1], q.shape[2], q.shape[3]
        n_k = k.shape[2]
        b = cuda.blockIdx.x // n_heads
        h = cuda.blockIdx.x - b * n_heads
        kv_h = h // (n_heads // k.shape[1])
        q0 = (cuda.gridDim.y - 1 - cuda.blockIdx.y) * BQ
        ty = cuda.threadIdx.x // TX
        tx = cuda.threadIdx.x - ty * TX
        row0 = q0 + ty * TR
        structured = mods[D_HAS] or mods[P_MODE] != sbm.NO_PAIR
        for r in range(TR):
            for c in range(TD):
                acc[r, c] = zero
            for c in range(3):
                grad_x[r, c] = zero
        load_rows(smem, G_Q, q, b, h, q0, n_q, D)
        load_rows(smem, G_DO, dout, b, h, q0, n_q, D)
        load_row_stats(row_lse, row_delta, lse, delta, b, h, row0, n_q)
        first, stop = key_tiles(q0, n_q, n_k, mods[5], mods[6])
        for k0 in range(first, stop, BK):
            cuda.syncthreads()
            load_transposed(smem, G_KT, k, b, kv_h, k0, n_k, D)
            load_transposed(smem, G_VT, v, b, kv_h, k0, n_k, D)
            cuda.syncthreads()
            score_gradient_tile(ds, p, smem, G_Q, G_DO, G_KT, G_VT, row_lse, row_delta, b, h,
                                q0, k0, n_q, n_k, ty, tx, mods)
            for r in range(TR):
                for c in range(TC):
                    smem[G_DS + (ty * TR + r) * PS + tx + c * TX] = ds[r, c]
                    if structured and ds[r, c] != zero:  # hidden pairs have dS = 0
                        gx, gy, gz = structured_grads(ds[r, c], b, h, row0 + r, k0 + tx + c * TX,
                                                      mods, dtable, dpair)
                        grad_x[r, 0] += gx
                        grad_x[r, 1] += gy
                        grad_x[r, 2] += gz
            cuda.syncthreads()
            if row0 < n_q and tx < D:
                accumulate_times_keys(acc, smem, G_DS, G_KT, ty, tx, min(BK, n_k - k0))
        for r in range(TR):
            if row0 + r < n_q:
                for c in range(TD):
                    d = tx + c * TX
                    if d < D:
                        dq[b, h, row0 + r, d] = mods[4] * acc[r, c]
        if mods[D_HAS]:
            # Each row's TX threads hold parts of its dx: add them up in a fixed order.
            for axis in range(3):
                cuda.syncthreads()
                for r in range(TR):
                    smem[G_DS + (ty * TR + r) * TX + tx] = grad_x[r, axis]
                cuda.syncthreads()
                if tx == 0:
                    for r in range(TR):
                        if row0 + r < n_q:
                            total = zero
                            for t in range(TX):
                                total += smem[G_DS + (ty * TR + r) * TX + t]
                            dx[h, b, axis, row0 + r] = total

    @cuda.jit
    def attention_dkdv_kernel(dk, dv, dy, dout, lse, delta, q, k, v, mods):
        """Grid (B*Hkv, key tiles): dk = scale * dS^T q and dv = P^T dout for one key tile,
        summed over the query heads that share the kv head and over their query tiles; with a
        distance bias also dy (Hkv, B, 3, M), this kv head's part of the key positions' gradient.
        """
        smem = cuda.shared.array(KV_SIZE, element)
        grad_y = cuda.local.array((TC, 3), element)
        p = cuda.local.array((TR, TC), element)
        ds = cuda.local.array((TR, TC), element)
        acc_dk = cuda.local.array((TK, TD), element)
        acc_dv = cuda.local.array((TK, TD), element)
        row_lse = cuda.local.array(TR, element)
        row_delta = cuda.local.array(TR, element)
        p_col = cuda.local.array(TK, element)
        ds_col = cuda.local.array(TK, element)
        n_heads, n_q, D = q.shape[1], q.shape[2], q.shape[3]
        n_kv_heads, n_k = k.shape[1], k.shape[2]
        group = n_heads // n_kv_heads
        b = cuda.blockIdx.x // n_kv_heads
        kv_h = cuda.blockIdx.x - b * n_kv_heads
        k0 = cuda.blockIdx.y * BK
        ty = cuda.threadIdx.x // TX
        tx = cuda.threadIdx.x - ty * TX
        key0 = k0 + ty * TK  # this thread's first key row in the accumulators
        has_distance = mods[D_HAS]
        for r in range(TK):
            for c in range(TD):
                acc_dk[r, c] = zero
                acc_dv[r, c] = zero
        for c in range(TC):
            for axis in range(3):
                grad_y[c, axis] = zero
        load_transposed(smem, KV_KT, k, b, kv_h, k0, n_k, D)
        load_transposed(smem, KV_VT, v, b, kv_h, k0, n_k, D)
        first, stop = query_tiles(k0, n_q, n_k, mods[5], mods[6])
        for h in range(kv_h * group, (kv_h + 1) * group):
            for q0 in range(first, stop, BQ):
                cuda.syncthreads()  # the previous query tile is no longer read
                load_rows(smem, KV_Q, q, b, h, q0, n_q, D)
                load_rows(smem, KV_DO, dout, b, h, q0, n_q, D)
                load_row_stats(row_lse, row_delta, lse, delta, b, h, q0 + ty * TR, n_q)
                cuda.syncthreads()
                score_gradient_tile(ds, p, smem, KV_Q, KV_DO, KV_KT, KV_VT, row_lse, row_delta,
                                    b, h, q0, k0, n_q, n_k, ty, tx, mods)
                for r in range(TR):
                    for c in range(TC):
                        at = (ty * TR + r) * PS + tx + c * TX
                        smem[KV_P + at] = p[r, c]
                        smem[KV_DS + at] = ds[r, c]
                        if has_distance and ds[r, c] != zero:
                            i, j = q0 + ty * TR + r, k0 + tx + c * TX
                            rx, ry, rz, d = displacement(b, i, j, mods)
                            gx, gy, gz = distance_position_grad(ds[r, c], b, h, i, j, rx, ry,
                                                                rz, d, mods)
                            grad_y[c, 0] -= gx
                            grad_y[c, 1] -= gy
                            grad_y[c, 2] -= gz
                cuda.syncthreads()
                if key0 < n_k and tx < D:
                    key_at = index(ty * TK)
                    dim_at = index(tx)
                    for ii in range(index(min(BQ, n_q - q0))):
                        for r in range(U_TK):
                            p_col[r] = smem[KV_P + ii * U_PS + key_at + r]
                            ds_col[r] = smem[KV_DS + ii * U_PS + key_at + r]
                        for c in range(U_TD):
                            dout_value = smem[KV_DO + ii * U_QS + dim_at + c * U_TX]
                            q_value = smem[KV_Q + ii * U_QS + dim_at + c * U_TX]
                            for r in range(TK):
                                acc_dv[r, c] += p_col[r] * dout_value
                                acc_dk[r, c] += ds_col[r] * q_value
        for r in range(TK):
            if key0 + r < n_k:
                for c in range(TD):
                    d = tx + c * TX
                    if d < D:
                        dk[b, kv_h, key0 + r, d] = mods[4] * acc_dk[r, c]
                        dv[b, kv_h, key0 + r, d] = acc_dv[r, c]
        if has_distance:
            # Each key's THREAD_ROWS threads hold parts of its dy: add them up in a fixed order.
            for axis in range(3):
                cuda.syncthreads()
                for c in range(TC):
                    smem[KV_DS + ty * BK + tx + c * TX] = grad_y[c, axis]
                cuda.syncthreads()
                for jj in range(cuda.threadIdx.x, BK, THREADS):
                    if k0 + jj < n_k:
                        total = zero
                        for t in range(THREAD_ROWS):
                            total += smem[KV_DS + t * BK + jj]
                        dy[kv_h, b, axis, k0 + jj] = total

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
                    visible_first, visible_stop = key_tiles(q0, n_q, n_k, mods[5], mods[6])
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

    return _KernelFamily(attention_forward_kernel, attention_weights_kernel,
                         attention_dq_kernel, attention_dkdv_kernel, attention_bias_grad_kernel)


_KernelFamily = namedtuple("_KernelFamily", "forward weights dq dkdv bias_grad")


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
    kernels, tiles = _kernels("forward", call.q.dtype, D)
    _launch(kernels.forward, (B * H, _cdiv(N, tiles.block_q)), out, lse, call.q, call.k, call.v,
            _score_args(call))


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
    # Per-head parts of the position gradients (each written by one block) and the tables
    # (atomics: zeroed first); 1-element placeholders where unused.
    dx = cuda.device_array((H, B, 3, N) if has_distance else (1, 1, 3, 1), dtype)
    dy = cuda.device_array((Hkv, B, 3, M) if has_distance else (1, 1, 3, 1), dtype)
    dtable = _zeros((H, P, C) if has_distance else (1, 1, 2), dtype)
    dpair = _zeros(tuple(call.pair.table.shape) if call.pair.mode else (1, 1), dtype)
    mods = _score_args(call)
    kernels, tiles = _kernels("dq", dtype, D)
    _launch(kernels.dq, (B * H, _cdiv(N, tiles.block_q)), dq, dx, dtable, dpair, dout, lse,
            delta, call.q, call.k, call.v, mods)
    kernels, tiles = _kernels("dkdv", dtype, D)
    _launch(kernels.dkdv, (B * Hkv, _cdiv(M, tiles.block_k)), dk, dv, dy, dout, lse, delta,
            call.q, call.k, call.v, mods)
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
    kernels, tiles = _kernels("dbias", call.q.dtype, D)
    bias_b, bias_h, bias_n, bias_m = (int(s) for s in dbias.shape)
    grid = (_cdiv(bias_n, tiles.block_q) * _cdiv(bias_m, tiles.block_k), bias_b * bias_h)
    _launch(kernels.bias_grad, grid, dbias, dout, lse, delta, call.q, call.k, call.v,
            _score_args(call))


def attention_weights(weights, call):
    """weights (B, H, N, M): the attention probabilities."""
    B, H, Hkv, N, M, D = _sizes(call)
    kernels, tiles = _kernels("weights", call.q.dtype, D)
    _launch(kernels.weights, (B * H, _cdiv(N, tiles.block_q)), weights, call.q, call.k,
            _score_args(call))
