"""Fused attention on the CPU: tiled forward with online softmax, backward from the saved lse.

Legend: q (B, H, N, D); k, v (B, Hkv, M, D); query head h reads key/value head h // (H // Hkv);
off = M - N aligns the last query with the last key. Arguments are an ``AttentionCall`` already
checked by ``seqattn.ops.attention_inputs`` (see its docstring for the canonical form).

Layout, as torch's CPU flash kernel and FlashAttention-2 do it:
* forward: parallel over (batch, head, query block). For each key block, strip by strip of query
  rows, the scores S = (scale q) k^T come from ``register_gemm`` (with their row maxima, taken
  while the product has them in registers), the score modifications are applied to them, and
  the softmax is folded in online (running max, running sum, accumulator rescaled by
  exp(m_old - m_new)). Only the log-sum-exp per row is stored: memory is O(N + M) per batch and
  head. A strip computes only the keys its rows may see (causal: none past its diagonal).
* the tile products (register_gemm.py) read k^T and v^T as rows: the launchers transpose k and v
  once per call into contiguous panels of 32 keys, :func:`_key_panels` (as much memory as k and
  v themselves).
* on CPUs with AMX tiles (Intel Sapphire Rapids and later) the forward's two products run on
  them instead, at float32 accuracy (bf16x3_gemm.py), in strips of 32 query rows:
  :func:`_forward_query_block_on_tiles`, with the same score modifications and online softmax;
  so do the backward's five products, on whole query blocks (:func:`_backward_key_chunk`).
  Each worker splits the operands its tasks read into their bf16 terms (1.5 times their
  memory), into its own scratch buffers kept between calls (workspace.py), where they stay in
  its core's caches: the forward's a query block's rows and a kv head's k and v, the
  backward's a key block's k and v; the backward's launcher splits q and dout once per call,
  as rows and (for dK and dV) transposed.
* the score tiles live in buffers whose rows are padded by ROW_PAD floats (layout "A" views),
  so that rows 2 KiB apart do not share L1 sets; the row primitives check the unit stride.
* backward: parallel over (batch, kv head, chunk of key blocks). Each key block keeps its dK, dV
  in registers of the task; scores are recomputed from the lse; dQ is added into a partial buffer
  owned by the chunk, so no two threads write the same memory (deterministic, no atomics). A
  tile computes only the keys its query block may see. P = exp(S - lse) and dS = P (dP - delta)
  are formed in the epilogues of the products that make S and dP (``register_gemm_exp``,
  ``register_gemm_softmax_grad``) where the tile starts on a key panel, P only where no score
  modification touches the tile; elsewhere in passes over the tile.
* bias gradient: a separate pass parallel over the bias's own tiles, so broadcast dims are summed
  by the one task that owns each output element.

Score modifications all live in :func:`_modify_scores`: masks, band, ALiBi, the dense bias and
the structured biases of ``attention_bias.py`` (distances, pair codes), whose gradients the
backward gathers from each dS tile in :func:`_structured_grads`.
"""
from collections import namedtuple

import numpy as np
from numba import prange, types
from numba.extending import overload

from .gemm.amx_tiles import (AMX_BF16, TILE_ELEMENTS, TILE_ROWS, tile_config, tile_configuration,
                        tile_release)
from .attention_bias import (LANES, DistanceArgs, PairArgs, add_distance_bias, add_pair_bias,
                             distance_args, distance_bias_grads, has_distance, has_pair,
                             pair_args, pair_bias_grads)
from .gemm.bf16x3_gemm import (TERMS, TILE_DEPTH, aligned_empty, exp_split_probabilities,
                          keys_as_columns_serial, pairs_as_depth, product_32x32,
                          rows_as_depth_serial, split_columns, split_probabilities, split_rows,
                          split_rows_into)
from .gemm.blas_library import single_threaded_blas
from .float32_math import FASTMATH
from .host_caches import L2_BYTES
from .called_by_name import called_natively
from .jit_options import CACHED, njit
from .llvm_vectors import AVX512, LANES as VECTOR_LANES
from .gemm.register_gemm import (IN_REGISTERS, WIDE, register_gemm, register_gemm_exp,
                                 register_gemm_lane_max, register_gemm_softmax_grad,
                                 register_gemm_untransposed, transpose)
from .softmax_rows import exp_scalar, exp_shifted, row_max, softmax_grad_row
from .threads import sized_kernel
from .workspace import scratch
from ..structured_bias_math import NO_PAIR

NEG_INF = -np.inf
# Tile sizes, measured with benchmarks/attention.py on Zen 4 and on the Intel Xeon: a 256 x 512
# float32 score tile (512 KiB) stays in L2, and smaller tiles were slower; with register_gemm,
# 128-512 rows x 256-512 keys ran alike on the Intel Xeon, and 1024 keys slower. On Zen 4
# (32 KiB L1d, 1 MiB L2, where the backward's two 256 x 512 tiles take all of L2) the
# backward's smaller tiles ran alike too: no cache size calls for another tile on either kind,
# so the sizes are the same on both.
# float64 products still call BLAS, hence single_threaded_blas around the launches.
BLOCK_Q = 256
BLOCK_K = 512
# Query rows of a forward task where a core's L2 holds 2 MiB or more (Intel's server cores).
# Each key block is read from L3 once per task and then by every strip of its rows from L2, so
# taller tasks read the keys from L3 less often; its accumulator (1024 x D) and a k and v block
# (2 x 512 x D) still fit that L2 together at D 128. B 1 H 8, 2 threads, wall, Intel Xeon
# (Sapphire Rapids class), medians of 5-11 alternating calls, 1024 rows against 256: N 16384
# 1.02-1.12x (D 64), 1.07-1.08x (D 128); N 1024 and 4096 0.99-1.06x, causal or not. Zen 4
# and 5 (1 MiB of L2, where the accumulator and the blocks would fill it) keep BLOCK_Q.
LARGE_L2 = 2 << 20
TALL_BLOCK_Q = 1024


def forward_block_q(l2_bytes):
    """Query rows of a forward task on a CPU with ``l2_bytes`` of L2 per core."""
    return TALL_BLOCK_Q if l2_bytes >= LARGE_L2 else BLOCK_Q


FORWARD_BLOCK_Q = forward_block_q(L2_BYTES)
# The forward walks a tile in strips of query rows: scores, softmax and P v of a strip follow
# each other while its 24 x 512 scores (48 KiB) are in L1 (3-8 % faster than whole tiles,
# 1 thread, Intel Xeon); the k and v blocks stay in L2 across the strips. Strips of 12 and 36
# rows, and 256-key blocks, were within the noise of 24 at D 64 and D 128 (later round), and
# slower at D 32 (1.46-1.57 and 1.55 ns per score against 1.36-1.40, padded tiles). On Zen 4,
# whose 32 KiB L1d the 24-row strip overflows, strips of 12 rows (25 KiB) or 24 rows of 256
# keys (26 KiB) were no faster: 0.98-1.01x at N 4096 D 64, 0.94-0.96x at B 8 H 8 N 1024 D 32
# (same method as above); the strip's scores are written once and read twice from L2 there.
STRIP_ROWS = 24
# The forward's products run on AMX tiles where the CPU has them (bf16x3_gemm.py), in strips of
# two tile rows, where they were measured faster than the register kernel (benchmarks/attention.py
# on the Intel Xeon, Sapphire Rapids class, tiles against registers in alternating calls):
# from 512 keys at a head dim of 32 or more, and at any length from a head dim of 128. A
# strip's products are short at small D and few keys, and the tiles' fixed costs per strip
# (stores, the split of P, a row-max pass) weigh more there.
FORWARD_ON_TILES = AMX_BF16
TILE_STRIP = 2 * TILE_ROWS
TILES_MIN_HEAD_DIM = 32
TILES_MIN_KEYS = 512
TILES_ANY_KEYS_HEAD_DIM = 128
# The backward's five products run on the tiles too, on whole query blocks: S, dP, dQ = dS k,
# and dK and dV over the query rows (:func:`_dk_dv_on_tiles`). Measured as above, with dK and dV
# still in registers, B 1 H 8 D 128: N 4096 1.11-1.18x, N 16384 1.20-1.21x, N 1024 1.18x, N 512
# 1.13-1.15x (causal 1.08x), N 256 0.87-0.91x; D 64 at N 1024 and 4096 1.01x. With dK and dV on
# the tiles (alternating calls in one process): D 128 N 512 1.17x, N 256 0.99x; D 64 N 4096
# 1.11x (causal 1.06x), N 2048 1.09x, N 1024 1.03x (causal 0.91x), N 512 0.92x; D 32 (B 8 H 8
# N 1024) 0.87x (causal 0.67x). Hence, as (head dim, fewest keys): the tiles from 512 keys at
# D 128 and from 2048 at D 64.
BACKWARD_ON_TILES = AMX_BF16
BACKWARD_TILES_FROM = ((128, 512), (64, 2048))
# Floats of padding after each row of the score tile buffers. Rows of 512 floats (2 KiB) all
# fall into the same two of L1's 64 sets, so the products that read a tile 12 rows at a time
# (P v, dS k, P^T dO, dS^T q) evict their own lines; one more cache line per row spreads them
# over 12 sets: a 24 x 512 @ 512 x 32 product 136 -> 167 GFLOP/s, 256 x 512 @ 512 x 64
# 89 -> 133 (1 thread, Intel Xeon, best of 21 alternating rounds, loaded machine). Zen 4's
# L1 (32 KiB, 8 ways, 64 sets) maps the rows the same way.
ROW_PAD = 16
# Query rows of a backward tile that a band edge (a causal diagonal, a window's side) crosses:
# its scores past the edge are computed and then masked, a triangle that halves with the rows.
# B 1 H 8 N 1024, causal, 1 thread, CPU time, medians of 7 (Zen 5): the whole backward at 64-row
# query blocks ran 1.12-1.14x as fast as at 256 (1.02x at N 4096), while without a band 64 rows
# were 0.98x; so only the tiles an edge crosses take the smaller block.
EDGE_BLOCK_Q = 64
# Smallest query block worth a task: below it the per-tile overheads dominate.
MIN_BLOCK_Q = 32
# Tasks per thread wanted before query blocks are made smaller, so no thread idles.
TASKS_PER_THREAD = 4
# Multiply-adds of the score products (B H N M D) that pay for one more thread
# (benchmarks/small_launches.py): a smaller launch runs serial on the calling
# thread, so it does not wait for a thread that another process has pushed off its core.
GRAIN = 2 ** 20
# Elements of dout per thread of the backward's row deltas (an elementwise pass over memory).
ROW_GRAIN = 2 ** 16


