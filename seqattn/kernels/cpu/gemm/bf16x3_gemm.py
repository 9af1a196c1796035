"""Float32 products on AMX tiles, at float32 accuracy: each float32 x is split exactly into three
bf16 terms, x = hi + mid + lo (8 significant bits each), and a b is the sum of the six products
of terms whose weights reach 2^-16: hi hi, hi mid, mid hi, hi lo, mid mid, lo hi (what is left
out is below float32's rounding). Each term product is exact in TDPBF16PS's float32
accumulator, so a product costs six tile products, and still runs at 2.7 times AVX-512's float32
FMA peak: :func:`product_32x32` ran a 32 x 512 x 64 score product at 334-370 GFLOP/s on one
core of an Intel Xeon (Sapphire Rapids class), where the AVX-512 register kernel's ceiling is
167-177, with an error below float32 SGEMM's.

Operand layouts (``uint16`` arrays holding bf16 bits, the three terms stacked on axis 0):
* a (the left operand): rows of bf16, any row stride; a tile is 16 rows x 32 depth.
* b (the right operand): tiles of 16 depth pairs x 16 columns x 2, each tile contiguous
  (1 KiB), as TDPBF16PS reads them; :func:`keys_as_columns` and :func:`rows_as_depth` build them
  from the two ways attention uses k and v.
The split truncates: hi keeps x's top 16 bits, mid those of x - hi (exact in float32), lo those
of x - hi - mid, which has at most 8 significant bits left, so the three add up to x exactly
(inputs below 2^-110 lose their lo term, as the tiles flush bf16 subnormals)."""
import numpy as np
from llvmlite import ir
from numba import prange, types
from numba.core import cgutils
from numba.extending import intrinsic

from .amx_tiles import (TILE_ELEMENTS, TILE_ROWS, tile_dot_bf16, tile_load, tile_store,
                        tile_zero)
from ..jit_options import njit
from ..llvm_vectors import AVX512, F32, I32, LANES, VEC, declare, splat, unit_stride_row, vector_at
from .register_gemm import transpose
from ..softmax_rows import vector_exp
from ..threads import sized_kernel

TERMS = 3
TILE_DEPTH = 32  # bf16 values along the depth of a tile
# Elements split per thread: a pass over memory, as attention's transposes of k and v.
SPLIT_GRAIN = 2 ** 18


@intrinsic
def truncated(typingctx, x):
    """The float32 x with the low 16 bits of its significand cleared: a bf16 value."""
    if x != types.float32:
        return None

    def codegen(context, builder, signature, args):
        bits = builder.bitcast(args[0], ir.IntType(32))
        high = builder.and_(bits, ir.Constant(ir.IntType(32), 0xFFFF0000))
        return builder.bitcast(high, ir.FloatType())

    return types.float32(x), codegen


@intrinsic
def bf16_bits(typingctx, x):
    """The top 16 bits of the float32 x (the bf16 of :func:`truncated`), as uint16."""
    if x != types.float32:
        return None

    def codegen(context, builder, signature, args):
        bits = builder.bitcast(args[0], ir.IntType(32))
        return builder.trunc(builder.lshr(bits, ir.Constant(ir.IntType(32), 16)),
                             ir.IntType(16))

    return types.uint16(x), codegen


@njit(inline="always")
def split_terms(x):
    """(hi, mid, lo): the bf16 bits of the three terms of the float32 x."""
    hi = truncated(x)
    rest = x - hi
    mid = truncated(rest)
    return bf16_bits(hi), bf16_bits(mid), bf16_bits(rest - mid)


@njit(cache=True)
def aligned_empty(size, dtype):
    """An uninitialised 1-D array of ``size`` elements whose first lies on a 64-byte boundary:
    a tile row that straddles two cache lines loads at half the rate (a 32 x 512 x 64 score
    product 225 GFLOP/s with k's tiles 16 bytes off, 334 aligned; 1 thread, Intel Xeon)."""
    memory = np.empty(size + 64, dtype)
    first = (-memory.ctypes.data) % 64 // memory.itemsize
    return memory[first:first + size]


PAIR = 2 * LANES  # floats a step of the row splits takes: two vectors, one packed store per term


