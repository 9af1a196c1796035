"""Vectorisable row primitives for the softmax inside the CPU attention kernels: exp, max, and

Both run over one contiguous row of a score tile, and for float32 both are written in LLVM IR on
<16 x float> vectors: Numba's own loops are vectorised only 8 lanes wide on the Intel Xeon
(LLVM prefers 256-bit vectors on Intel's server cores), and not at all for a float max (Numba's
max keeps NaN semantics: 0.6 ns per element, scalar). An earlier row max on integer keys that
sort like the floats vectorised, but Numba widened its int32 arithmetic to int64 (4 lanes:
0.31 ns per element); the IR max (``llvm.maxnum``, exact for -inf) takes 0.10 ns.

The float32 exp takes ``float32_math.exp_f32``'s range reduction with a degree-5 polynomial
(SOFTMAX_EXP) and, on AVX-512, scalef for the power of two, in a pass that also sums the row
(the softmax needs the sum; one pass saves a sweep). Other dtypes and strided rows loop with
``np.exp``. Pinned by tests/kernels/test_float32_math.py.
"""
import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic, overload

from . import float32_math as f32
from .float32_math import FASTMATH
from .jit_options import CACHED, njit
from .llvm_vectors import (AVX512, F32, I32, LANES, VEC, declare, lanes_below, masked_load,
                           masked_store, splat, vector_at)


@njit(fastmath=FASTMATH, cache=True)
def _exp_shifted_loop(x, shift):
    total = x.dtype.type(0)
    for j in range(x.shape[0]):
        x[j] = np.exp(x[j] - shift)
        total += x[j]
    return total


def exp_shifted(x, shift):
    """In place, x[j] = exp(x[j] - shift) for a contiguous 1-D row; returns the row's new sum.

    In place on purpose: with a separate output that may alias x, LLVM's overlap check sends the
    loop down its scalar path (7x slower, measured). Callable from @njit code only; the
    implementation is chosen by dtype at compile time, and a row of a padded tile (layout "A")
    takes the vector path when its stride is one element (checked at run time).
    """
    raise NotImplementedError("exp_shifted is only callable from @njit code")


# Inlined by Numba, not left to LLVM: a caller's fast-math arithmetic on the result (the online
# softmax's running_sum * correction + exp_shifted(...)) then rounds the same in every copy of
# the caller. LLVM inlined it in the copy inside a cached kernel's object but not in the
# caller's own, to which a process that compiles the kernel links it: other bits in that
# process than in those that load the cache (tests/kernels/test_cached_kernels_bits.py).
@overload(exp_shifted, inline="always", jit_options=CACHED)
def _exp_shifted_impl(x, shift):
    if x.dtype == types.float32 and x.layout in "CA":
        vectors = _exp_shifted_scalef if AVX512 else _exp_shifted_bits

        def exp_shifted_f32(x, shift):
            if _unit_stride(x):
                return vectors(x, np.float32(shift))
            return _exp_shifted_loop(x, shift)
        return exp_shifted_f32
    return lambda x, shift: _exp_shifted_loop(x, shift)


@njit(inline="always")
def _unit_stride(x):
    """Whether the 1-D row x is contiguous (always for layout "C"; a row of a padded 2-D
    tile, layout "A", is too): the vector paths read x's data as one run."""
    return x.strides[0] == x.itemsize or x.shape[0] <= 1


