"""c = alpha * a @ b (+ c): a register-blocked float32 matrix product for attention tiles.

SciPy's OpenBLAS ran the products of an attention tile (a 256 x 512 score tile with an inner
dimension of 64, then 256 x 64 x 512) slower than this kernel on one core of an Intel Xeon
(Emerald Rapids): at an inner dimension of 64 OpenBLAS spends much of each call packing its
operands, which here are already laid out for the kernel (``benchmarks/blas.py``; BENCHMARKS.md,
"Attention tiles: register-blocked products").

The kernel holds a block of 12 rows x 2 vectors of 16 floats of c in 24 AVX-512 registers, and
for each step k of the inner dimension loads the 2 vectors of b's row k once and multiplies them
by each of the 12 broadcast values a[r, k]: 24 fused multiply-adds per 14 loads, of which only
b's 128 bytes come from L2, so the arithmetic units, not the loads, set the pace.
The block is written in LLVM IR (explicit <16 x float> vectors and llvm.fma), since a loop in
Python cannot keep 24 accumulators in registers; column tails use masked loads and stores, and
the last rows take blocks of 6, 3 and 1 rows. ``register_gemm_lane_max`` also keeps each row's
maximum from the block's registers, for the softmax of the attention forward, at less than
half the cost of a second pass over the row (same section).

Layout: b and c must have unit stride along their last axis (rows of C-contiguous arrays and
their row or column slices do); a may have any strides, so a transposed view (``p.T``) is read
without a copy. On a CPU with AVX2 and FMA but not AVX-512 (16 registers of 8 floats), where
24 accumulators would spill, the blocks are 6 rows x 16 floats (12 registers), and a plain
product of a large transposed a goes to BLAS; there the attention forward, and a forward with its
backward, ran faster than with OpenBLAS's products (``benchmarks/attention.py``; BENCHMARKS.md,
"CPUs with AVX2 but not AVX-512"). Elsewhere,
and for float64, the products are BLAS's. The choice is made once, from the features of the CPU
that Numba compiles for.
"""
import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic, overload

from .blas_gemm import gemm
from ..called_by_name import called_by_name
from ..jit_options import CACHED, njit
from ..softmax_rows import exp_shifted, softmax_grad_row, vector_exp
from ..llvm_vectors import (AVX512, F32, I32, LANES, TARGET_FEATURES, VEC, declare,
                           has_avx2_fma, has_avx512, lanes_below, masked_load, masked_store, splat,
                           vector_at)


# What the product does with its values before storing them (without accumulate), given per-row
# operands rows[r] and, for SOFTMAX_GRAD, a tile p laid out as c:
#   PLAIN         c = alpha a b
#   LANE_MAX      c = alpha a b, and rows (R, LANES) grows to the row maxima (lane by lane)
#   EXP_SHIFTED   c = exp(alpha a b - rows[r])            (the attention backward's P from lse)
#   SOFTMAX_GRAD  c = p * (alpha a b - rows[r])            (its dS = P * (dP - delta))
# The last two save the backward a pass over each score tile apiece, the values being in
# registers when the product has them.
PLAIN, LANE_MAX, EXP_SHIFTED, SOFTMAX_GRAD = 0, 1, 2, 3


def _grow_lane_max(builder, lane_max_addr, values, masks, R, vectors, lanes=LANES):
    """lane_max[r] = max(lane_max[r], the block's values of row r), lanes past the product's
    columns (off in masks) left out: the row maxima while the values are in registers.
    ``lanes``: the floats of the block's vectors (the first ones of each LANES-wide row of
    lane_max).

    On AVX-512, its max merge-masked: one instruction per vector, where llvm.maxnum's NaN rules
    took three and the masking a fourth. On AVX2 a compare and select, which x86's max is. The
    scores hold no NaN (the ops turn NaN in data into masks)."""
    if AVX512:
        avx512_max = declare(builder.module, "llvm.x86.avx512.max.ps.512", VEC, [VEC, VEC, I32])

        def maximum(x, y):
            return builder.call(avx512_max, [x, y, ir.Constant(I32, CURRENT)])
    else:
        def maximum(x, y):
            return builder.select(builder.fcmp_ordered(">", x, y), x, y)
    rows = builder.inttoptr(lane_max_addr, F32.as_pointer())
    for r in range(R):
        at = vector_at(builder, rows, ir.Constant(lane_max_addr.type, LANES * r), lanes)
        best = builder.load(at, align=4)
        for w in range(vectors):
            grown = maximum(values[(r, w)], best)
            best = builder.select(masks[w], grown, best)
        builder.store(best, at, align=4)


# The rounding argument of AVX-512 intrinsics: the current mode (no embedded rounding).
CURRENT = 4