def _store_terms(builder, values, term_rows, at):
    """Store the three terms of the 32 floats in ``values`` (two <16 x float>) at element ``at``
    of the uint16 rows ``term_rows`` (hi, mid, lo data pointers). The bf16 bits are the high
    halves of each float's word; one shuffle (vpermt2w) packs those of both vectors into 32
    halves, where truncating each vector to <16 x i16> took two vpmovdw and two shifts: a
    32 x 512 strip of probabilities split in 2.8 us against 3.5 (1 thread, Intel Xeon)."""
    words = ir.VectorType(I32, LANES)
    halves = ir.VectorType(ir.IntType(16), PAIR)
    high_half = ir.Constant(words, [0xFFFF0000] * LANES)
    odd_halves = ir.Constant(ir.VectorType(I32, PAIR), list(range(1, 2 * PAIR, 2)))
    rest = values
    for row in term_rows:
        bits = [builder.and_(builder.bitcast(v, words), high_half) for v in rest]
        rest = [builder.fsub(v, builder.bitcast(b, VEC)) for v, b in zip(rest, bits)]
        packed = builder.shuffle_vector(builder.bitcast(bits[0], halves),
                                        builder.bitcast(bits[1], halves), odd_halves)
        builder.store(packed, builder.bitcast(builder.gep(row, [at]), halves.as_pointer()),
                      align=2)


def _row_into_terms_codegen(exponentiate):
    """Code for a row x (contiguous float32, a multiple of PAIR long) into the terms rows hi,
    mid, lo, its elements in [first, stop) only (zero elsewhere): of x times a scale, or with
    ``exponentiate``, of exp(x - shift) (vector_exp), and the row's sum of them returned. The
    pairs of vectors that the window's edges cut are masked, those inside it are not."""
    def codegen(context, builder, signature, args):
        hi, mid, lo, x = (context.make_array(t)(context, builder, v)
                          for t, v in zip(signature.args[:4], args[:4]))
        first, stop = args[4], args[5]
        n = builder.extract_value(x.shape, 0)
        intp = n.type
        pair = ir.Constant(intp, PAIR)
        zero = cgutils.get_null_value(VEC)
        total = cgutils.alloca_once_value(builder, zero)
        shift_or_scale = splat(builder, args[6], VEC)
        index_type = ir.VectorType(intp, LANES)

        def pairs(start, end, masked):
            with cgutils.for_range_slice(builder, start, end, pair, intp) as (c, _):
                values = []
                for half in range(2):
                    at = builder.add(c, ir.Constant(intp, half * LANES))
                    v = builder.load(vector_at(builder, x.data, at), align=4)
                    if exponentiate:
                        v = vector_exp(builder, builder.fsub(v, shift_or_scale), AVX512)
                    else:
                        v = builder.fmul(v, shift_or_scale)
                    if masked:
                        index = builder.add(splat(builder, at, index_type),
                                            ir.Constant(index_type, list(range(LANES))))
                        keep = builder.and_(
                            builder.icmp_signed(">=", index, splat(builder, first, index_type)),
                            builder.icmp_signed("<", index, splat(builder, stop, index_type)))
                        v = builder.select(keep, v, zero)
                    if exponentiate:
                        builder.store(builder.fadd(builder.load(total), v), total)
                    values.append(v)
                _store_terms(builder, values, (hi.data, mid.data, lo.data), c)

        def clamp(value):
            return builder.select(builder.icmp_signed("<", value, n), value, n)

        # [0, inside): pairs the window's first edge cuts; [inside, outside): whole pairs in it
        inside = clamp(builder.mul(builder.sdiv(builder.add(first, ir.Constant(intp, PAIR - 1)),
                                                pair), pair))
        whole_end = builder.mul(builder.sdiv(stop, pair), pair)
        outside = builder.select(builder.icmp_signed("<", whole_end, inside), inside,
                                 clamp(whole_end))
        pairs(ir.Constant(intp, 0), inside, True)
        pairs(inside, outside, False)
        pairs(outside, n, True)
        if not exponentiate:
            return context.get_dummy_value()
        reduce_add = declare(builder.module, "llvm.vector.reduce.fadd.v16f32", F32, [F32, VEC])
        return builder.call(reduce_add, [ir.Constant(F32, 0.0), builder.load(total)])

    return codegen


def _term_rows_and_row(hi, mid, lo, x):
    return (all(isinstance(a, types.Array) and a.ndim == 1 and a.layout == "C"
                for a in (hi, mid, lo)) and isinstance(x, types.Array) and x.ndim == 1
            and x.layout == "C" and x.dtype == types.float32)