def _emit_tail(builder, n, full, step):
    """The IR for a row's last n - full < LANES elements, given ``step(j, lanes, mask)``, which
    emits one vector of ``lanes`` floats at element j (mask None: all of them, unmasked). On
    AVX-512 one masked vector of LANES. On AVX2, whose masked stores AMD's Zen cores run as
    microcode, vectors of LANES / 2 (one register): the first unmasked where the tail fills
    it, a masked one for what is left."""
    if AVX512:
        with builder.if_then(builder.icmp_signed("<", full, n)):
            step(full, LANES, lanes_below(builder, builder.sub(n, full)))
        return
    half = ir.Constant(n.type, LANES // 2)
    whole = builder.icmp_signed(">=", builder.sub(n, full), half)
    with builder.if_then(whole):
        step(full, LANES // 2, None)
    start = builder.add(full, builder.select(whole, half, ir.Constant(n.type, 0)))
    with builder.if_then(builder.icmp_signed("<", start, n)):
        step(start, LANES // 2, lanes_below(builder, builder.sub(n, start), LANES // 2))


@njit(fastmath=FASTMATH, cache=True)
def _softmax_grad_loop(ds, p, delta):
    for j in range(ds.shape[0]):
        ds[j] = p[j] * (ds[j] - delta)


@intrinsic
def _softmax_grad_f32(typingctx, ds, p, delta):
    """softmax_grad_row on float32 rows of unit stride (checked by the caller) in
    <16 x float> vectors, the tail as :func:`_emit_tail` takes it."""
    if not (all(isinstance(x, types.Array) and x.ndim == 1 and x.dtype == types.float32
                and x.layout in "CA" for x in (ds, p)) and delta == types.float32):
        return None

    def codegen(context, builder, signature, args):
        ds_row = context.make_array(signature.args[0])(context, builder, args[0])
        p_row = context.make_array(signature.args[1])(context, builder, args[1])
        n = builder.extract_value(ds_row.shape, 0)
        intp = n.type
        align = ir.Constant(I32, 4)

        def step(j, lanes, mask):
            vector = ir.VectorType(F32, lanes)
            at = vector_at(builder, ds_row.data, j, lanes)
            p_at = vector_at(builder, p_row.data, j, lanes)
            if mask is None:
                dp, prob = builder.load(at, align=4), builder.load(p_at, align=4)
            else:
                load = masked_load(builder.module, lanes)
                zero = cgutils.get_null_value(vector)
                dp = builder.call(load, [at, align, mask, zero])
                prob = builder.call(load, [p_at, align, mask, zero])
            value = builder.fmul(prob, builder.fsub(dp, splat(builder, args[2], vector)))
            if mask is None:
                builder.store(value, at, align=4)
            else:
                builder.call(masked_store(builder.module, lanes), [value, at, align, mask])

        full = builder.sub(n, builder.srem(n, ir.Constant(intp, LANES)))
        with cgutils.for_range_slice(builder, ir.Constant(intp, 0), full,
                                     ir.Constant(intp, LANES), intp) as (j, _):
            step(j, LANES, None)
        _emit_tail(builder, n, full, step)
        return context.get_dummy_value()

    return types.none(ds, p, delta), codegen


def softmax_grad_row(ds, p, delta):
    """In place, ds[j] = p[j] * (ds[j] - delta) for 1-D rows of one length: the softmax
    backward dS = P * (dP - rowsum(dO * O)) of one row, given dP in ds. Callable from @njit
    code only; float32 rows of unit stride (layout "C", or rows of a padded tile, checked at
    run time) take <16 x float> vectors (Numba's loop over a padded 2-D tile, layout "A", was
    not vectorised: 3-4x slower)."""
    raise NotImplementedError("softmax_grad_row is only callable from @njit code")


@overload(softmax_grad_row, jit_options=CACHED)
def _softmax_grad_row_impl(ds, p, delta):
    if ds.dtype == types.float32 and p.dtype == types.float32:
        def float32_rows(ds, p, delta):
            if _unit_stride(ds) and _unit_stride(p):
                _softmax_grad_f32(ds, p, np.float32(delta))
            else:
                _softmax_grad_loop(ds, p, delta)
        return float32_rows
    return lambda ds, p, delta: _softmax_grad_loop(ds, p, delta)


# exp(r) = 1 + r (c1 + c2 r + ... + c5 r^4) for |r| <= ln(2) / 2, lowest power first: degree 5,
# fitted to exp's relative error (Lawson's iteration on 8000 Chebyshev nodes, float64 max
# 9.1e-8, 0.8 ulp; the constant is exactly 1, so exp(0) = 1). exp_f32's degree-7 Taylor
# polynomial costs two more multiply-adds per vector for accuracy that the softmax's float32
# scores do not have; the whole exp stays within 2 ulps (1.35 measured, pinned by
# tests/kernels/test_float32_math.py). With scalef it ran at 0.19 ns per element against 0.26 for
# exp_f32's operations (a 24 x 512 strip in L1, 1 thread, Intel Xeon, best of 15 rounds).
SOFTMAX_EXP = tuple(np.float32(c) for c in (1.0, 0.9999997071893324, 0.49999149530558473,
                                            0.16667636195268581, 0.04189792931098126,
                                            0.008290314686203271))
# scalef's rounding argument: the current rounding mode (MXCSR), round to nearest
CURRENT_ROUNDING = 4


def exp_scalar(x):
    """exp of one number: float32 through the inline ``float32_math.exp_f32`` (a libm call
    is a function call per row and key block in the online softmax), other dtypes np.exp.
    Callable from @njit code only."""
    raise NotImplementedError("exp_scalar is only callable from @njit code")


# Inlined by Numba for the same reason as exp_shifted.
@overload(exp_scalar, inline="always", jit_options=CACHED)
def _exp_scalar_impl(x):
    if x == types.float32:
        return lambda x: f32.exp_f32(x)
    return lambda x: np.exp(x)


_UNROLL = 4  # independent vector maxima in flight, so the loop is not one dependent chain


@intrinsic
def _row_max_f32(typingctx, x):
    """The max of a contiguous float32 row in <16 x float> vectors (llvm.maxnum), the tail
    by masked loads whose other lanes read -inf (on AVX2 as :func:`_emit_tail` takes it)."""
    if not (isinstance(x, types.Array) and x.ndim == 1 and x.dtype == types.float32
            and x.layout in "CA"):  # "A": the caller checked the unit stride
        return None

    def codegen(context, builder, signature, args):
        row = context.make_array(x)(context, builder, args[0])
        n = builder.extract_value(row.shape, 0)
        intp = n.type
        module = builder.module
        maxnum = declare(module, "llvm.maxnum.v16f32", VEC, [VEC, VEC])
        load = masked_load(module)
        reduce_max = declare(module, "llvm.vector.reduce.fmax.v16f32", F32, [VEC])
        lowest = ir.Constant(VEC, [float("-inf")] * LANES)
        align = ir.Constant(I32, 4)

        def const(value):
            return ir.Constant(intp, value)

        def at(i):
            return vector_at(builder, row.data, i)

        full = builder.sub(n, builder.srem(n, const(LANES * _UNROLL)))
        entry = builder.basic_block
        loop = builder.append_basic_block("row_max.loop")
        tail = builder.append_basic_block("row_max.tail")
        builder.cbranch(builder.icmp_signed(">", full, const(0)), loop, tail)
        builder.position_at_end(loop)
        i = builder.phi(intp)
        i.add_incoming(const(0), entry)
        best = [builder.phi(VEC) for _ in range(_UNROLL)]
        for phi in best:
            phi.add_incoming(lowest, entry)
        grown = [builder.call(maxnum, [phi, builder.load(at(builder.add(i, const(LANES * u))),
                                                         align=4)])
                 for u, phi in enumerate(best)]
        i_next = builder.add(i, const(LANES * _UNROLL))
        loop_end = builder.basic_block
        i.add_incoming(i_next, loop_end)
        for phi, value in zip(best, grown):
            phi.add_incoming(value, loop_end)
        builder.cbranch(builder.icmp_signed("<", i_next, full), loop, tail)
        builder.position_at_end(tail)
        merged = []
        for u in range(_UNROLL):
            phi = builder.phi(VEC)
            phi.add_incoming(lowest, entry)
            phi.add_incoming(grown[u], loop_end)
            merged.append(phi)
        total = merged[0]
        for other in merged[1:]:
            total = builder.call(maxnum, [total, other])
        slot = cgutils.alloca_once_value(builder, total)
        if AVX512:
            # The last n - full elements, 16 lanes at a time, lanes past the end reading -inf.
            with cgutils.for_range_slice(builder, full, n, const(LANES), intp) as (j, _):
                mask = lanes_below(builder, builder.sub(n, j))
                chunk = builder.call(load, [at(j), align, mask, lowest])
                slot_value = builder.call(maxnum, [builder.load(slot), chunk])
                builder.store(slot_value, slot)
            return builder.call(reduce_max, [builder.load(slot)])
        # On AVX2 whole vectors of 16 while they fit, then _emit_tail's halves, whose maxima
        # a scalar keeps.
        whole = builder.sub(n, builder.srem(builder.sub(n, full), const(LANES)))
        with cgutils.for_range_slice(builder, full, whole, const(LANES), intp) as (j, _):
            builder.store(builder.call(maxnum, [builder.load(slot),
                                                builder.load(at(j), align=4)]), slot)
        tail_max = cgutils.alloca_once_value(builder, ir.Constant(F32, float("-inf")))

        def step(j, lanes, mask):
            vector = ir.VectorType(F32, lanes)
            row_at = vector_at(builder, row.data, j, lanes)
            if mask is None:
                chunk = builder.load(row_at, align=4)
            else:
                chunk = builder.call(masked_load(module, lanes), [
                    row_at, align, mask, ir.Constant(vector, [float("-inf")] * lanes)])
            reduce = declare(module, f"llvm.vector.reduce.fmax.v{lanes}f32", F32, [vector])
            scalar_max = declare(module, "llvm.maxnum.f32", F32, [F32, F32])
            builder.store(builder.call(scalar_max, [builder.load(tail_max),
                                                    builder.call(reduce, [chunk])]), tail_max)

        _emit_tail(builder, n, whole, step)
        return builder.call(declare(module, "llvm.maxnum.f32", F32, [F32, F32]), [
            builder.call(reduce_max, [builder.load(slot)]), builder.load(tail_max)])

    return types.float32(x), codegen


@njit(cache=True)
def _row_max_loop(x):
    best = -np.inf
    for j in range(x.shape[0]):
        best = max(best, x[j])
    return x.dtype.type(best)


def row_max(x):
    """The largest value of a 1-D row (-inf for an all -inf row). Callable from @njit code
    only; a contiguous float32 row (layout "C", or "A" with unit stride) takes the vector
    path."""
    raise NotImplementedError("row_max is only callable from @njit code")


@overload(row_max, jit_options=CACHED)
def _row_max_impl(x):
    if x.dtype == types.float32 and x.layout in "CA":
        return lambda x: _row_max_f32(x) if _unit_stride(x) else _row_max_loop(x)
    return lambda x: _row_max_loop(x)


def vector_exp(builder, y, scale_in_one_instruction):
    """exp(y) on a vector of floats (<16 x float>, or <8 x float> for AVX2's narrow blocks):
    exp_f32's range reduction, SOFTMAX_EXP's degree 5, and 2**k applied by AVX-512's scalef
    where ``scale_in_one_instruction`` (one operation where building the exponent bits takes
    four; 16 lanes only), which also zeroes the lanes with k <= -127 (as exp_f32's bits do)
    through its mask."""
    module = builder.module
    vector, lanes = y.type, y.type.count

    def intrinsic_fn(name, n_args):
        return declare(module, name, vector, [vector] * n_args)

    fma, maxnum, floor = (intrinsic_fn(f"llvm.fma.v{lanes}f32", 3),
                          intrinsic_fn(f"llvm.maxnum.v{lanes}f32", 2),
                          intrinsic_fn(f"llvm.floor.v{lanes}f32", 1))

    def c(value):
        return ir.Constant(vector, [float(value)] * lanes)

    if not scale_in_one_instruction:
        y = builder.call(maxnum, [y, c(f32.MIN_INPUT)])
    k = builder.call(floor, [builder.call(fma, [y, c(f32.F32_LOG2E), c(f32.HALF)])])
    minus_k = builder.fneg(k)
    r = builder.call(fma, [minus_k, c(f32.LN2_HI), y])
    r = builder.call(fma, [minus_k, c(f32.LN2_LO), r])
    p = c(SOFTMAX_EXP[-1])
    for coefficient in SOFTMAX_EXP[-2::-1]:
        p = builder.call(fma, [p, r, c(coefficient)])
    if scale_in_one_instruction:
        # -inf and NaN give k = -inf or NaN and fail the compare: 0 in those lanes too
        kept = builder.fcmp_ordered(">", k, c(-float(f32.EXPONENT_BIAS)))
        scalef = declare(module, "llvm.x86.avx512.mask.scalef.ps.512", VEC,
                         [VEC, VEC, VEC, ir.IntType(LANES), I32])
        return builder.call(scalef, [p, k, cgutils.get_null_value(VEC),
                                     builder.bitcast(kept, ir.IntType(LANES)),
                                     ir.Constant(I32, CURRENT_ROUNDING)])
    ints = ir.VectorType(I32, lanes)
    exponent = builder.shl(builder.add(builder.fptosi(k, ints),
                                       ir.Constant(ints, [int(f32.EXPONENT_BIAS)] * lanes)),
                           ir.Constant(ints, [int(f32.MANTISSA_BITS)] * lanes))
    return builder.fmul(p, builder.bitcast(exponent, vector))


def _exp_shifted_vectors(scale_in_one_instruction):
    """An intrinsic for exp_shifted on a contiguous float32 row in <16 x float> vectors
    (:func:`vector_exp`; Numba's own loops are vectorised 8 lanes wide on this CPU, LLVM
    preferring 256-bit vectors on Intel's server cores, which ran the exp at 0.41-0.51 ns per
    element). The tail as :func:`_emit_tail` takes it."""
    @intrinsic
    def exp_shifted_vectors(typingctx, x, shift):
        if not (isinstance(x, types.Array) and x.ndim == 1 and x.dtype == types.float32
                and x.layout in "CA" and shift == types.float32):  # "A": unit stride checked
            return None
        return types.float32(x, shift), _exp_shifted_codegen(scale_in_one_instruction)

    return exp_shifted_vectors


def _exp_shifted_codegen(scale_in_one_instruction):
    def codegen(context, builder, signature, args):
        row = context.make_array(signature.args[0])(context, builder, args[0])
        n = builder.extract_value(row.shape, 0)
        intp = n.type
        module = builder.module
        reduce_add = declare(module, "llvm.vector.reduce.fadd.v16f32", F32, [F32, VEC])
        shift = splat(builder, args[1], VEC)
        align = ir.Constant(I32, 4)
        total = cgutils.alloca_once_value(builder, cgutils.get_null_value(VEC))
        # AVX2's tail vectors (LANES / 2) are summed apart, into a scalar
        tail_total = cgutils.alloca_once_value(builder, ir.Constant(F32, 0.0))
        full = builder.sub(n, builder.srem(n, ir.Constant(intp, LANES)))
        with cgutils.for_range_slice(builder, ir.Constant(intp, 0), full,
                                     ir.Constant(intp, LANES), intp) as (j, _):
            at = vector_at(builder, row.data, j)
            e = vector_exp(builder, builder.fsub(builder.load(at, align=4), shift),
                            scale_in_one_instruction)
            builder.store(e, at, align=4)
            builder.store(builder.fadd(builder.load(total), e), total)

        def step(j, lanes, mask):
            # lanes past the end read the shift, so e is 1 there: they are neither stored
            # nor summed
            vector = ir.VectorType(F32, lanes)
            at = vector_at(builder, row.data, j, lanes)
            lane_shift = splat(builder, args[1], vector)
            if mask is None:
                y = builder.load(at, align=4)
            else:
                y = builder.call(masked_load(module, lanes), [at, align, mask, lane_shift])
            e = vector_exp(builder, builder.fsub(y, lane_shift), scale_in_one_instruction)
            if mask is None:
                builder.store(e, at, align=4)
            else:
                builder.call(masked_store(module, lanes), [e, at, align, mask])
                e = builder.select(mask, e, cgutils.get_null_value(vector))
            if lanes == LANES:
                builder.store(builder.fadd(builder.load(total), e), total)
            else:
                reduce = declare(module, f"llvm.vector.reduce.fadd.v{lanes}f32", F32,
                                 [F32, vector])
                builder.store(builder.call(reduce, [builder.load(tail_total), e]), tail_total)

        _emit_tail(builder, n, full, step)
        row_total = builder.call(reduce_add, [ir.Constant(F32, 0.0), builder.load(total)])
        return row_total if AVX512 else builder.fadd(row_total, builder.load(tail_total))

    return codegen


# scalef (AVX-512) where the CPU has it; the exponent bits elsewhere. Both tested.
_exp_shifted_scalef, _exp_shifted_bits = _exp_shifted_vectors(True), _exp_shifted_vectors(False)