def _score_work(call):
    """Multiply-adds of q k^T over all batches and heads: the work unit of the grains."""
    B, H, N, D = call.q.shape
    return B * H * N * call.k.shape[2] * D


@njit(cache=True)
def _ceil_div(a, b):
    return (a + b - 1) // b


@njit(cache=True)
def _visible_keys(i0, i1, off, left, right, M):
    """[lo, hi): the keys any query in [i0, i1) may see through the band."""
    return max(0, i0 + off - left), min(M, i1 - 1 + off + right + 1)


@njit(cache=True)
def _visible_queries(j0, j1, off, left, right, N):
    """[lo, hi): the queries that may see any key in [j0, j1) through the band."""
    return max(0, j0 - off - right), min(N, j1 - 1 - off + left + 1)


# The score modifications travel as one flat tuple (a prange loop cannot take a tuple nested in
# it that holds arrays): the dense ones first, then the fields of DistanceArgs and of PairArgs.
STRUCTURED_AT = 10
PAIR_AT = STRUCTURED_AT + len(DistanceArgs._fields)


# inlined: compiled apart, typing the whole flat tuple cost a first run as much as a kernel
@njit(inline="always")
def _structured_biases(mods):
    """(DistanceArgs, PairArgs) from their fields in the flat mods tuple."""
    return DistanceArgs(*mods[STRUCTURED_AT:PAIR_AT]), PairArgs(*mods[PAIR_AT:])


@njit(cache=True)
def _inside_band(rows, cols, i0, j0, off, left, right):
    """Whether every score of the tile (rows i0.., cols j0..) lies inside the band."""
    return j0 >= i0 + rows - 1 + off - left and j0 + cols - 1 <= i0 + off + right


@njit(cache=True)
def _band_only(mods):
    """Whether the band is the only score modification (none of the biases and masks)."""
    has_bias, has_mask, has_kpm, has_alibi = mods[6:STRUCTURED_AT]
    distance, pair = _structured_biases(mods)
    return not (has_bias or has_mask or has_kpm or has_alibi or has_distance(distance)
                or has_pair(pair))


@njit(cache=True)
def _plain_tile(rows, cols, i0, j0, off, mods):
    """Whether :func:`_modify_scores` leaves this tile as it is (the plain product)."""
    return _inside_band(rows, cols, i0, j0, off, mods[4], mods[5]) and _band_only(mods)


@njit(cache=True, fastmath=FASTMATH)
def _modify_scores(s, b, h, i0, j0, off, mods):
    """Add biases to the score tile s (rows i0.., cols j0..) and set invisible scores to -inf;
    returns whether any score may have changed (False: s is the plain product)."""
    bias, attn_mask, key_padding_mask, alibi_slopes, left, right, \
        has_bias, has_mask, has_kpm, has_alibi = mods[:STRUCTURED_AT]
    distance, pair = _structured_biases(mods)
    rows, cols = s.shape
    add_distance_bias(s, b, h, i0, j0, distance)  # each compiles to nothing where absent
    add_pair_bias(s, b, h, i0, j0, pair)
    inside_band = _inside_band(rows, cols, i0, j0, off, left, right)
    if inside_band and not (has_bias or has_mask or has_kpm or has_alibi):
        return has_distance(distance) or has_pair(pair)
    for r in range(rows):
        i = i0 + r
        row = s[r]
        if has_bias:
            # A dim of size 1 broadcasts: index 0 there.
            brow = bias[b if bias.shape[0] > 1 else 0, h if bias.shape[1] > 1 else 0,
                        i if bias.shape[2] > 1 else 0]
            if brow.shape[0] > 1:
                for c in range(cols):
                    row[c] += brow[j0 + c]
            else:
                for c in range(cols):
                    row[c] += brow[0]
        if has_alibi:
            slope = alibi_slopes[h]
            for c in range(cols):
                row[c] -= slope * abs(i + off - j0 - c)
        if not inside_band:
            first = i + off - left - j0  # visible columns: first <= c <= last
            last = i + off + right - j0
            for c in range(0, min(max(first, 0), cols)):
                row[c] = NEG_INF
            for c in range(max(last + 1, 0), cols):
                row[c] = NEG_INF
        if has_mask:
            mrow = attn_mask[b if attn_mask.shape[0] > 1 else 0,
                             h if attn_mask.shape[1] > 1 else 0,
                             i if attn_mask.shape[2] > 1 else 0]
            for c in range(cols):
                if not mrow[j0 + c if mrow.shape[0] > 1 else 0]:
                    row[c] = NEG_INF
        if has_kpm:
            for c in range(cols):
                if key_padding_mask[b, j0 + c]:
                    row[c] = NEG_INF
    return True


@sized_kernel(GRAIN, work=lambda panels, x: x.size)
def _transpose_key_panels(panels, x):
    """panels[b, h, kb, p, :, c] = x[b, h, kb * block_k + p * width + c]: each key block cut
    into panels of ``width`` keys, each transposed to (D, width) (see :func:`_key_panels`)."""
    B, Hkv, n_blocks, n_panels, D, width = panels.shape
    M = x.shape[2]
    for t in prange(B * Hkv * n_blocks):
        b, hk, kb = t // (Hkv * n_blocks), t // n_blocks % Hkv, t % n_blocks
        for p in range(n_panels):
            j0 = (kb * n_panels + p) * width
            cols = min(width, M - j0)
            if cols > 0:
                transpose(panels[b, hk, kb, p, :, :cols], x[b, hk, j0:j0 + cols])


def _panel_width(dtype, block_k):
    """Keys per panel for products over whole tiles (the backward's, the weights'): the register
    kernel's block width (WIDE) for float32 where it runs (``register_gemm.IN_REGISTERS``),
    else the whole key block (BLAS takes one product per tile)."""
    if dtype == np.float32 and IN_REGISTERS and block_k % WIDE == 0:
        return WIDE
    return block_k