@intrinsic
def _split_row(typingctx, hi, mid, lo, x, first, stop, scale):
    """hi, mid, lo[:len(x)] = the terms of scale times x's elements in [first, stop), zero
    elsewhere (in vectors: Numba's own loop over the elements was not vectorised)."""
    if not (_term_rows_and_row(hi, mid, lo, x) and scale == types.float32):
        return None
    return (types.void(hi, mid, lo, x, types.intp, types.intp, types.float32),
            _row_into_terms_codegen(False))


@intrinsic
def _exp_split_row(typingctx, hi, mid, lo, x, first, stop, shift):
    """hi, mid, lo[:len(x)] = the terms of exp(x - shift) for x's elements in [first, stop),
    zero elsewhere; returns their sum."""
    if not (_term_rows_and_row(hi, mid, lo, x) and shift == types.float32):
        return None
    return (types.float32(hi, mid, lo, x, types.intp, types.intp, types.float32),
            _row_into_terms_codegen(True))


@njit(cache=True)
def split_probabilities(terms, row, x, first, stop):
    """terms[:, row, :len(x)] = the three terms of x[first:stop] (contiguous float32; len(x) a
    multiple of PAIR), zero outside it: a row of probabilities as a left operand whose keys
    outside [first, stop) add nothing."""
    _split_row(terms[0, row], terms[1, row], terms[2, row], x, first, stop, np.float32(1))


@njit(cache=True)
def exp_split_probabilities(terms, row, x, shift, first, stop):
    """terms[:, row, :len(x)] = the three terms of exp(x[first:stop] - shift) (x contiguous
    float32, len(x) a multiple of PAIR), zero outside it; returns their sum. The online
    softmax's exp and the split of P in one pass: the probabilities are never stored as floats.
    What that saves is the strip's floats written to L2 and read back: the forward at B 1 H 8
    N 1024 D 64 took 8.15-8.33 ms against 8.50-8.75 (2 threads, Intel Xeon, Sapphire Rapids
    class), while on a strip in L1 alone the one pass was no faster (4.7 us against 4.4)."""
    return _exp_split_row(terms[0, row], terms[1, row], terms[2, row], x, first, stop,
                          np.float32(shift))


@sized_kernel(SPLIT_GRAIN, work=lambda terms, x, scale: x.size)
def split_rows(terms, x, scale):
    """terms (3, B, H, R, D): the terms of scale * x (B, H, N, D), rows N .. R - 1 zero (a
    left operand padded to whole tiles)."""
    B, H, N, D = x.shape
    R = terms.shape[3]
    for t in prange(B * H):
        b, h = t // H, t % H
        for n in range(R):
            for d in range(D):
                value = scale * x[b, h, n, d] if n < N else np.float32(0)
                terms[0, b, h, n, d], terms[1, b, h, n, d], terms[2, b, h, n, d] = \
                    split_terms(value)


@sized_kernel(SPLIT_GRAIN, work=lambda terms, x, scale: x.size)
def split_columns(terms, x, scale):
    """terms (3, B, H, D, R): the terms of scale * x (B, H, N, D) transposed, so that its rows
    are x's columns over the N rows, columns N .. R - 1 zero (a left operand whose depth is
    x's rows)."""
    B, H, N, D = x.shape
    R = terms.shape[4]
    for t in prange(B * H):
        b, h = t // H, t % H
        columns = np.zeros((D, R), np.float32)
        transpose(columns[:, :N], x[b, h])
        for d in range(D):
            # a row of the terms is contiguous, whatever view of them this is
            _split_row(unit_stride_row(terms[0, b, h, d]), unit_stride_row(terms[1, b, h, d]),
                       unit_stride_row(terms[2, b, h, d]), columns[d], 0, R, scale)


@njit(cache=True)
def split_rows_into(terms, x, first, count, scale):
    """terms[:, r, :] = the terms of scale * x[first + r] for r < count (rows of PAIR-float
    multiples), zero for the rows past count: a block of operand rows, split in vectors."""
    width = terms.shape[2]
    for r in range(terms.shape[1]):
        if r < count:
            _split_row(terms[0, r], terms[1, r], terms[2, r], x[first + r], 0, width, scale)
        else:
            terms[:, r, :] = 0


