"""Vectorisable row primitives for the softmax inside the CPU attention kernels: exp and max.

Both run over one contiguous row of a score tile, and for float32 both are written in LLVM IR on
<16 x float> vectors: Numba's own loops are vectorised only 8 lanes wide on the Intel Xeon
(LLVM prefers 256-bit vectors on Intel's server cores), and not at all for a float max (Numba's
max keeps NaN semantics: 0.6 ns per element, scalar). An earlier row max on integer keys that
sort like the floats vectorised, but Numba widened its int32 arithmetic to int64 (4 lanes:
0.31 ns per element); the IR max (``llvm.maxnum``, exact for -inf) takes 0.10 ns.

The float32 exp takes ``float32_math.exp_f32``'s range reduction with a degree-5 polynomial
(SOFTMAX_EXP) and, on AVX-512, scalef for the power of two, in a pass that also sums the row
(the softmax needs the sum; one pass saves a sweep). Other dtypes and strided rows loop with
``np.exp``. Pinned by tests/test_float32_math.py.
"""
import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic, overload

from . import float32_math as f32
from .float32_math import FASTMATH
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
    implementation is chosen by dtype at compile time.
    """
    raise NotImplementedError("exp_shifted is only callable from @njit code")


@overload(exp_shifted, jit_options={"cache": True})
def _exp_shifted_impl(x, shift):
    if x.dtype == types.float32 and x.layout == "C":
        if AVX512:
            return lambda x, shift: _exp_shifted_scalef(x, np.float32(shift))
        return lambda x, shift: _exp_shifted_bits(x, np.float32(shift))
    return lambda x, shift: _exp_shifted_loop(x, shift)


# exp(r) = 1 + r (c1 + c2 r + ... + c5 r^4) for |r| <= ln(2) / 2, lowest power first: degree 5,
# fitted to exp's relative error (Lawson's iteration on 8000 Chebyshev nodes, float64 max
# 9.1e-8, 0.8 ulp; the constant is exactly 1, so exp(0) = 1). exp_f32's degree-7 Taylor
# polynomial costs two more multiply-adds per vector for accuracy that the softmax's float32
# scores do not have; the whole exp stays within 2 ulps (1.35 measured, pinned by
# tests/test_float32_math.py). With scalef it ran at 0.19 ns per element against 0.26 for
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


@overload(exp_scalar, jit_options={"cache": True})
def _exp_scalar_impl(x):
    if x == types.float32:
        return lambda x: f32.exp_f32(x)
    return lambda x: np.exp(x)


_UNROLL = 4  # independent vector maxima in flight, so the loop is not one dependent chain


@intrinsic
def _row_max_f32(typingctx, x):
    """The max of a contiguous float32 row in <16 x float> vectors (llvm.maxnum), the tail
    by a masked load whose other lanes read -inf."""
    if not (isinstance(x, types.Array) and x.ndim == 1 and x.dtype == types.float32
            and x.layout == "C"):
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
        # The last n - full elements, 16 lanes at a time, lanes past the end reading -inf.
        with cgutils.for_range_slice(builder, full, n, const(LANES), intp) as (j, _):
            mask = lanes_below(builder, builder.sub(n, j))
            chunk = builder.call(load, [at(j), align, mask, lowest])
            slot_value = builder.call(maxnum, [builder.load(slot), chunk])
            builder.store(slot_value, slot)
        return builder.call(reduce_max, [builder.load(slot)])

    return types.float32(x), codegen


@njit(cache=True)
def _row_max_loop(x):
    best = -np.inf
    for j in range(x.shape[0]):
        best = max(best, x[j])
    return x.dtype.type(best)


def row_max(x):
    """The largest value of a 1-D row (-inf for an all -inf row). Callable from @njit code
    only; a contiguous float32 row takes the vector path."""
    raise NotImplementedError("row_max is only callable from @njit code")


@overload(row_max, jit_options={"cache": True})
def _row_max_impl(x):
    if x.dtype == types.float32 and x.layout == "C":
        return lambda x: _row_max_f32(x)
    return lambda x: _row_max_loop(x)


def _vector_exp(builder, y, scale_in_one_instruction):
    """exp(y) on a <16 x float>: exp_f32's range reduction, SOFTMAX_EXP's degree 5, and
    2**k applied by AVX-512's scalef where ``scale_in_one_instruction`` (one operation where
    building the exponent bits takes four), which also zeroes the lanes with k <= -127 (as
    exp_f32's bits do) through its mask."""
    module = builder.module

    def intrinsic_fn(name, n_args):
        return declare(module, name, VEC, [VEC] * n_args)

    fma, maxnum, floor = (intrinsic_fn("llvm.fma.v16f32", 3), intrinsic_fn("llvm.maxnum.v16f32", 2),
                          intrinsic_fn("llvm.floor.v16f32", 1))

    def c(value):
        return ir.Constant(VEC, [float(value)] * LANES)

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
    ints = ir.VectorType(I32, LANES)
    exponent = builder.shl(builder.add(builder.fptosi(k, ints),
                                       ir.Constant(ints, [int(f32.EXPONENT_BIAS)] * LANES)),
                           ir.Constant(ints, [int(f32.MANTISSA_BITS)] * LANES))
    return builder.fmul(p, builder.bitcast(exponent, VEC))


def _exp_shifted_vectors(scale_in_one_instruction):
    """An intrinsic for exp_shifted on a contiguous float32 row in <16 x float> vectors
    (:func:`_vector_exp`; Numba's own loops are vectorised 8 lanes wide on this CPU, LLVM
    preferring 256-bit vectors on Intel's server cores, which ran the exp at 0.41-0.51 ns per
    element). The tail is masked."""
    @intrinsic
    def exp_shifted_vectors(typingctx, x, shift):
        if not (isinstance(x, types.Array) and x.ndim == 1 and x.dtype == types.float32
                and x.layout == "C" and shift == types.float32):
            return None
        return types.float32(x, shift), _exp_shifted_codegen(scale_in_one_instruction)

    return exp_shifted_vectors


def _exp_shifted_codegen(scale_in_one_instruction):
    def codegen(context, builder, signature, args):
        row = context.make_array(signature.args[0])(context, builder, args[0])
        n = builder.extract_value(row.shape, 0)
        intp = n.type
        module = builder.module
        load, store = masked_load(module), masked_store(module)
        reduce_add = declare(module, "llvm.vector.reduce.fadd.v16f32", F32, [F32, VEC])
        shift = splat(builder, args[1], VEC)
        align = ir.Constant(I32, 4)
        total = cgutils.alloca_once_value(builder, cgutils.get_null_value(VEC))
        full = builder.sub(n, builder.srem(n, ir.Constant(intp, LANES)))
        with cgutils.for_range_slice(builder, ir.Constant(intp, 0), full,
                                     ir.Constant(intp, LANES), intp) as (j, _):
            at = vector_at(builder, row.data, j)
            e = _vector_exp(builder, builder.fsub(builder.load(at, align=4), shift),
                            scale_in_one_instruction)
            builder.store(e, at, align=4)
            builder.store(builder.fadd(builder.load(total), e), total)
        with builder.if_then(builder.icmp_signed("<", full, n)):
            # the last n - full elements; lanes past the end read shift, so e is 1 there:
            # they are neither stored nor summed
            at = vector_at(builder, row.data, full)
            mask = lanes_below(builder, builder.sub(n, full))
            y = builder.fsub(builder.call(load, [at, align, mask, shift]), shift)
            e = _vector_exp(builder, y, scale_in_one_instruction)
            builder.call(store, [e, at, align, mask])
            kept = builder.select(mask, e, cgutils.get_null_value(VEC))
            builder.store(builder.fadd(builder.load(total), kept), total)
        return builder.call(reduce_add, [ir.Constant(F32, 0.0), builder.load(total)])

    return codegen


# scalef (AVX-512) where the CPU has it; the exponent bits elsewhere. Both tested.
_exp_shifted_scalef, _exp_shifted_bits = _exp_shifted_vectors(True), _exp_shifted_vectors(False)