def _emit_block(context, builder, signature, args, R, vectors, full, lanes, first_column=0):
    """The IR of one block of exactly R rows and the columns [first_column, first_column +
    lanes * vectors) of at most n, in vectors of ``lanes`` floats: c = f(alpha * a @ b) (+ c
    when accumulate), given addresses and strides in elements: (c, c_row, a, a_row, a_step, b,
    b_row, n, depth, alpha, accumulate, epilogue, rows, other). Without accumulate,
    ``epilogue`` picks f (see EPILOGUES): rows is the address of the block's first row of
    per-row operands, other that of the block's first value of a tile laid out as c
    (SOFTMAX_GRAD's p), each 0 where unused. ``full``: exactly lanes * vectors columns (the
    caller guarantees it), loaded and stored without masks."""
    c_addr, c_row, a_addr, a_row, a_step, b_addr, b_row, n, depth = args[:9]
    alpha_value = context.cast(builder, args[9], signature.args[9], types.float32)
    accumulate_flag = context.cast(builder, args[10], signature.args[10], types.boolean)
    epilogue_kind, rows_addr, other_addr = args[11:14]
    module = builder.module
    vector, mask_type = ir.VectorType(F32, lanes), ir.VectorType(ir.IntType(1), lanes)
    fma = declare(module, f"llvm.fma.v{lanes}f32", vector, [vector, vector, vector])
    load, store = masked_load(module, lanes), masked_store(module, lanes)
    intp = context.get_value_type(types.intp)

    def const(value):
        return ir.Constant(intp, value)

    def kind_is(kind):
        return builder.icmp_signed("==", epilogue_kind, const(kind))

    if first_column:
        shift = ir.Constant(c_addr.type, first_column * _BYTES)
        c_addr, b_addr, other_addr = (builder.add(x, shift) for x in (c_addr, b_addr,
                                                                      other_addr))
        # LANE_MAX's rows hold one lane per column of a LANES-wide block: this block's
        # lanes start first_column in; the other epilogues' hold one value per row
        rows_addr = builder.add(rows_addr, builder.select(
            kind_is(LANE_MAX), shift, ir.Constant(rows_addr.type, 0)))
        n = builder.sub(n, const(first_column))
    c_data, a_data, b_data, other_data, row_data = (
        builder.inttoptr(x, F32.as_pointer())
        for x in (c_addr, a_addr, b_addr, other_addr, rows_addr))

    zero = cgutils.get_null_value(vector)
    align = ir.Constant(I32, 4)
    if full:
        masks = [ir.Constant(mask_type, [1] * lanes)] * vectors

        def load_vector(at, mask):
            return builder.load(at, align=4)

        def store_vector(value, at, mask):
            builder.store(value, at, align=4)
    else:
        masks = [lanes_below(builder, builder.sub(n, const(lanes * w)), lanes)
                 for w in range(vectors)]

        def load_vector(at, mask):
            return builder.call(load, [at, align, mask, zero])

        def store_vector(value, at, mask):
            builder.call(store, [value, at, align, mask])

    entry = builder.basic_block
    loop = builder.append_basic_block("block.loop")
    done = builder.append_basic_block("block.done")
    builder.cbranch(builder.icmp_signed(">", depth, const(0)), loop, done)
    builder.position_at_end(loop)
    k = builder.phi(intp)
    k.add_incoming(const(0), entry)
    acc = [[builder.phi(vector) for _ in range(vectors)] for _ in range(R)]
    for row in acc:
        for phi in row:
            phi.add_incoming(zero, entry)
    b_at = builder.mul(k, b_row)
    b_vectors = [load_vector(vector_at(builder, b_data, builder.add(b_at, const(lanes * w)),
                                       lanes), masks[w])
                 for w in range(vectors)]
    a_at = builder.mul(k, a_step)
    summed = []
    for r in range(R):
        x = builder.load(builder.gep(a_data, [builder.add(builder.mul(const(r), a_row),
                                                          a_at)]))
        xs = splat(builder, x, vector)
        summed.append([builder.call(fma, [xs, b_vectors[w], acc[r][w]])
                       for w in range(vectors)])
    k_next = builder.add(k, const(1))
    loop_end = builder.basic_block
    k.add_incoming(k_next, loop_end)
    for r in range(R):
        for w in range(vectors):
            acc[r][w].add_incoming(summed[r][w], loop_end)
    builder.cbranch(builder.icmp_signed("<", k_next, depth), loop, done)
    builder.position_at_end(done)
    totals = []
    for r in range(R):
        for w in range(vectors):
            total = builder.phi(vector)  # phis first: LLVM wants them on top
            total.add_incoming(zero, entry)
            total.add_incoming(summed[r][w], loop_end)
            totals.append((r, w, total))
    scale = splat(builder, alpha_value, vector)

    def offset_of(r, w):
        return builder.add(builder.mul(const(r), c_row), const(lanes * w))

    def row_operand(r):
        return splat(builder, builder.load(builder.gep(row_data, [const(r)])), vector)

    def store_all(finish):
        """c's block = finish(r, w, alpha * total); the values stored, by (r, w)."""
        values = {}
        for r, w, total in totals:
            value = finish(r, w, builder.fmul(total, scale))
            store_vector(value, vector_at(builder, c_data, offset_of(r, w), lanes), masks[w])
            values[(r, w)] = value
        return values

    def added_to_c(r, w, value):
        old = load_vector(vector_at(builder, c_data, offset_of(r, w), lanes), masks[w])
        return builder.fadd(value, old)

    def exp_shifted(r, w, value):
        return vector_exp(builder, builder.fsub(value, row_operand(r)), AVX512)

    def softmax_grad(r, w, value):
        p = load_vector(vector_at(builder, other_data, offset_of(r, w), lanes), masks[w])
        return builder.fmul(p, builder.fsub(value, row_operand(r)))

    with builder.if_else(accumulate_flag) as (then, otherwise):
        with then:
            store_all(added_to_c)
        with otherwise:
            with builder.if_else(kind_is(EXP_SHIFTED)) as (exp_branch, rest):
                with exp_branch:
                    store_all(exp_shifted)
                with rest:
                    with builder.if_else(kind_is(SOFTMAX_GRAD)) as (grad_branch, plain):
                        with grad_branch:
                            store_all(softmax_grad)
                        with plain:
                            values = store_all(lambda r, w, value: value)
                            with builder.if_then(kind_is(LANE_MAX)):
                                _grow_lane_max(builder, rows_addr, values, masks, R, vectors,
                                               lanes)