def _key_panels(name, x, block_k, width=None):
    """(B, Hkv, ceil(M / block_k), block_k // width, D, width): x's key blocks in panels of
    ``width`` keys (default :func:`_panel_width`), each transposed, so that the tile products
    read k^T (and v^T) as rows, register_gemm's layout. As much memory as x itself, in the
    scratch buffer ``name`` (workspace.py: fresh memory would cost its page faults on every call,
    20-45 ms a call for k's and v's panels at B 1 H 8 N 4096 D 128).

    Panels of 32 keys (the register kernel's block width), each contiguous: read from (D, 512)
    block rows, a column block's 64 rows lie 2 KiB apart, in a few L1 sets. The backward's
    256 x 512 x 64 score products ran at 150 GFLOP/s against 140, and the forward 2-9 % faster
    at N 1024-4096, D 64 and 128, where a strip's panels go to one product call (a call per
    panel lost: 143 against 161 GFLOP/s on 24-row strips). 1 thread, Intel Xeon, best of
    alternating rounds."""
    B, Hkv, M, D = x.shape
    width = width or _panel_width(x.dtype, block_k)
    panels = scratch(name, (B, Hkv, -(-M // block_k), block_k // width, D, width), x.dtype)
    _transpose_key_panels(panels, x)
    return panels


def _no_key_panels(x, block_k):
    """Key panels (:func:`_key_panels`) with their key block's geometry and no data, for the
    backward on tiles, which reads k and v from its own operands."""
    return np.empty((0, 0, 0, block_k // _panel_width(x.dtype, block_k), 0,
                     _panel_width(x.dtype, block_k)), x.dtype)


@njit(cache=True)
def _block_keys(panels):
    """Keys per key block of a :func:`_key_panels` array."""
    return panels.shape[3] * panels.shape[5]


@njit(cache=True, fastmath=FASTMATH)
def _panel_product(c, a, panels, b, hk, j0, alpha, lane_max):
    """c (rows, cols) = alpha * a @ x[b, hk, j0:j0 + cols]^T, x's keys held in panels
    (:func:`_key_panels`): one product per panel, all rows of a against one panel while it is
    in L1. lane_max: None, or (rows, VECTOR_LANES) that grows to c's row maxima
    (``register_gemm_lane_max``)."""
    width = panels.shape[5]
    block_k = _block_keys(panels)
    cols = c.shape[1]
    j = j0
    while j < j0 + cols:
        kb, p, first = j // block_k, j % block_k // width, j % width
        n = min(width - first, j0 + cols - j)
        piece, panel = c[:, j - j0:j - j0 + n], panels[b, hk, kb, p, :, first:first + n]
        if lane_max is None:
            register_gemm_untransposed(piece, a, panel, alpha, False)
        else:
            register_gemm_lane_max(piece, a, panel, alpha, lane_max)
        j += n


@njit(cache=True, fastmath=FASTMATH)
def _score_tile(s, q_rows, kt, scale, b, h, hk, i0, j0, off, mods):
    """s (rows, cols) = scale * q_rows @ k[j0:j0 + cols]^T with every score modification
    applied; kt holds k's key panels (:func:`_key_panels`)."""
    _panel_product(s, q_rows, kt, b, hk, j0, scale, None)
    _modify_scores(s, b, h, i0, j0, off, mods)


@njit(cache=True, fastmath=FASTMATH)
def _probabilities_from_lse(s, lse_rows):
    """In place: s[r] = exp(s[r] - lse[r]), and 0 for rows that see no key (lse = -inf)."""
    for r in range(s.shape[0]):
        if lse_rows[r] == NEG_INF:
            s[r, :] = 0
        else:
            exp_shifted(s[r], lse_rows[r])


@njit(cache=True)
def _lse_shift(shift, lse_rows):
    """shift = lse, with +inf for rows that see no key (lse = -inf): exp(s - shift) is then
    0 for them, as :func:`_probabilities_from_lse` makes it."""
    for r in range(lse_rows.shape[0]):
        shift[r] = -lse_rows[r] if lse_rows[r] == NEG_INF else lse_rows[r]


# Whether the forward's float32 score product also keeps each row's maximum
# (register_gemm_lane_max): on AVX-512. On AVX2 (Zen 3) that epilogue cost more than the plain
# product and a max pass over the strip's rows together (BENCHMARKS.md, "CPUs with AVX2 but
# not AVX-512"), so there the fold takes the maxima from the scores.
MAXIMA_FROM_PRODUCT = AVX512


def _strip_scores(s, q_strip, kt, b, hk, j0, scale, lane_max):
    """s (rows, cols) = scale * q_strip @ k[j0:j0 + cols]^T, kt holding k's key panels
    (:func:`_key_panels`), a strip's panels in one product call where they start on a panel;
    where the product keeps the row maxima (MAXIMA_FROM_PRODUCT, and other dtypes than
    float32), lane_max (rows, VECTOR_LANES) is set to them (``register_gemm_lane_max``).
    Returns whether the maxima must be taken from s instead. Callable from @njit code only."""
    raise NotImplementedError("_strip_scores is only callable from @njit code")


@overload(_strip_scores, jit_options={**CACHED, "fastmath": FASTMATH})
def _strip_scores_impl(s, q_strip, kt, b, hk, j0, scale, lane_max):
    if s.dtype == types.float32 and not MAXIMA_FROM_PRODUCT:
        def plain_product(s, q_strip, kt, b, hk, j0, scale, lane_max):
            block_k = _block_keys(kt)
            if kt.shape[5] == WIDE and j0 % WIDE == 0:
                register_gemm(s, q_strip, kt[b, hk, j0 // block_k, j0 % block_k // WIDE:],
                              scale, False)
            else:
                _panel_product(s, q_strip, kt, b, hk, j0, scale, None)
            return True
        return plain_product

    def with_maxima(s, q_strip, kt, b, hk, j0, scale, lane_max):
        block_k = _block_keys(kt)
        lane_max[:] = NEG_INF
        if kt.shape[5] == WIDE and j0 % WIDE == 0:
            register_gemm_lane_max(s, q_strip, kt[b, hk, j0 // block_k, j0 % block_k // WIDE:],
                                   scale, lane_max)
        else:
            _panel_product(s, q_strip, kt, b, hk, j0, scale, lane_max)
        return False
    return with_maxima


@njit(cache=True, fastmath=FASTMATH)
def _forward_query_block(out, lse, q, kt, v, scale, b, h, i0, i1, strip_rows, mods):
    """Online-softmax attention of queries [i0, i1) of (b, h) over all visible keys; kt
    holds k's key blocks transposed, whose size sets the tile's columns."""
    N, D = q.shape[2], q.shape[3]
    M = v.shape[2]
    off = M - N
    hk = h // (q.shape[1] // v.shape[1])
    block_k = _block_keys(kt)
    rows = i1 - i0
    dtype = q.dtype
    left, right = mods[4], mods[5]
    q_rows = q[b, h, i0:i1]
    acc = np.zeros((rows, D), dtype)
    running_max = np.full(rows, NEG_INF, dtype)
    running_sum = np.zeros(rows, dtype)
    s_buf = np.empty((strip_rows, block_k + ROW_PAD), dtype)
    lane_max = np.empty((strip_rows, VECTOR_LANES), dtype)
    j_lo, j_hi = _visible_keys(i0, i1, off, left, right, M)
    band_only = _band_only(mods)
    for kb in range(j_lo // block_k, _ceil_div(j_hi, block_k)):
        for r0 in range(0, rows, strip_rows):
            r1 = min(r0 + strip_rows, rows)
            # only the keys of this block that the strip's rows may see: near a causal
            # diagonal that is a fraction of the block, or none
            strip_lo, strip_hi = _visible_keys(i0 + r0, i0 + r1, off, left, right, M)
            j0, j1 = max(kb * block_k, strip_lo), min((kb + 1) * block_k, strip_hi)
            if j0 >= j1:
                continue
            s = s_buf[:r1 - r0, :j1 - j0]
            rescan = _strip_scores(s, q_rows[r0:r1], kt, b, hk, j0, scale, lane_max)
            # the product's maxima (where it keeps them) hold unless a score modification
            # changed the scores; a plain strip skips the call, which passes the whole mods
            # tuple (its arrays' reference counts) for nothing
            plain = band_only and _inside_band(r1 - r0, j1 - j0, i0 + r0, j0, off, left, right)
            modified = not plain and _modify_scores(s, b, h, i0 + r0, j0, off, mods)
            _fold_strip(s, lane_max, modified or rescan, running_max[r0:r1], running_sum[r0:r1],
                        acc[r0:r1])
            register_gemm_untransposed(acc[r0:r1], s, v[b, hk, j0:j1], 1.0, True)  # acc += P v
    _write_rows(out, lse, acc, running_max, running_sum, b, h, i0)


@njit(cache=True, fastmath=FASTMATH)
def _fold_strip(s, lane_max, modified, running_max, running_sum, acc):
    """The online softmax of a strip of scores s (rows, keys), in place: each row's running
    max and sum take in its new keys, acc's row is rescaled to the new max, and s turns into
    exp(s - max) (0 in rows that see no key yet). The row maxima come from lane_max (the score
    product's) unless a score modification changed the scores."""
    for r in range(s.shape[0]):
        m_new = max(running_max[r], row_max(s[r] if modified else lane_max[r]))
        if m_new == NEG_INF:  # nothing visible yet: contribute nothing (test: empty rows)
            s[r, :] = 0
            continue
        _fold_row(r, m_new, exp_shifted(s[r], m_new), running_max, running_sum, acc)


@njit(cache=True, fastmath=FASTMATH)
def _fold_strip_into_terms(p_terms, s_buf, rows, width, first, stop, running_max, running_sum,
                           acc):
    """:func:`_fold_strip` for the tiles, whose probabilities go straight into p_terms as the
    left operand of P v over the window of ``width`` keys, not back into the scores: the first
    ``rows`` rows of s_buf hold a strip's scores in columns [first, stop), and p_terms' rows
    get their probabilities there, zero elsewhere and in the rest of the last strip (rows past
    the last query add nothing). One pass for the exp and the split instead of two."""
    for r in range(_ceil_div(rows, TILE_STRIP) * TILE_STRIP):
        m_new = max(running_max[r], row_max(s_buf[r, first:stop])) if r < rows else NEG_INF
        if m_new == NEG_INF:
            p_terms[:, r, :width] = 0
            continue
        _fold_row(r, m_new, exp_split_probabilities(p_terms, r, s_buf[r, :width], m_new, first,
                                                    stop), running_max, running_sum, acc)


@njit(inline="always", fastmath=FASTMATH)
def _fold_row(r, m_new, new_sum, running_max, running_sum, acc):
    """Row r of the online softmax takes in keys whose exp(score - m_new) add up to new_sum:
    its running sum and accumulator are rescaled from the old max to m_new."""
    correction = exp_scalar(running_max[r] - m_new)
    running_sum[r] = running_sum[r] * correction + new_sum
    if correction != 1:
        for d in range(acc.shape[1]):  # ``acc[r] *= correction`` cost a call per row
            acc[r, d] *= correction
    running_max[r] = m_new


@njit(cache=True, fastmath=FASTMATH)
def _write_rows(out, lse, acc, running_max, running_sum, b, h, i0):
    """out[b, h, i0 + r] = acc[r] / sum and lse = max + log(sum) for the rows of a query block
    (running_max's length); zeros and lse -inf for a row that sees no key, never NaN."""
    for r in range(running_max.shape[0]):
        total = running_sum[r]
        out_row = out[b, h, i0 + r]
        if total > 0:
            # element by element: ``acc[r] / total`` allocated a temporary row per query
            for d in range(out_row.shape[0]):
                out_row[d] = acc[r, d] / total
            lse[b, h, i0 + r] = running_max[r] + np.log(total)
        else:
            out_row[:] = 0
            lse[b, h, i0 + r] = NEG_INF


@njit(cache=True, error_model="numpy")
def _forward_tasks_block(t, out, lse, q, kt, v, scale, block_q, strip_rows, mods):
    """Task t: a block of query rows of one (batch, head)."""
    H, N = q.shape[1], q.shape[2]
    n_blocks = _ceil_div(N, block_q)
    bh, u = t // n_blocks, t % n_blocks
    # Pair block u with block n-1-u: with causal masks their costs add up to a constant, so
    # prange's equal static split gives each thread the same work.
    qb = u // 2 if u % 2 == 0 else n_blocks - 1 - u // 2
    i0 = qb * block_q
    _forward_query_block(out, lse, q, kt, v, scale, bh // H, bh % H, i0,
                         min(i0 + block_q, N), strip_rows, mods)


_forward_tasks_block_by_symbol = called_natively(_forward_tasks_block)


@sized_kernel(GRAIN, chunk=_forward_tasks_block)
def _forward_tasks(out, lse, q, kt, v, scale, block_q, strip_rows, mods):
    B, H, N = q.shape[0], q.shape[1], q.shape[2]
    for t in prange(B * H * _ceil_div(N, block_q)):
        _forward_tasks_block_by_symbol((np.int64(t), out, lse, q, kt, v, scale, block_q,
                                        strip_rows, mods))


@njit(cache=True, fastmath=FASTMATH)
def _forward_query_block_on_tiles(out, lse, q_terms, k_tiles, v_tiles, b, h, i0, i1, M,
                                  block_k, mods):
    """:func:`_forward_query_block` with its two products on AMX tiles, in bf16x3
    (bf16x3_gemm.py), the tiles configured: q_terms (3, rows, D) holds scale * q's terms for
    the block's rows (zero past them to a whole strip), k_tiles and v_tiles the kv head's k and
    v as right operands (:func:`_split_operands_of_task`). A strip of TILE_STRIP rows computes
    the keys it may see from the 32-key column before them to the one after; the scores
    outside them are left out of the softmax and their probabilities are zero, so they add
    nothing to P v."""
    N, D = out.shape[2], out.shape[3]
    off = M - N
    rows = i1 - i0
    left, right = mods[4], mods[5]
    padded_rows = _ceil_div(rows, TILE_STRIP) * TILE_STRIP
    acc = aligned_empty(padded_rows * D, np.float32).reshape((padded_rows, D))
    acc[:] = 0
    running_max = np.full(rows, NEG_INF, np.float32)
    running_sum = np.zeros(rows, np.float32)
    s_buf = aligned_empty(TILE_STRIP * (block_k + ROW_PAD), np.float32).reshape(
        (TILE_STRIP, block_k + ROW_PAD))
    p_terms = aligned_empty(TERMS * TILE_STRIP * block_k, np.uint16).reshape(
        (TERMS, TILE_STRIP, block_k))
    k_depth, v_depth = k_tiles.shape[2], v_tiles.shape[2]
    j_lo, j_hi = _visible_keys(i0, i1, off, left, right, M)
    band_only = _band_only(mods)
    for kb in range(j_lo // block_k, _ceil_div(j_hi, block_k)):
        for r0 in range(0, rows, TILE_STRIP):
            r1 = min(r0 + TILE_STRIP, rows)
            strip_lo, strip_hi = _visible_keys(i0 + r0, i0 + r1, off, left, right, M)
            j0, j1 = max(kb * block_k, strip_lo), min((kb + 1) * block_k, strip_hi)
            if j0 >= j1:
                continue
            a0, a1 = j0 // TILE_DEPTH * TILE_DEPTH, _ceil_div(j1, TILE_DEPTH) * TILE_DEPTH
            for c in range(a0, a1, TILE_DEPTH):  # S = (scale q) k^T, 32 x 32 blocks
                product_32x32(s_buf, c - a0, s_buf.shape[1] * 4, False, q_terms, r0 * D, D * 2,
                              k_tiles, c // TILE_ROWS * k_depth * TILE_ELEMENTS,
                              k_depth * TILE_ELEMENTS, k_depth)
            s = s_buf[:r1 - r0, j0 - a0:j1 - a0]
            if not (band_only and _inside_band(r1 - r0, j1 - j0, i0 + r0, j0, off, left, right)):
                _modify_scores(s, b, h, i0 + r0, j0, off, mods)
            _fold_strip_into_terms(p_terms, s_buf, r1 - r0, a1 - a0, j0 - a0, j1 - a0,
                                   running_max[r0:r1], running_sum[r0:r1], acc[r0:r1])
            for c in range(0, D, TILE_DEPTH):  # acc += P v, 32 x 32 blocks
                product_32x32(acc, r0 * D + c, D * 4, True, p_terms, 0, block_k * 2,
                              v_tiles, c // TILE_ROWS * v_depth * TILE_ELEMENTS
                              + a0 // TILE_DEPTH * TILE_ELEMENTS,
                              v_depth * TILE_ELEMENTS, (a1 - a0) // TILE_DEPTH)
    _write_rows(out, lse, acc, running_max, running_sum, b, h, i0)


@sized_kernel(GRAIN)
def _forward_tasks_on_tiles(out, lse, q, k, v, scale, q_work, k_work, v_work, config, block_q,
                            block_k, mods):
    """The (batch, head, query block) tasks of :func:`_forward_tasks`, split evenly between the
    workers of the plan (q_work's first axis), each with its own operands (see
    :func:`_split_operands_of_task`)."""
    B, H, N = q.shape[0], q.shape[1], q.shape[2]
    M = k.shape[2]
    n_blocks = _ceil_div(N, block_q)
    n_tasks = B * H * n_blocks
    workers = q_work.shape[0]
    for w in prange(workers):
        tile_config(config)
        kv_head = -1  # the (batch, kv head) whose k and v this worker's operands hold
        for t in range(w * n_tasks // workers, (w + 1) * n_tasks // workers):
            bh, u = t // n_blocks, t % n_blocks
            qb = u // 2 if u % 2 == 0 else n_blocks - 1 - u // 2  # as in _forward_tasks
            b, h = bh // H, bh % H
            i0, i1 = qb * block_q, min(qb * block_q + block_q, N)
            kv_head = _split_operands_of_task(q_work[w], k_work[w], v_work[w], q, k, v, scale,
                                              b, h, i0, i1, kv_head)
            _forward_query_block_on_tiles(out, lse, q_work[w], k_work[w], v_work[w], b, h, i0,
                                          i1, M, block_k, mods)
        tile_release()


@njit(cache=True)
def _split_operands_of_task(q_terms, k_tiles, v_tiles, q, k, v, scale, b, h, i0, i1, kv_head):
    """A worker's operands for the task of queries [i0, i1) of (b, h): their rows of scale q
    into q_terms, and k and v of its kv head into k_tiles and v_tiles unless they hold them
    already (kv_head: the batch and kv head they hold, b * Hkv + hk, or -1). Returns the batch
    and kv head they hold now. Split by the task, the operands stay in its core's caches: one
    split of all of q, k and v before the tasks (in memory 1.5 times theirs) cost 0.5-0.9 ms of
    the 8 ms forward at B 1 H 8 N 1024 D 64 (2 threads, Intel Xeon)."""
    Hkv, M, D = k.shape[1], k.shape[2], k.shape[3]
    hk = h // (q.shape[1] // Hkv)
    split_rows_into(q_terms, q[b, h], i0, i1 - i0, scale)
    if b * Hkv + hk != kv_head:
        keys_as_columns_serial(k_tiles.reshape((TERMS, 1, 1) + k_tiles.shape[1:]),
                               k[b, hk].reshape((1, 1, M, D)))
        rows_as_depth_serial(v_tiles.reshape((TERMS, 1, 1) + v_tiles.shape[1:]),
                             v[b, hk].reshape((1, 1, M, D)))
    return b * Hkv + hk


@njit(cache=True, fastmath=FASTMATH)
def _score_gradients(ds, p, dout_rows, vt, b, hk, j0, delta_rows):
    """ds = p * (dout v^T - delta): gradient of the loss w.r.t. the modified scores of keys
    j0..; vt holds v's key panels (:func:`_key_panels`)."""
    _panel_product(ds, dout_rows, vt, b, hk, j0, 1.0, None)
    for r in range(ds.shape[0]):
        softmax_grad_row(ds[r], p[r], delta_rows[r])


@njit(cache=True)
def _structured_grads(ds, b, h, i0, j0, mods, task_grads):
    """Gradients of the structured biases from a dS tile, into one task's own buffers:
    task_grads = (dtable (group, LANES, P, C), dpair (group, LANES, C), dx (3, N), dy (3, M)),
    where h % group picks the head's slot (LANES: copies summed by the launcher)."""
    distance, pair = _structured_biases(mods)
    dtable, dpair, dx, dy = task_grads
    # each compiles to nothing where the call has no such bias
    distance_bias_grads(ds, b, h, i0, j0, distance, dtable[h % dtable.shape[0]], dx, dy)
    pair_bias_grads(ds, b, i0, j0, pair, dpair[h % dpair.shape[0]])


@njit(cache=True, fastmath=FASTMATH)
def _backward_key_chunk(dq_part, dk, dv, task_grads, dout, lse, delta, q, k, v, kt, vt, scale,
                        b, hk, chunk, n_chunks, block_q, mods, tiles, worker):
    """dK, dV of the key blocks chunk, chunk + n_chunks, ... of (b, hk); their dQ into dq_part,
    the structured biases' gradients into task_grads (see :func:`_structured_grads`). kt, vt
    hold k's and v's key blocks transposed, whose size is the key block. tiles: None, or the
    operands of :func:`_backward_operands`, with which S, dP, dQ (unscaled: the launcher
    scales it), dK and dV are products on AMX tiles; the key block's operands go to those of
    ``worker``, the task's worker. The tests of ``tiles is None`` are decided when Numba
    compiles (its dead-branch pruning), so that the register version holds no AMX instruction
    and compiles for CPUs without them."""
    H, N, D = q.shape[1], q.shape[2], q.shape[3]
    M = k.shape[2]
    off = M - N
    group = H // k.shape[1]
    dtype = q.dtype
    block_k, width = _block_keys(kt), kt.shape[5]
    left, right = mods[4], mods[5]
    # whole strips of rows, on 64-byte boundaries, for the tile products
    strips = _ceil_div(block_q, TILE_STRIP) * TILE_STRIP
    s_buf = aligned_empty(strips * (block_k + ROW_PAD), dtype).reshape(
        (strips, block_k + ROW_PAD))
    ds_buf = aligned_empty(strips * (block_k + ROW_PAD), dtype).reshape(
        (strips, block_k + ROW_PAD))
    if tiles is not None:
        q_terms, dout_terms, q_over_queries, dout_over_queries, k_work, v_work, k_depth_work, \
            config = tiles
        k_columns, v_columns, k_depth = k_work[worker], v_work[worker], k_depth_work[worker]
        tile_config(config)
        ds_terms = aligned_empty(TERMS * strips * block_k, np.uint16).reshape(
            (TERMS, strips, block_k))
        dq_rows = aligned_empty(strips * D, dtype).reshape((strips, D))
        # dK^T and dV^T of the key block, and a column of 32 keys of P and dS as right
        # operands over the query rows
        dk_t = aligned_empty(D * block_k, dtype).reshape((D, block_k))
        dv_t = aligned_empty(D * block_k, dtype).reshape((D, block_k))
        slab_shape = (TERMS, TILE_DEPTH // TILE_ROWS, strips // TILE_DEPTH, TILE_ROWS, TILE_DEPTH)
        p_slab = aligned_empty(TERMS * TILE_DEPTH * strips, np.uint16).reshape(slab_shape)
        ds_slab = aligned_empty(TERMS * TILE_DEPTH * strips, np.uint16).reshape(slab_shape)
    shift = np.empty(block_q, dtype)
    dk_acc = np.empty((block_k, D), dtype)
    dv_acc = np.empty((block_k, D), dtype)
    for kb in range(chunk, _ceil_div(M, block_k), n_chunks):
        j0 = kb * block_k
        j1 = min(j0 + block_k, M)
        cols = j1 - j0
        k_rows = k[b, hk, j0:j1]
        dk_blk, dv_blk = dk_acc[:cols], dv_acc[:cols]
        if tiles is not None:
            _split_key_block(k_columns, v_columns, k_depth, k, v, b, hk, j0, j1)
            dk_t[:] = 0
            dv_t[:] = 0
        else:
            dk_blk[:] = 0
            dv_blk[:] = 0
        i_lo, i_hi = _visible_queries(j0, j1, off, left, right, N)
        for h in range(hk * group, (hk + 1) * group):
            i1 = i_lo
            while i1 < i_hi:
                i0 = i1
                i1 = min(i0 + block_q, i_hi)
                if not _inside_band(i1 - i0, cols, i0, j0, off, left, right):
                    i1 = min(i0 + min(block_q, EDGE_BLOCK_Q), i_hi)
                rows = i1 - i0
                # the keys of the block that these queries may see (near a causal diagonal,
                # part of it): columns [c0, c1) of the block
                t_lo, t_hi = _visible_keys(i0, i1, off, left, right, M)
                c0, c1 = max(t_lo, j0) - j0, min(t_hi, j1) - j0
                if c0 >= c1:
                    continue
                t_cols = c1 - c0
                q_rows, dout_rows = q[b, h, i0:i1], dout[b, h, i0:i1]
                # the tile products' window: keys [a0, a1) of the block, whole tiles
                a0, a1 = c0 // TILE_DEPTH * TILE_DEPTH, _ceil_div(c1, TILE_DEPTH) * TILE_DEPTH
                if tiles is not None:
                    p, ds = s_buf[:rows, c0 - a0:c1 - a0], ds_buf[:rows, c0 - a0:c1 - a0]
                else:
                    p, ds = s_buf[:rows, :t_cols], ds_buf[:rows, :t_cols]
                # whole panels: the exp and dS in the products' epilogues (one pass each less)
                fused = width == WIDE and c0 % WIDE == 0
                # forward: S = scale q k^T + mods; P = exp(S - lse)
                if tiles is not None:
                    _strips_on_tiles(s_buf, q_terms, b, h, i0, rows, k_columns, a0, a1)
                    _modify_scores(p, b, h, i0, j0 + c0, off, mods)
                    _probabilities_from_lse(p, lse[b, h, i0:i1])
                elif fused and _plain_tile(rows, t_cols, i0, j0 + c0, off, mods):
                    _lse_shift(shift[:rows], lse[b, h, i0:i1])
                    register_gemm_exp(p, q_rows, kt[b, hk, kb, c0 // WIDE:], scale,
                                      shift[:rows])
                else:
                    _score_tile(p, q_rows, kt, scale, b, h, hk, i0, j0 + c0, off, mods)
                    _probabilities_from_lse(p, lse[b, h, i0:i1])
                if tiles is not None:
                    _strips_on_tiles(ds_buf, dout_terms, b, h, i0, rows, v_columns, a0, a1)
                    for r in range(rows):
                        softmax_grad_row(ds[r], p[r], delta[b, h, i0 + r])
                elif fused:
                    register_gemm_softmax_grad(ds, dout_rows, vt[b, hk, kb, c0 // WIDE:], 1.0,
                                               p, delta[b, h, i0:i1])
                else:
                    _score_gradients(ds, p, dout_rows, vt, b, hk, j0 + c0, delta[b, h, i0:i1])
                # forward: S = scale q k^T + f(structure)  =>  d table, d positions
                _structured_grads(ds, b, h, i0, j0 + c0, mods, task_grads)
                # forward: S = scale q k^T  =>  dQ += scale dS k
                if tiles is not None:
                    _dq_on_tiles(dq_part[b, h, i0:i1], dq_rows, ds_terms, ds_buf, a1 - a0,
                                 c0 - a0, c1 - a0, k_depth, a0)
                else:
                    register_gemm(dq_part[b, h, i0:i1], ds, k_rows[c0:c1], scale, True)
                # forward: out = P v and S = scale q k^T  =>  dV += P^T dout, dK += scale dS^T q
                if tiles is not None:
                    _dk_dv_on_tiles(dk_t, dv_t, p_slab, ds_slab, s_buf, ds_buf, rows,
                                    a1 - a0, c0 - a0, c1 - a0, q_over_queries,
                                    dout_over_queries, b, h, i0, a0)
                else:
                    register_gemm(dv_blk[c0:c1], p.T, dout_rows, 1.0, True)
                    register_gemm(dk_blk[c0:c1], ds.T, q_rows, scale, True)
        if tiles is not None:
            transpose(dk[b, hk, j0:j1], dk_t[:, :cols])
            transpose(dv[b, hk, j0:j1], dv_t[:, :cols])
        else:
            _copy_rows(dk[b, hk, j0:j1], dk_blk)
            _copy_rows(dv[b, hk, j0:j1], dv_blk)
    if tiles is not None:
        tile_release()


@njit(cache=True)
def _copy_rows(dst, src):
    """dst = src, two arrays of one 2-D shape, element by element: a slice assignment from an
    array (``dst[:] = src``) compiles Numba's shape-mismatch message, string formatting that
    every kernel inlining it paid for again in its compile time (benchmarks/compile_profile.py)."""
    for r in range(dst.shape[0]):
        dst_row, src_row = dst[r], src[r]
        for c in range(dst.shape[1]):
            dst_row[c] = src_row[c]


@njit(cache=True)
def _split_key_block(k_columns, v_columns, k_depth, k, v, b, hk, j0, j1):
    """The backward's right operands for keys [j0, j1) of (b, hk) (zero past them to the whole
    key block): k and v over D (their keys as columns), k over its keys. Split by the task that
    owns the key block, they stay in its core's caches: one split of all of k and v before the
    tasks cost about a tenth of the backward at B 1 H 8 N 1024 D 128 (2 threads, Intel Xeon)."""
    D = k.shape[3]
    shape = (1, 1, j1 - j0, D)
    keys_as_columns_serial(k_columns.reshape((TERMS, 1, 1) + k_columns.shape[1:]),
                           k[b, hk, j0:j1].reshape(shape))
    keys_as_columns_serial(v_columns.reshape((TERMS, 1, 1) + v_columns.shape[1:]),
                           v[b, hk, j0:j1].reshape(shape))
    rows_as_depth_serial(k_depth.reshape((TERMS, 1, 1) + k_depth.shape[1:]),
                         k[b, hk, j0:j1].reshape(shape))


@njit(cache=True)
def _split_window_rows(terms, x, rows, width, first, stop):
    """terms[:, r, :width] = the terms of x[r, :width], its columns [first, stop) only (zero
    elsewhere), for the first ``rows`` rows, and zero for the rest of their last strip: a left
    operand over a window of whole tiles whose rows past the last query add nothing."""
    for r in range(_ceil_div(rows, TILE_STRIP) * TILE_STRIP):
        if r < rows:
            split_probabilities(terms, r, x[r, :width], first, stop)
        else:
            terms[:, r, :width] = 0


@njit(cache=True)
def _strips_on_tiles(c, a_terms, b, h, i0, rows, b_tiles, j0, j1):
    """c[:rows, :j1 - j0] = a's rows i0.. (the terms of (b, h) in a_terms) times the columns
    j0 .. j1 - 1 of b_tiles (one key block's right operand; whole tiles), a strip of
    TILE_STRIP rows at a time: the rows up to the next whole strip are written too (c has
    them)."""
    D, depth = a_terms.shape[4], b_tiles.shape[2]
    a_at = ((b * a_terms.shape[2] + h) * a_terms.shape[3] + i0) * D
    row_floats = c.shape[1]
    for r in range(0, rows, TILE_STRIP):
        for j in range(j0, j1, TILE_DEPTH):
            product_32x32(c, r * row_floats + j - j0, row_floats * 4, False, a_terms,
                          a_at + r * D, D * 2, b_tiles, j // TILE_ROWS * depth * TILE_ELEMENTS,
                          depth * TILE_ELEMENTS, depth)


@njit(cache=True)
def _dq_on_tiles(dq_part_rows, dq_rows, ds_terms, ds_buf, width, first, stop, k_depth, j0):
    """dq_part_rows += dS k on the tiles: dS is ds_buf[:, first:stop] (the keys from j0 + first
    on in the key block), split over the window of width keys from j0 into ds_terms; k_depth
    holds the key block's k as the right operand over its keys. The rows go through dq_rows,
    aligned and whole strips."""
    rows, D = dq_part_rows.shape
    _split_window_rows(ds_terms, ds_buf, rows, width, first, stop)
    _copy_rows(dq_rows[:rows], dq_part_rows)
    steps = k_depth.shape[2]
    k_at = j0 // TILE_DEPTH * TILE_ELEMENTS
    for r in range(0, rows, TILE_STRIP):
        for d in range(0, D, TILE_DEPTH):
            product_32x32(dq_rows, r * D + d, D * 4, True, ds_terms, r * ds_terms.shape[2],
                          ds_terms.shape[2] * 2, k_depth,
                          k_at + d // TILE_ROWS * steps * TILE_ELEMENTS, steps * TILE_ELEMENTS,
                          width // TILE_DEPTH)
    _copy_rows(dq_part_rows, dq_rows[:rows])


@njit(cache=True)
def _dk_dv_on_tiles(dk_t, dv_t, p_slab, ds_slab, s_buf, ds_buf, rows, width, first, stop,
                    q_over_queries, dout_over_queries, b, h, i0, a0):
    """dK^T += (scale q)^T dS and dV^T += dout^T P on the tiles, for the query rows i0 ..
    i0 + rows - 1 of (b, h) and the window of ``width`` keys from a0 of the key block: P and
    dS are s_buf's and ds_buf's first rows, their columns [first, stop) (zero elsewhere in the
    window, here). Column by column of 32 keys, P and dS are split as right operands over the
    query rows (a column of a few KiB, in L1: the whole tiles at once went through L2 at
    0.5 ns an element), and each meets all of D in 32-row blocks of q and dout over their
    queries (:func:`split_columns`). The sums stay in dk_t and dv_t, (D, key block)."""
    D, block_k = dk_t.shape
    for buf in (s_buf, ds_buf):
        buf[:rows, :first] = 0
        buf[:rows, stop:width] = 0
    steps = _ceil_div(rows, TILE_DEPTH)
    column_step = p_slab.shape[2] * TILE_ELEMENTS
    depth = q_over_queries.shape[4]
    a_at = (b * q_over_queries.shape[2] + h) * D * depth + i0
    for kc in range(0, width, TILE_DEPTH):
        pairs_as_depth(p_slab, s_buf, 0, rows, kc)
        pairs_as_depth(ds_slab, ds_buf, 0, rows, kc)
        for d in range(0, D, TILE_DEPTH):
            c_at = d * block_k + a0 + kc
            product_32x32(dv_t, c_at, block_k * 4, True, dout_over_queries, a_at + d * depth,
                          depth * 2, p_slab, 0, column_step, steps)
            product_32x32(dk_t, c_at, block_k * 4, True, q_over_queries, a_at + d * depth,
                          depth * 2, ds_slab, 0, column_step, steps)


@njit(cache=True, error_model="numpy")
def _backward_tasks_worker(w, dq_parts, dk, dv, structured_parts, dout, lse, delta, q, k, v, kt,
                           vt, scale, block_q, mods, tiles, workers):
    """Worker w's share of the (batch, kv head, key chunk) tasks (see _backward_tasks)."""
    n_chunks = dq_parts.shape[0]
    B, Hkv = k.shape[0], k.shape[1]
    n_tasks = B * Hkv * n_chunks
    dtable, dpair, dx, dy = structured_parts
    for t in range(w * n_tasks // workers, (w + 1) * n_tasks // workers):
        bhk, chunk = t // n_chunks, t % n_chunks
        b, hk = bhk // Hkv, bhk % Hkv
        task_grads = (dtable[t % dtable.shape[0]], dpair[t % dpair.shape[0]],
                      dx[chunk % dx.shape[0], hk % dx.shape[1], b % dx.shape[2]],
                      dy[hk % dy.shape[0], b % dy.shape[1]])
        _backward_key_chunk(dq_parts[chunk], dk, dv, task_grads, dout, lse, delta, q, k, v,
                            kt, vt, scale, b, hk, chunk, n_chunks, block_q, mods, tiles, w)


_backward_tasks_worker_by_symbol = called_natively(_backward_tasks_worker)


@sized_kernel(GRAIN, chunk=_backward_tasks_worker)
def _backward_tasks(dq_parts, dk, dv, structured_parts, dout, lse, delta, q, k, v, kt, vt,
                    scale, block_q, mods, tiles, workers):
    """The (batch, kv head, key chunk) tasks, split evenly between ``workers`` (the plan's
    threads; the tile operands of :func:`_backward_operands` hold a key block for each).
    structured_parts = (dtable (tasks, group, LANES, P, C), dpair (tasks, group, LANES, C),
    dx (chunks, Hkv, B, 3, N), dy (Hkv, B, 3, M)), zeroed: each task writes only its own part."""
    for w in prange(workers):
        # w as int64: the parallel loop's index is unsigned, which would compile the worker a
        # second time for the parallel version
        _backward_tasks_worker_by_symbol((np.int64(w), dq_parts, dk, dv, structured_parts, dout,
                                          lse, delta, q, k, v, kt, vt, scale, block_q, mods,
                                          tiles, workers))


@njit(cache=True, fastmath=FASTMATH)
def _bias_grad_tile(dbias, bb, hb, i_start, i_stop, j_start, j_stop, dout, lse, delta, q, kt,
                    vt, M, scale, block_q, mods):
    """dbias[bb, hb] over rows [i_start, i_stop) x cols [j_start, j_stop) of the bias's own
    shape, summing dS over every batch, head, row or column that the bias broadcasts over."""
    B, H, N, D = q.shape
    off = M - N
    group = H // kt.shape[1]
    Bb, Hb, Nb, Mb = dbias.shape
    block_k = _block_keys(kt)
    dtype = q.dtype
    left, right = mods[4], mods[5]
    s_buf = np.empty((block_q, block_k + ROW_PAD), dtype)
    ds_buf = np.empty((block_q, block_k + ROW_PAD), dtype)
    out = dbias[bb, hb]
    out[i_start:i_stop if Nb > 1 else 1, j_start:j_stop if Mb > 1 else 1] = 0
    for b in range(0 if Bb == 1 else bb, B if Bb == 1 else bb + 1):
        for h in range(0 if Hb == 1 else hb, H if Hb == 1 else hb + 1):
            for i0 in range(i_start, i_stop, block_q):
                i1 = min(i0 + block_q, i_stop)
                j_lo, j_hi = _visible_keys(i0, i1, off, left, right, M)
                lo, hi = max(j_start, j_lo), min(j_stop, j_hi)
                for kb in range(lo // block_k, _ceil_div(hi, block_k)):
                    j0, j1 = max(kb * block_k, lo), min((kb + 1) * block_k, hi)
                    rows, cols = i1 - i0, j1 - j0
                    p, ds = s_buf[:rows, :cols], ds_buf[:rows, :cols]
                    hk = h // group
                    _score_tile(p, q[b, h, i0:i1], kt, scale, b, h, hk, i0, j0, off, mods)
                    _probabilities_from_lse(p, lse[b, h, i0:i1])
                    _score_gradients(ds, p, dout[b, h, i0:i1], vt, b, hk, j0,
                                     delta[b, h, i0:i1])
                    # forward: S = ... + bias[broadcast]  =>  dbias = dS summed over broadcasts
                    for r in range(rows):
                        for c in range(cols):
                            out[i0 + r if Nb > 1 else 0, j0 + c if Mb > 1 else 0] += ds[r, c]


@sized_kernel(GRAIN)
def _bias_grad_tasks(dbias, dout, lse, delta, q, kt, vt, M, scale, block_q, mods):
    N, block_k = q.shape[2], _block_keys(kt)
    Bb, Hb, Nb, Mb = dbias.shape
    n_row_tiles = _ceil_div(N, block_q) if Nb > 1 else 1
    n_col_tiles = _ceil_div(M, block_k) if Mb > 1 else 1
    tiles = n_row_tiles * n_col_tiles
    for t in prange(Bb * Hb * tiles):
        bh, tile = t // tiles, t % tiles
        rt, ct = tile // n_col_tiles, tile % n_col_tiles
        i_start = rt * block_q if Nb > 1 else 0
        j_start = ct * block_k if Mb > 1 else 0
        i_stop = min(i_start + block_q, N) if Nb > 1 else N
        j_stop = min(j_start + block_k, M) if Mb > 1 else M
        _bias_grad_tile(dbias, bh // Hb, bh % Hb, i_start, i_stop, j_start, j_stop, dout, lse,
                        delta, q, kt, vt, M, scale, block_q, mods)


@sized_kernel(GRAIN, fastmath=FASTMATH)
def _weights_tasks(weights, q, kt, scale, block_q, mods):
    B, H, N, D = q.shape
    M = weights.shape[3]
    group = H // kt.shape[1]
    block_k = _block_keys(kt)
    n_blocks = _ceil_div(N, block_q)
    for t in prange(B * H * n_blocks):
        bh, qb = t // n_blocks, t % n_blocks
        b, h = bh // H, bh % H
        i0 = qb * block_q
        i1 = min(i0 + block_q, N)
        s = weights[b, h, i0:i1]
        for j0 in range(0, M, block_k):
            _score_tile(s[:, j0:min(j0 + block_k, M)], q[b, h, i0:i1], kt, scale, b, h,
                        h // group, i0, j0, M - N, mods)
        for r in range(i1 - i0):
            m = row_max(s[r])
            if m == NEG_INF:
                s[r, :] = 0
                continue
            s[r] /= exp_shifted(s[r], m)


def _mods(call):
    """The score modifications of a prepared call, as the flat tuple the kernels unpack; an
    absent structured bias's placeholder arrays are None there."""
    dtype = call.q.dtype
    distance = (distance_args(call.distance, dtype) if call.distance.has else
                _absent_form(call.distance, dtype, lambda: distance_args(call.distance, dtype)))
    pair = (pair_args(call.pair) if call.pair.mode != NO_PAIR else
            _absent_form(call.pair, dtype, lambda: pair_args(call.pair)))
    return (call.bias, call.attn_mask, call.key_padding_mask, call.alibi_slopes,
            call.left, call.right, call.has_bias, call.has_mask, call.has_kpm, call.has_alibi,
            *distance, *pair)


# The kernel forms of absent structured biases, by the placeholder that stands in for each
# (ops/structured_bias.py makes one per device and dtype, and every call without the bias
# shares it): made once, not on every attention call (converting the placeholder's scalars and
# checking its positions cost more than a small call's kernel; BENCHMARKS.md).
_ABSENT_FORMS = {}
# More than the placeholders: an absent bias that is not one (a call the compile helper
# unpickled) starts the cache afresh rather than growing it
ABSENT_FORMS_KEPT = 16


def _absent_form(bias, dtype, make):
    """The kernel form ``make()`` of the absent structured bias ``bias`` with None for its
    arrays, made once per bias."""
    entry = _ABSENT_FORMS.get((id(bias), dtype))
    if entry is None or entry[0] is not bias:
        if len(_ABSENT_FORMS) >= ABSENT_FORMS_KEPT:
            _ABSENT_FORMS.clear()
        entry = _ABSENT_FORMS[id(bias), dtype] = (bias, _arrays_as_none(make()))
    return entry[1]


def _arrays_as_none(fields):
    """An absent bias's kernel form with None for its arrays, which no kernel reads (its flag
    is None): the kernels' wrappers then unbox none of them."""
    return tuple(None if isinstance(field, np.ndarray) else field for field in fields)


def _scale(call):
    return call.q.dtype.type(call.scale)


def _query_block(call, threads, block):
    """``block`` query rows, halved while there are too few (batch, head, query block) tasks
    for the threads (a serial launch keeps the full block)."""
    B, H, N = call.q.shape[:3]
    while (threads > 1 and block > MIN_BLOCK_Q
           and B * H * -(-N // block) < TASKS_PER_THREAD * threads):
        block //= 2
    return block


def on_tiles(call, block_k=BLOCK_K):
    """Whether the forward of ``call`` runs its products on AMX tiles: where FORWARD_ON_TILES
    (the CPU has them), for float32 with a head dim and key blocks of whole 32-wide tiles, and
    where they were measured faster (TILES_MIN_HEAD_DIM, TILES_MIN_KEYS)."""
    D, M = call.q.shape[3], call.k.shape[2]
    return (FORWARD_ON_TILES and _whole_tiles(call, block_k)
            and (D >= TILES_ANY_KEYS_HEAD_DIM or D >= TILES_MIN_HEAD_DIM and M >= TILES_MIN_KEYS))


def _whole_tiles(call, block_k):
    """float32, with a head dim and key blocks of whole 32-wide tiles."""
    return (call.q.dtype == np.float32 and call.q.shape[3] % TILE_DEPTH == 0
            and block_k % TILE_DEPTH == 0)


def _row_operand(name, x, scale):
    """scale x (B, H, N, D) as left-operand rows, padded by a strip of zero rows, in the
    scratch buffer ``name`` (workspace.py: the operands are split again on every call)."""
    B, H, N, D = x.shape
    terms = scratch(name, (TERMS, B, H, N + TILE_STRIP, D), np.uint16)
    split_rows(terms, x, scale)
    return terms


def _column_operand(name, x, scale):
    """scale x (B, H, N, D) transposed, as left-operand rows over the N queries (depth), padded
    with zero queries to a whole strip past the last tile, in the scratch buffer ``name``."""
    B, H, N, D = x.shape
    terms = scratch(name, (TERMS, B, H, D, _ceil_div(N, TILE_DEPTH) * TILE_DEPTH + TILE_STRIP),
                    np.uint16)
    split_columns(terms, x, scale)
    return terms


def _forward_on_tiles(out, lse, call, threads, block_q, block_k):
    """The forward with :func:`_forward_query_block_on_tiles`, each worker of the plan with
    its own operands, in scratch buffers (workspace.py): a query block's rows of q, and a kv
    head's k and v (keys padded to a whole column of tiles)."""
    B, H, N, D = call.q.shape
    M = call.k.shape[2]
    padded_keys = _ceil_div(M, TILE_DEPTH) * TILE_DEPTH
    q_work = scratch("q rows", (threads, TERMS, _ceil_div(block_q, TILE_STRIP) * TILE_STRIP, D),
                     np.uint16)
    k_work = scratch("k", (threads, TERMS, padded_keys // TILE_ROWS, D // TILE_DEPTH, TILE_ROWS,
                           TILE_DEPTH), np.uint16)
    v_work = scratch("v", (threads, TERMS, D // TILE_ROWS, padded_keys // TILE_DEPTH, TILE_ROWS,
                           TILE_DEPTH), np.uint16)
    _forward_tasks_on_tiles.run(threads, out, lse, call.q, call.k, call.v, _scale(call), q_work,
                                k_work, v_work, tile_configuration(), block_q, block_k,
                                _mods(call))


def backward_on_tiles(call, block_k=BLOCK_K):
    """Whether the backward of ``call`` runs its products on AMX tiles: where
    BACKWARD_ON_TILES (the CPU has them), for float32 with a head dim and key blocks of whole
    32-wide tiles, and where they were measured faster (BACKWARD_TILES_FROM)."""
    D, M = call.q.shape[3], call.k.shape[2]
    return (BACKWARD_ON_TILES and _whole_tiles(call, block_k)
            and any(D >= head_dim and M >= keys for head_dim, keys in BACKWARD_TILES_FROM))


def _backward_operands(call, dout, block_k, workers):
    """The bf16x3 operands of the backward's tile products (:func:`_backward_key_chunk`):
    scale q and dout as left-operand rows and transposed (:func:`_column_operand`), and room
    for each of ``workers`` to split a key
    block's k and v over D and k over its keys (:func:`_split_key_block`), in scratch buffers;
    None where the backward stays in registers."""
    if not backward_on_tiles(call, block_k):
        return None
    D = call.q.shape[3]
    over_d = (workers, TERMS, block_k // TILE_ROWS, D // TILE_DEPTH, TILE_ROWS, TILE_DEPTH)
    return (_row_operand("q", call.q, _scale(call)), _row_operand("dout", dout, np.float32(1)),
            _column_operand("q over queries", call.q, _scale(call)),
            _column_operand("dout over queries", dout, np.float32(1)),
            scratch("k block", over_d, np.uint16), scratch("v block", over_d, np.uint16),
            scratch("k block over keys", (workers, TERMS, D // TILE_ROWS, block_k // TILE_DEPTH,
                                          TILE_ROWS, TILE_DEPTH), np.uint16),
            tile_configuration())


def attention_forward(out, lse, call, block_q=None, block_k=None):
    """Fill out (B, H, N, D) and lse (B, H, N) for a prepared call."""
    threads = _forward_tasks.threads(_score_work(call))
    block_q = block_q or _query_block(call, threads, FORWARD_BLOCK_Q)
    block_k = block_k or BLOCK_K
    if on_tiles(call, block_k):
        _forward_on_tiles(out, lse, call, threads, block_q, block_k)
        return
    kt = _key_panels("k panels", call.k, block_k)
    with single_threaded_blas():
        _forward_tasks.run(threads, out, lse, call.q, kt, call.v, _scale(call), block_q,
                           STRIP_ROWS, _mods(call))


@sized_kernel(ROW_GRAIN, work=lambda delta, dout, out: dout.size, fastmath=FASTMATH)
def _row_delta_rows(delta, dout, out):
    B, H, N, D = dout.shape
    for t in prange(B * H):
        b, h = t // H, t % H
        for i in range(N):
            dout_row, out_row = dout[b, h, i], out[b, h, i]
            total = dout.dtype.type(0)
            for d in range(D):
                total += dout_row[d] * out_row[d]
            delta[b, h, i] = total


def _row_deltas(dout, out):
    """delta (B, H, N) = sum over d of dout * out (both (B, H, N, D)): the
    softmax backward's row term, computed once, on the threads its size pays for (NumPy's
    einsum ran it serially)."""
    delta = np.empty(dout.shape[:3], dout.dtype)
    _row_delta_rows(delta, dout, out)
    return delta


def _dq_chunks(call, block_k, threads):
    """How many key chunks each (batch, kv head) is split into, so every thread has work."""
    B, Hkv, M = call.k.shape[:3]
    wanted = -(-2 * threads // (B * Hkv))
    return max(1, min(wanted, -(-M // block_k)))


StructuredGrads = namedtuple("StructuredGrads", "distance_table x y pair_table")
StructuredGrads.__doc__ = """Outputs for the structured biases' gradients, in kernel layout:
distance_table (H, P, C), x (B, 3, N), y (B, 3, M), pair_table (H, C); None where absent."""


def _structured_parts(call, n_chunks, table_lanes=LANES, table_sets=None):
    """Zeroed per-task gradient buffers for _backward_tasks (1-element ones where unused);
    ``table_lanes`` copies of each distance-table gradient (the short-sequence attention's
    shared geometry adds into one); with ``table_sets``, that many distance-table gradients
    (sets, H, lanes, P, C), each shared by a set of tasks, rather than one per task."""
    B, H, N = call.q.shape[:3]
    Hkv, M = call.k.shape[1], call.k.shape[2]
    n_tasks, group, dtype = B * Hkv * n_chunks, H // Hkv, call.q.dtype
    distance, pair = call.distance, call.pair
    P, C = distance.table.shape[1:]
    buffers, slots = (n_tasks, group) if table_sets is None else (table_sets, H)
    if distance.has:
        dtable = np.zeros((buffers, slots, table_lanes, P, C), dtype)
        dx = np.zeros((n_chunks, Hkv, B, 3, N), dtype)
        dy = np.zeros((Hkv, B, 3, M), dtype)
    else:
        # one element per set: the short kernel splits its tasks by their count
        dtable = np.zeros((1 if table_sets is None else table_sets, 1, 1, 1, 1), dtype)
        dx, dy = np.zeros((1, 1, 1, 3, 1), dtype), np.zeros((1, 1, 3, 1), dtype)
    n_codes = pair.table.shape[1]
    dpair = np.zeros((n_tasks, group, LANES, n_codes) if pair.mode != NO_PAIR else (1, 1, 1, 1),
                     dtype)
    return dtable, dpair, dx, dy


def _sum_structured_parts(grads, parts, call):
    """Add each task's part into the outputs, in a fixed order (deterministic)."""
    B, H = call.q.shape[:2]
    Hkv = call.k.shape[1]
    dtable, dpair, dx, dy = parts
    if grads.distance_table is not None:
        # task t = (b * Hkv + hk) * n_chunks + chunk holds heads hk * group ... for batch b
        per_task = dtable.reshape(B, Hkv, -1, *dtable.shape[1:])
        grads.distance_table[...] = per_task.sum(axis=(0, 2, 4)).reshape(H, *dtable.shape[3:])
        grads.x[...] = dx.sum(axis=(0, 1))
        grads.y[...] = dy.sum(axis=0)
    if grads.pair_table is not None:
        per_task = dpair.reshape(B, Hkv, -1, *dpair.shape[1:])
        grads.pair_table[...] = per_task.sum(axis=(0, 2, 4)).reshape(H, -1)


def attention_backward(dq, dk, dv, structured, dout, out, lse, call, block_q=BLOCK_Q,
                       block_k=BLOCK_K):
    """Fill dq, dk, dv and the :class:`StructuredGrads` ``structured`` (its arrays not None
    where the call has that bias) for a prepared call, given the forward's out and lse."""
    threads = _backward_tasks.threads(_score_work(call))
    n_chunks = _dq_chunks(call, block_k, threads)
    if n_chunks == 1:
        dq[...] = 0
        dq_parts = dq.reshape((1,) + dq.shape)
    else:
        dq_parts = np.zeros((n_chunks,) + dq.shape, dq.dtype)
    parts = _structured_parts(call, n_chunks)
    tiles = _backward_operands(call, dout, block_k, threads)
    if tiles is None:
        kt, vt = _key_panels("k panels", call.k, block_k), _key_panels("v panels", call.v, block_k)
    else:
        kt = vt = _no_key_panels(call.k, block_k)
    with single_threaded_blas():
        _backward_tasks.run(threads, dq_parts, dk, dv, parts, dout, lse, _row_deltas(dout, out),
                            call.q, call.k, call.v, kt, vt, _scale(call), block_q, _mods(call),
                            tiles, threads)
    if n_chunks > 1:
        np.sum(dq_parts, axis=0, out=dq)
    if tiles is not None:  # the tiles' dQ is dS k, without the scale
        dq *= _scale(call)
    _sum_structured_parts(structured, parts, call)


def attention_bias_grad(dbias, dout, out, lse, call, block_q=BLOCK_Q, block_k=BLOCK_K):
    """Fill dbias, shaped like call.bias (4-D, broadcast dims of size 1)."""
    threads = _bias_grad_tasks.threads(_score_work(call))
    with single_threaded_blas():
        _bias_grad_tasks.run(threads, dbias, dout, lse, _row_deltas(dout, out), call.q,
                             _key_panels("k panels", call.k, block_k),
                             _key_panels("v panels", call.v, block_k), call.k.shape[2],
                             _scale(call), block_q, _mods(call))


def attention_weights(weights, call, block_q=None):
    """Fill weights (B, H, N, M) with the attention probabilities."""
    threads = _weights_tasks.threads(_score_work(call))
    block_q = block_q or _query_block(call, threads, BLOCK_Q)
    with single_threaded_blas():
        _weights_tasks.run(threads, weights, call.q, _key_panels("k panels", call.k, BLOCK_K),
                           _scale(call), block_q, _mods(call))