@sized_kernel(SPLIT_GRAIN, work=lambda tiles, x: x.size)
def keys_as_columns(tiles, x):
    """tiles (3, B, H, R // 16, D // 32, 16, 32): x (B, H, M, D) as the right operand of
    a @ x^T (a product over D; x's rows are its columns, rows M .. R - 1 zero). Tile (c, s)
    holds columns 16 c .. 16 c + 15 over depth 32 s .. 32 s + 31: its row p holds, for each
    column, depth 2 p and 2 p + 1, one 32-bit word of x's split row; so the tiles are 16 x 16
    transposes of the words of 16 split rows."""
    B, H, M, D = x.shape
    n_columns, n_depth = tiles.shape[3], tiles.shape[4]
    for t in prange(B * H * n_columns):
        b, h, c = t // (H * n_columns), t // n_columns % H, t % n_columns
        terms = np.empty((TERMS, TILE_ROWS, D), np.uint16)
        split_rows_into(terms, x[b, h], c * TILE_ROWS, min(TILE_ROWS, M - c * TILE_ROWS),
                        np.float32(1))
        words = terms.view(np.uint32)
        for term in range(TERMS):
            out = tiles[term, b, h, c].view(np.uint32)
            for s in range(n_depth):
                for pair in range(TILE_ROWS):
                    for col in range(TILE_ROWS):
                        out[s, pair, col] = words[term, col, s * TILE_ROWS + pair]


# On the calling thread: for tasks of a parallel kernel that split their own operands.
keys_as_columns_serial = keys_as_columns.serial


@intrinsic
def _split_pair_row(typingctx, tiles, at, term_bytes, even, odd, column):
    """The terms of even[column:column + 16] and odd[column:column + 16] (contiguous float32
    rows) as 16 VNNI depth pairs: 32 uint16 at byte ``at`` of the array ``tiles`` (any layout),
    the next term term_bytes further on. The split and the interleave in one pass, in vectors:
    the bf16 of a float is its word's high half, so a pair's word is the even float's high
    half shifted down, or'ed with the odd float's high half in place."""
    rows_ok = all(isinstance(a, types.Array) and a.ndim == 1 and a.layout == "C"
                  and a.dtype == types.float32 for a in (even, odd))
    if not (rows_ok and isinstance(tiles, types.Array) and tiles.dtype == types.uint16):
        return None

    def codegen(context, builder, signature, args):
        tiles_a = context.make_array(signature.args[0])(context, builder, args[0])
        even_a, odd_a = (context.make_array(t)(context, builder, v)
                         for t, v in zip(signature.args[3:5], args[3:5]))
        words = ir.VectorType(I32, LANES)
        high_half = ir.Constant(words, [0xFFFF0000] * LANES)
        rest = [builder.load(vector_at(builder, row.data, args[5]), align=4)
                for row in (even_a, odd_a)]
        target = builder.gep(builder.bitcast(tiles_a.data, ir.IntType(8).as_pointer()), [args[1]])
        for term in range(TERMS):
            bits = [builder.and_(builder.bitcast(v, words), high_half) for v in rest]
            rest = [builder.fsub(v, builder.bitcast(b, VEC)) for v, b in zip(rest, bits)]
            pairs = builder.or_(builder.lshr(bits[0], ir.Constant(words, [16] * LANES)), bits[1])
            at_term = builder.gep(target, [builder.mul(args[2], ir.Constant(args[2].type, term))])
            builder.store(pairs, builder.bitcast(at_term, words.as_pointer()), align=4)
        return context.get_dummy_value()

    return types.void(tiles, types.intp, types.intp, even, odd, types.intp), codegen