def _block_signature(c, c_row, a, a_row, a_step, b, b_row, n, depth, alpha, accumulate,
                     epilogue, rows, other):
    """The blocks' signature: they return nothing."""
    return types.none(c, c_row, a, a_row, a_step, b, b_row, n, depth, alpha, accumulate,
                      epilogue, rows, other)


def _block_product(R, vectors, full=False):
    """An intrinsic for one block of exactly R rows and at most LANES * vectors columns
    (:func:`_emit_block`'s arguments and ``full``)."""
    @intrinsic
    def block_product(typingctx, c, c_row, a, a_row, a_step, b, b_row, n, depth, alpha,
                      accumulate, epilogue, rows, other):
        def codegen(context, builder, signature, args):
            _emit_block(context, builder, signature, args, R, vectors, full, LANES)
            return context.get_dummy_value()

        return _block_signature(c, c_row, a, a_row, a_step, b, b_row, n, depth, alpha,
                                accumulate, epilogue, rows, other), codegen

    return block_product


def _half_blocks_product(R):
    """AVX2's narrow block: exactly R rows and at most LANES columns, in vectors of LANES / 2
    floats (one register each), the first LANES / 2 columns unmasked where n reaches them.
    The masked stores of AVX2 are microcode on AMD's Zen cores, and a LANES-wide vector
    over a head dim of 8 did twice the multiply-adds it needed."""
    half = LANES // 2

    @intrinsic
    def half_blocks_product(typingctx, c, c_row, a, a_row, a_step, b, b_row, n, depth, alpha,
                            accumulate, epilogue, rows, other):
        def codegen(context, builder, signature, args):
            n = args[7]
            with builder.if_else(builder.icmp_signed(">=", n, ir.Constant(n.type, half))) as (
                    whole, part):
                with whole:
                    _emit_block(context, builder, signature, args, R, 1, True, half)
                    with builder.if_then(builder.icmp_signed(">", n, ir.Constant(n.type, half))):
                        _emit_block(context, builder, signature, args, R, 1, False, half,
                                    first_column=half)
                with part:
                    _emit_block(context, builder, signature, args, R, 1, False, half)
            return context.get_dummy_value()

        return _block_signature(c, c_row, a, a_row, a_step, b, b_row, n, depth, alpha,
                                accumulate, epilogue, rows, other), codegen

    return half_blocks_product


# The block shapes per CPU. AVX-512 (32 registers of 16 floats): 12 rows x 2 vectors, which
# measured 1.0-1.45x faster than 6 rows x 4 vectors on the tile products (single-threaded,
# Intel Xeon): per step of k it loads half as much of b, the operand that streams from L2, for
# the same 24 multiply-adds. AVX2 with FMA (16 registers of 8 floats; LLVM splits each
# <16 x float> in two): 6 rows x 1 vector, 12 accumulators, b's two halves and a broadcast,
# loaded without masks (AVX2's masked loads took the mask out of registers on every step, and
# the accumulators spilled: 45 GFLOP/s against 74-84 unmasked, 6 x 16 blocks on 240 x 512 x 64
# to 240 x 64 x 512, 1 thread, AMD EPYC Zen 3). Rows past the last full block take smaller
# blocks, columns past the last full block masked ones.
if AVX512:
    ROWS, VECTORS, TAIL_ROWS = 12, 2, (6, 3, 1)
else:
    ROWS, VECTORS, TAIL_ROWS = 6, 1, (3, 2, 1)
WIDE = VECTORS * LANES
# Full blocks (all WIDE columns) and narrow ones (at most LANES columns, masked), by rows.
_FULL = tuple(_block_product(R, VECTORS, full=not AVX512) for R in (ROWS, *TAIL_ROWS))
_NARROW = tuple(_block_product(R, 1) if AVX512 else _half_blocks_product(R)
                for R in (ROWS, *TAIL_ROWS))