@njit(cache=True)
def pairs_as_depth(tiles, x, first, count, column):
    """tiles (3, C // 16, S, 16, 32) = x's rows [first, first + count) (zero past them, to
    S x 32 rows) as the right operand of a product over those rows, its columns x's columns
    [column, column + C): row p of tile (c, s) interleaves rows 32 s + 2 p and 32 s + 2 p + 1
    (:func:`_split_pair_row`). A tile row is contiguous in any view of the tiles. In one pass
    with the split, the interleave made :func:`rows_as_depth` of 8192 x 1024 floats take
    4.1-4.2 ms against 5.8-6.1 (2 threads), 4096 x 128 on one thread 268-272 us against 320-325
    (Intel Xeon, Sapphire Rapids class)."""
    zeros = np.zeros(x.shape[1], np.float32)
    term_bytes, column_bytes, step_bytes, pair_bytes = tiles.strides[:4]
    for s in range(tiles.shape[2]):
        for pair in range(TILE_ROWS):
            r = s * TILE_DEPTH + 2 * pair
            # rows of a padded 2-D x (layout "A") have unit stride too
            even = unit_stride_row(x[first + r]) if r < count else zeros
            odd = unit_stride_row(x[first + r + 1]) if r + 1 < count else zeros
            at = s * step_bytes + pair * pair_bytes
            for c in range(tiles.shape[1]):
                _split_pair_row(tiles, at + c * column_bytes, term_bytes, even, odd,
                                column + c * TILE_ROWS)


@sized_kernel(SPLIT_GRAIN, work=lambda tiles, x: x.size)
def rows_as_depth(tiles, x):
    """tiles (3, B, H, D // 16, R // 32, 16, 32): x (B, H, M, D) as the right operand of
    p @ x (a product over M, rows M .. R - 1 zero): :func:`pairs_as_depth` 32 rows at a
    time."""
    B, H, M, D = x.shape
    n_depth = tiles.shape[4]
    for t in prange(B * H * n_depth):
        b, h, s = t // (H * n_depth), t // n_depth % H, t % n_depth
        pairs_as_depth(tiles[:, b, h, :, s:s + 1], x[b, h], s * TILE_DEPTH,
                       min(TILE_DEPTH, M - s * TILE_DEPTH), 0)


rows_as_depth_serial = rows_as_depth.serial  # as keys_as_columns_serial


@njit(cache=True)
def product_32x32(c, c_at, c_row_bytes, accumulate, a, a_at, a_row_bytes, b, b_at,
                  b_column_step, depth_steps):
    """A 32 x 32 float32 block of c (rows c_row_bytes apart, from element c_at) = (or += when
    accumulate) a[:, rows] @ b over depth_steps x 32 depth, in six tile products per term
    pair. a: (3, ...) term rows from element a_at, a_row_bytes apart; b: (3, ...) tiles from
    element b_at, the next column block b_column_step elements on, depth steps contiguous.

    Tiles 0-3 hold c's four 16 x 16 blocks for the whole depth, 4-5 a's two row blocks and 6-7
    b's two column blocks: a term of a stays in its tiles while the terms of b it meets go by,
    18 tile loads for 24 products."""
    a_term, b_term = a[0].size, b[0].size
    c_next_rows = TILE_ROWS * (c_row_bytes // 4)
    a_next_rows = TILE_ROWS * (a_row_bytes // 2)
    if accumulate:
        tile_load(0, c, c_at, c_row_bytes)
        tile_load(1, c, c_at + TILE_ROWS, c_row_bytes)
        tile_load(2, c, c_at + c_next_rows, c_row_bytes)
        tile_load(3, c, c_at + c_next_rows + TILE_ROWS, c_row_bytes)
    else:
        tile_zero(0)
        tile_zero(1)
        tile_zero(2)
        tile_zero(3)
    for s in range(depth_steps):
        a_s = a_at + s * TILE_DEPTH
        b_s = b_at + s * TILE_ELEMENTS
        for a_index in range(TERMS):
            a_first = a_s + a_index * a_term
            tile_load(4, a, a_first, a_row_bytes)
            tile_load(5, a, a_first + a_next_rows, a_row_bytes)
            # a's term i meets b's terms 0 .. 2 - i: the pairs whose weights reach 2^-16
            for b_index in range(TERMS - a_index):
                b_first = b_s + b_index * b_term
                tile_load(6, b, b_first, 64)
                tile_load(7, b, b_first + b_column_step, 64)
                tile_dot_bf16(0, 4, 6)
                tile_dot_bf16(1, 4, 7)
                tile_dot_bf16(2, 5, 6)
                tile_dot_bf16(3, 5, 7)
    tile_store(0, c, c_at, c_row_bytes)
    tile_store(1, c, c_at + TILE_ROWS, c_row_bytes)
    tile_store(2, c, c_at + c_next_rows, c_row_bytes)
    tile_store(3, c, c_at + c_next_rows + TILE_ROWS, c_row_bytes)