_FULL_R0, _FULL_R1, _FULL_R2, _FULL_R3 = _FULL
_NARROW_R0, _NARROW_R1, _NARROW_R2, _NARROW_R3 = _NARROW
_R0, (_R1, _R2, _R3) = ROWS, TAIL_ROWS
# Columns that the full blocks take: on AVX-512 any block of more than one vector (their
# loads are masked there at no cost), on AVX2 only whole ones.
_FULL_FROM = LANES + 1 if AVX512 else WIDE
_BYTES = 4


@njit(cache=True)
def _columns_product(c, c_row, a, a_row, a_step, b, b_row, rows, n, depth, alpha, accumulate,
                     epilogue, row_operands, other):
    """One block of at most WIDE columns over all rows, in row blocks of ROWS, then TAIL_ROWS."""
    i = 0
    if n >= _FULL_FROM:
        while rows - i >= _R0:
            _FULL_R0(c + i * c_row * _BYTES, c_row, a + i * a_row * _BYTES, a_row, a_step, b,
                     b_row, n, depth, alpha, accumulate, epilogue,
                     _rows_at(epilogue, row_operands, i), _other_at(other, c_row, i))
            i += _R0
        if rows - i >= _R1:
            _FULL_R1(c + i * c_row * _BYTES, c_row, a + i * a_row * _BYTES, a_row, a_step, b,
                     b_row, n, depth, alpha, accumulate, epilogue,
                     _rows_at(epilogue, row_operands, i), _other_at(other, c_row, i))
            i += _R1
        if rows - i >= _R2:
            _FULL_R2(c + i * c_row * _BYTES, c_row, a + i * a_row * _BYTES, a_row, a_step, b,
                     b_row, n, depth, alpha, accumulate, epilogue,
                     _rows_at(epilogue, row_operands, i), _other_at(other, c_row, i))
            i += _R2
        while i < rows:
            _FULL_R3(c + i * c_row * _BYTES, c_row, a + i * a_row * _BYTES, a_row, a_step, b,
                     b_row, n, depth, alpha, accumulate, epilogue,
                     _rows_at(epilogue, row_operands, i), _other_at(other, c_row, i))
            i += _R3
    else:
        while rows - i >= _R0:
            _NARROW_R0(c + i * c_row * _BYTES, c_row, a + i * a_row * _BYTES, a_row, a_step, b,
                       b_row, n, depth, alpha, accumulate, epilogue,
                       _rows_at(epilogue, row_operands, i), _other_at(other, c_row, i))
            i += _R0
        if rows - i >= _R1:
            _NARROW_R1(c + i * c_row * _BYTES, c_row, a + i * a_row * _BYTES, a_row, a_step, b,
                       b_row, n, depth, alpha, accumulate, epilogue,
                       _rows_at(epilogue, row_operands, i), _other_at(other, c_row, i))
            i += _R1
        if rows - i >= _R2:
            _NARROW_R2(c + i * c_row * _BYTES, c_row, a + i * a_row * _BYTES, a_row, a_step, b,
                       b_row, n, depth, alpha, accumulate, epilogue,
                       _rows_at(epilogue, row_operands, i), _other_at(other, c_row, i))
            i += _R2
        while i < rows:
            _NARROW_R3(c + i * c_row * _BYTES, c_row, a + i * a_row * _BYTES, a_row, a_step, b,
                       b_row, n, depth, alpha, accumulate, epilogue,
                       _rows_at(epilogue, row_operands, i), _other_at(other, c_row, i))
            i += _R3


@intrinsic
def _run_time(typingctx, value):
    """``value`` as a run-time value of its type: a constant (a literal type) passed down as it
    is would compile the callee, with all its register blocks, once more per constant."""
    kind = types.unliteral(value)

    def codegen(context, builder, signature, args):
        return context.cast(builder, args[0], value, kind)
    return kind(value), codegen


@intrinsic
def _address(typingctx, value):
    """An integer address (0 for none) as uintp, the type of ``ndarray.ctypes.data``: one
    signature whether a caller passes an array's address or 0."""
    def codegen(context, builder, signature, args):
        return context.cast(builder, args[0], value, types.uintp)
    return types.uintp(value), codegen


@njit(inline="always")
def _rows_at(epilogue, row_operands, row):
    """The address of row ``row`` of the per-row operands at row_operands (LANES floats a row
    for LANE_MAX's maxima, one float otherwise), or 0 (none)."""
    if not row_operands:
        return 0
    return row_operands + row * (LANES if epilogue == LANE_MAX else 1) * _BYTES


@njit(inline="always")
def _other_at(other, c_row, row):
    """The address of row ``row`` of a tile laid out as c (row stride c_row), or 0 (none)."""
    return other + row * c_row * _BYTES if other else 0


# Working sets that stay in L1 (48 KiB on the Intel Xeon, 32 KiB on Zen 4) while the loops
# below reuse them: the rows of a that sweep each column block of b, and the rows of b that
# every row block of a sweeps. Chunks of a's rows ran the backward's q k^T and dO v^T
# (256 x 512 x 32-128) 1.04-1.09x as fast (1 thread, Intel Xeon, best of 25 alternating
# samples); half of Zen 4's L1 leaves room for the stream of b there too.
A_IN_L1 = 16 * 1024
B_IN_L1 = 24 * 1024
# The shortest inner dimension per pass over c worth an extra load and store of c's blocks.
MIN_DEPTH_STEP = 64


@njit(cache=True)
def _row_chunk(depth):
    """Rows of a per sweep over b's column blocks: as many 12-row blocks as fit A_IN_L1."""
    return max(ROWS, A_IN_L1 // (max(depth, 1) * _BYTES) // ROWS * ROWS)


@njit(cache=True)
def _depth_step(rows, depth, epilogue):
    """The inner dimension per pass over c: all of it, unless b (depth x n) is too large for L1
    and read by more than two row blocks of a, which then share a slice of b's rows from L1
    (not with an epilogue, which needs the finished values). Measured on the backward's tile
    products (256 x 512 tiles, padded rows, D 32 and 64): P^T dO 1.07-1.13x, dS k 1.02-1.07x;
    a forward strip's P v (two row blocks) gained nothing (0.98x), so it keeps one pass."""
    if epilogue != PLAIN or rows <= 2 * ROWS or depth * _BYTES * 2 * ROWS <= A_IN_L1:
        return max(depth, 1)
    # sized for two column blocks (head dim 64) whatever n is: the slices set where c is
    # rounded, so a product split over threads by columns must slice its depth alike
    step = B_IN_L1 // (2 * WIDE * _BYTES)
    return step if MIN_DEPTH_STEP <= step < depth else depth


# Compiled once, called by name: its register blocks are half a megabyte of LLVM IR, which every
# kernel calling it would otherwise link, optimize and emit again (called_by_name.py).
@called_by_name("seqattn_register_gemm_product_f32", types.void(
    types.uintp, types.intp, types.uintp, types.intp, types.intp, types.uintp, types.intp,
    types.intp, types.intp, types.intp, types.intp, types.float32, types.boolean, types.intp,
    types.uintp, types.uintp))
def _product_f32(c, c_row, a, a_row, a_step, b, b_row, b_block, rows, n, depth, alpha,
                 accumulate, epilogue, row_operands, other):
    """Addresses and strides (elements) of c (rows, n), a (rows, depth), b (depth, n): b's
    column block j (WIDE columns) starts j * b_block elements after b (WIDE for a row-major b,
    depth * WIDE for panels); ``epilogue`` one of EPILOGUES, with the address of its per-row
    operands (row_operands) and of a tile laid out as c (other), each 0 where unused.

    Loop order: a short inner dimension (the score products, q k^T) takes chunks of a's rows
    that stay in L1 while each column block of b streams past once; a long one (P v, dS k)
    takes slices of b's rows that stay in L1 while every row block of a sweeps them. Either
    way each 12-row block of a is reused from L1 for all column blocks (streaming a again for
    each was 40 % slower, measured)."""
    full = n - n % WIDE
    step = _depth_step(rows, depth, epilogue)
    for k0 in range(0, max(depth, 1), step):
        d = min(step, depth - k0)
        add = accumulate or k0 > 0
        a_k, b_k = a + k0 * a_step * _BYTES, b + k0 * b_row * _BYTES
        chunk = _row_chunk(d)
        for i0 in range(0, rows if full else 0, chunk):
            chunk_rows = min(chunk, rows - i0)
            for j0 in range(0, full, WIDE):
                _columns_product(c + (i0 * c_row + j0) * _BYTES, c_row,
                                 a_k + i0 * a_row * _BYTES, a_row, a_step,
                                 b_k + j0 // WIDE * b_block * _BYTES, b_row, chunk_rows,
                                 _run_time(WIDE), d, alpha, add, epilogue,
                                 _address(_rows_at(epilogue, row_operands, i0)),
                                 _address(_other_at(other, c_row, i0) + j0 * _BYTES
                                          if other else 0))
        if n > full:
            _columns_product(c + full * _BYTES, c_row, a_k, a_row, a_step,
                             b_k + full // WIDE * b_block * _BYTES, b_row, rows, n - full, d,
                             alpha, add, epilogue, _address(row_operands),
                             _address(other + full * _BYTES if other else 0))


@njit(inline="always")
def _register_gemm_f32(c, a, b, alpha, accumulate, epilogue, row_operands, other):
    rows, n = c.shape
    if b.ndim == 3:  # panels (n_panels, depth, WIDE)
        b_row, b_block = b.strides[1] // _BYTES, b.strides[0] // _BYTES
    else:
        b_row, b_block = b.strides[0] // _BYTES, WIDE
    _product_f32((c.ctypes.data, c.strides[0] // _BYTES, a.ctypes.data,
                  a.strides[0] // _BYTES, a.strides[1] // _BYTES, b.ctypes.data, b_row, b_block,
                  rows, n, a.shape[1], np.float32(alpha), accumulate, epilogue,
                  _address(row_operands), _address(other)))


def tile_products_in_registers(cpu_features):
    """Whether float32 products take the register-blocked kernel: with AVX-512 or with AVX2 and
    FMA (``cpu_features`` as LLVM writes them: "+avx512f,-amx-tile,...")."""
    return has_avx512(cpu_features) or has_avx2_fma(cpu_features)


IN_REGISTERS = tile_products_in_registers(TARGET_FEATURES)


@njit(cache=True)
def blas_product(c, a, b, alpha, accumulate):
    """register_gemm through BLAS: float64 always, float32 where ``IN_REGISTERS`` is False."""
    beta = 1.0 if accumulate else 0.0
    rows, depth = a.shape
    if depth == 0:  # BLAS rejects the leading dimension of an empty operand
        if not accumulate:
            c[...] = 0
    elif a.strides[1] == a.itemsize and a.strides[0] >= depth * a.itemsize:
        gemm(c, a, b, False, False, alpha, beta)
    elif a.strides[0] == a.itemsize and a.strides[1] >= rows * a.itemsize:
        gemm(c, a.T, b, True, False, alpha, beta)  # a transposed view: rows as columns
    else:  # a degenerate view (a single row or column) whose strides BLAS would reject
        gemm(c, np.ascontiguousarray(a), b, False, False, alpha, beta)


# On AVX2, a transposed a with more rows than this and a deeper product than TRANSPOSED_DEPTH
# goes to BLAS (see _transposed_a_through_blas).
TRANSPOSED_ROWS = 32
TRANSPOSED_DEPTH = 64


@njit(inline="always")
def _transposed_a_through_blas(a):
    """Whether register_gemm sends a product with this a to BLAS on AVX2: a transposed a (the
    attention backward's P^T dO and dS^T q) of many rows and a deep product. There the 6 x 16
    blocks sweep all of b once per 6 rows of a, broadcasting its values from one row of the
    tile, and ran slower than OpenBLAS's Haswell kernel; with few rows (the short kernel's dV^T
    and dK^T, as many rows as the head dim) or a shallow product they ran faster than it, whose
    call and packing then cost more than the product (BENCHMARKS.md, "CPUs with AVX2 but not
    AVX-512")."""
    return (a.strides[0] == a.itemsize and a.shape[0] > TRANSPOSED_ROWS
            and a.shape[1] > TRANSPOSED_DEPTH)


def register_gemm(c, a, b, alpha, accumulate):
    """c (M, N) = alpha * a (M, K) @ b (K, N), plus c when ``accumulate``; callable from @njit
    code only. float32 runs the register-blocked kernel above where the CPU has AVX-512, or
    AVX2 and FMA (``IN_REGISTERS``; there a large transposed a goes to BLAS,
    :func:`_transposed_a_through_blas`); otherwise, and for
    float64 (gradient checks), :func:`blas_product`.
    b and c need unit stride along their last axis; a may be any strided view."""
    raise NotImplementedError("register_gemm is only callable from @njit code")


@overload(register_gemm, jit_options=CACHED)
def _register_gemm_impl(c, a, b, alpha, accumulate):
    if c.dtype == types.float32 and IN_REGISTERS and not AVX512 and b.ndim == 2:
        def avx2_blocks_or_blas(c, a, b, alpha, accumulate):
            if _transposed_a_through_blas(a):
                blas_product(c, a, b, alpha, accumulate)
            else:
                _register_gemm_f32(c, a, b, alpha, accumulate, PLAIN, 0, 0)
        return avx2_blocks_or_blas
    return _register_gemm_untransposed_impl(c, a, b, alpha, accumulate)


def register_gemm_untransposed(c, a, b, alpha, accumulate):
    """:func:`register_gemm` for an ``a`` that is not a transposed view (unit stride along its
    rows, as the attention forward's q and P are). The same products and bits (such an a never
    takes the AVX2 route to BLAS of :func:`_transposed_a_through_blas`), but a kernel that
    calls only this compiles none of that route's code, which register_gemm links into every
    caller on AVX2. Callable from @njit code only."""
    raise NotImplementedError("register_gemm_untransposed is only callable from @njit code")


@overload(register_gemm_untransposed, jit_options=CACHED)
def _register_gemm_untransposed_impl(c, a, b, alpha, accumulate):
    if c.dtype == types.float32 and IN_REGISTERS:
        return lambda c, a, b, alpha, accumulate: _register_gemm_f32(c, a, b, alpha, accumulate,
                                                                     PLAIN, 0, 0)
    return lambda c, a, b, alpha, accumulate: blas_product(c, a, b, alpha, accumulate)


@njit(cache=True)
def _product_through_blas(c, a, b, alpha):
    """c = alpha * a @ b through BLAS, b row-major (K, N) or panels (P, K, W)."""
    if b.ndim == 3:
        for p in range(b.shape[0]):
            j0 = p * b.shape[2]
            n = min(b.shape[2], c.shape[1] - j0)
            if n > 0:
                blas_product(c[:, j0:j0 + n], a, b[p, :, :n], alpha, False)
    else:
        blas_product(c, a, b, alpha, False)


@njit(cache=True)
def _lane_max_loop(lane_max, c):
    lanes = lane_max.shape[1]
    for r in range(c.shape[0]):
        for j in range(c.shape[1]):
            lane_max[r, j % lanes] = max(lane_max[r, j % lanes], c[r, j])


def register_gemm_lane_max(c, a, b, alpha, lane_max):
    """c (M, N) = alpha * a (M, K) @ b (K, N) as :func:`register_gemm` does (not accumulating),
    and lane_max (at least M rows of LANES), C-contiguous, of c's dtype, grows to the maxima of
    c's rows: lane_max[r, l] = max(lane_max[r, l], c[r, j] for the columns j = l mod LANES).
    b may also be panels (P, K, W) with unit stride along W, column j of b being
    b[j // W, :, j % W], N <= P * W; W = WIDE for the register kernel (each panel contiguous:
    no L1 set conflicts between b's rows).
    The row maxima a softmax needs, taken while the float32 kernel has the values in registers
    (cheaper than reading the row again); callable from @njit code only."""
    raise NotImplementedError("register_gemm_lane_max is only callable from @njit code")


@overload(register_gemm_lane_max, jit_options=CACHED)
def _register_gemm_lane_max_impl(c, a, b, alpha, lane_max):
    if c.dtype == types.float32 and IN_REGISTERS:
        return lambda c, a, b, alpha, lane_max: _register_gemm_f32(
            c, a, b, alpha, False, LANE_MAX, lane_max.ctypes.data, 0)

    def through_blas(c, a, b, alpha, lane_max):
        _product_through_blas(c, a, b, alpha)
        _lane_max_loop(lane_max, c)
    return through_blas


def register_gemm_exp(c, a, b, alpha, shift):
    """c (M, N) = exp(alpha * a (M, K) @ b (K, N) - shift[r]) row by row (shift (M,),
    contiguous, of c's dtype; a row whose shift is +inf becomes zeros): the attention
    backward's probabilities P = exp(S - lse), taken while the float32 kernel has S in
    registers, which saves a pass over the tile. b as for :func:`register_gemm_lane_max`;
    the exp is ``softmax_rows.exp_shifted``'s. Callable from @njit code only."""
    raise NotImplementedError("register_gemm_exp is only callable from @njit code")


@overload(register_gemm_exp, jit_options=CACHED)
def _register_gemm_exp_impl(c, a, b, alpha, shift):
    if c.dtype == types.float32 and IN_REGISTERS:
        return lambda c, a, b, alpha, shift: _register_gemm_f32(
            c, a, b, alpha, False, EXP_SHIFTED, shift.ctypes.data, 0)

    def through_blas(c, a, b, alpha, shift):
        _product_through_blas(c, a, b, alpha)
        for r in range(c.shape[0]):
            exp_shifted(c[r], shift[r])
    return through_blas


def register_gemm_softmax_grad(c, a, b, alpha, p, delta):
    """c (M, N) = p * (alpha * a (M, K) @ b (K, N) - delta[r]) row by row (p laid out as c,
    delta (M,) contiguous, both of c's dtype; c not p itself): the softmax backward
    dS = P * (dP - delta) of the attention, taken while the float32 kernel has dP in
    registers, which saves a pass over the tile. b as for :func:`register_gemm_lane_max`.
    Callable from @njit code only."""
    raise NotImplementedError("register_gemm_softmax_grad is only callable from @njit code")


@njit(cache=True)
def _check_layout_of_p(c, p):
    if p.strides[0] != c.strides[0] or p.shape != c.shape:
        raise ValueError("p must be laid out as c")


@overload(register_gemm_softmax_grad, jit_options=CACHED)
def _register_gemm_softmax_grad_impl(c, a, b, alpha, p, delta):
    if c.dtype == types.float32 and IN_REGISTERS:
        def in_registers(c, a, b, alpha, p, delta):
            _check_layout_of_p(c, p)
            _register_gemm_f32(c, a, b, alpha, False, SOFTMAX_GRAD, delta.ctypes.data,
                               p.ctypes.data)
        return in_registers

    def through_blas(c, a, b, alpha, p, delta):
        _check_layout_of_p(c, p)
        _product_through_blas(c, a, b, alpha)
        for r in range(c.shape[0]):
            softmax_grad_row(c[r], p[r], delta[r])
    return through_blas


def _transpose_block(lanes, full):
    """An intrinsic for dst[c, r] = src[r, c], r < rows <= lanes, c < cols <= lanes (arguments
    dst, dst_row, src, src_row, rows, cols: addresses, strides in elements): ``lanes`` row
    loads, the lanes x lanes transpose in registers (stages swapping the off-diagonal half
    blocks of every 2h x 2h block, h = lanes / 2, ..., 1), ``lanes`` row stores. ``full``:
    rows = cols = lanes (the caller guarantees it), loaded and stored without masks; else
    masked, rows past the end reading as zeros."""
    vector, mask = ir.VectorType(F32, lanes), ir.VectorType(ir.IntType(1), lanes)
    shuffle = ir.VectorType(I32, lanes)

    @intrinsic
    def transpose_block(typingctx, dst, dst_row, src, src_row, rows, cols):
        def codegen(context, builder, signature, args):
            dst_addr, dst_row, src_addr, src_row, rows, cols = args
            intp = context.get_value_type(types.intp)
            module = builder.module
            load, store = masked_load(module, lanes), masked_store(module, lanes)
            src_data, dst_data = (builder.inttoptr(x, F32.as_pointer())
                                  for x in (src_addr, dst_addr))
            zero = cgutils.get_null_value(vector)
            align = ir.Constant(I32, 4)

            def row_at(data, stride, r):
                return vector_at(builder, data, builder.mul(ir.Constant(intp, r), stride), lanes)

            columns, present = lanes_below(builder, cols, lanes), lanes_below(builder, rows, lanes)
            lines = []
            for r in range(lanes):
                if full:
                    lines.append(builder.load(row_at(src_data, src_row, r), align=4))
                    continue
                row_mask = builder.select(builder.extract_element(present, ir.Constant(I32, r)),
                                          columns, cgutils.get_null_value(mask))
                lines.append(builder.call(load, [row_at(src_data, src_row, r), align, row_mask,
                                                 zero]))
            half = lanes // 2
            while half:
                low = [j if j & half == 0 else lanes + j - half for j in range(lanes)]
                high = [j + half if j & half == 0 else lanes + j for j in range(lanes)]
                for i in range(lanes):
                    if i & half == 0:
                        top, bottom = lines[i], lines[i + half]
                        lines[i] = builder.shuffle_vector(top, bottom, ir.Constant(shuffle, low))
                        lines[i + half] = builder.shuffle_vector(top, bottom,
                                                                 ir.Constant(shuffle, high))
                half //= 2
            for c in range(lanes):
                if full:
                    builder.store(lines[c], row_at(dst_data, dst_row, c), align=4)
                    continue
                row_mask = builder.select(builder.extract_element(columns, ir.Constant(I32, c)),
                                          present, cgutils.get_null_value(mask))
                builder.call(store, [lines[c], row_at(dst_data, dst_row, c), align, row_mask])
            return context.get_dummy_value()

        return types.none(dst, dst_row, src, src_row, rows, cols), codegen

    return transpose_block


# AVX-512 moves 16 x 16 blocks with masked loads and stores, which cost it nothing extra. On
# AVX2, whose masked stores AMD's Zen cores run as microcode, blocks of 8 x 8 (one register a
# row), the whole ones unmasked; only the edges are masked.
if AVX512:
    _TRANSPOSE_LANES = LANES
    _TRANSPOSE_EDGE = _transpose_block(LANES, full=False)
    _TRANSPOSE_WHOLE = _TRANSPOSE_EDGE
else:
    _TRANSPOSE_LANES = LANES // 2
    _TRANSPOSE_EDGE = _transpose_block(LANES // 2, full=False)
    _TRANSPOSE_WHOLE = _transpose_block(LANES // 2, full=True)


# Called by name, as _product_f32 is: its blocks would otherwise be linked into every caller.
@called_by_name("seqattn_register_gemm_transpose_f32", types.void(
    types.uintp, types.intp, types.uintp, types.intp, types.intp, types.intp))
def _transpose_f32(d, d_row, s, s_row, rows, cols):
    """dst = src^T from their addresses and row strides (elements), src (rows, cols)."""
    T = _TRANSPOSE_LANES
    for r0 in range(0, rows, T):
        for c0 in range(0, cols, T):
            at_dst, at_src = d + (c0 * d_row + r0) * _BYTES, s + (r0 * s_row + c0) * _BYTES
            if rows - r0 >= T and cols - c0 >= T:
                _TRANSPOSE_WHOLE(at_dst, d_row, at_src, s_row, T, T)
            else:
                _TRANSPOSE_EDGE(at_dst, d_row, at_src, s_row, min(T, rows - r0),
                                min(T, cols - c0))


@njit(cache=True)
def _transpose_loop(dst, src):
    for r in range(src.shape[0]):
        for c in range(src.shape[1]):
            dst[c, r] = src[r, c]


def transpose(dst, src):
    """dst (C, R) = src (R, C)^T, both with unit stride along their last axis; callable from
    @njit code only. float32 moves square blocks through registers (a scalar loop ran at 0.8
    ns per element); other dtypes loop."""
    raise NotImplementedError("transpose is only callable from @njit code")


@overload(transpose, jit_options=CACHED)
def _transpose_impl(dst, src):
    if dst.dtype == types.float32 and src.dtype == types.float32:
        return lambda dst, src: _transpose_f32((dst.ctypes.data, dst.strides[0] // _BYTES,
                                                src.ctypes.data, src.strides[0] // _BYTES,
                                                src.shape[0], src.shape[1]))
    return lambda dst, src: _transpose_loop(dst, src)
