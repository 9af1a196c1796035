"""Rows of the structured attention biases in <16 x float> LLVM IR, with the tables in registers.

The structured biases look a table up once per score and head: f_h(d) interpolates a distance
table, a pair code indexes a code table. x86 gathers are slow and LLVM does not emit them here,
so the Numba loops did one scalar load per lookup (about 1 ns per score). A table of at most
``TABLE_ENTRIES`` = 64 float32 entries fits in 4 AVX-512 registers, and ``vpermi2ps`` picks 16
entries out of 32 in one instruction: a lookup is two permutes and a blend per 16 scores. The
distance d = |x_i - y_j| comes from ``vrsqrt14ps`` refined by one Newton step (about 1 ulp; a
``vsqrtps`` and a division would take longer), which also gives the 1 / d of the gradients.

Every kernel here works on one row of a tile: ``n`` scores or score gradients in a contiguous
float32 row, 16 lanes at a time with a masked tail (the distance kernels in two passes, see
below). Pointers are addresses (``arr.ctypes.data``)
of float32 arrays with unit stride; callers check the table size. They need AVX-512F (the
permutes, compress and rsqrt14 instructions): ``IN_REGISTERS`` says whether the host has it, and
``attention_bias.py`` keeps the Numba loops for float64 and for other CPUs.

Formulas (those of ``kernels/structured_bias_math``): u = min(d / step, C - 1),
k = min(floor(u), C - 2), w = u - k, f = T[k] + w (T[k + 1] - T[k]); hidden where not
d <= cutoff (NaN positions included).
"""
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from .llvm_vectors import (AVX512, F32, I32, LANES, MASK, VEC, declare, lanes_below,
                           masked_load, masked_store, splat, vector_at)

# Entries of a table held in registers: 4 registers of 16 floats.
TABLE_REGISTERS = 4
TABLE_ENTRIES = TABLE_REGISTERS * LANES
IVEC = ir.VectorType(I32, LANES)
I16 = ir.IntType(16)
_ALIGN = ir.Constant(I32, 4)
# The smallest squared distance whose 1 / sqrt is taken (its 1 / sqrt, 1e15, stays finite).
TINY = 1e-30


# The kernels here need AVX-512F (the permutes, compress and rsqrt14 instructions).
IN_REGISTERS = AVX512


def _floats(value):
    return ir.Constant(VEC, [float(value)] * LANES)


def _ints(value):
    return ir.Constant(IVEC, [int(value)] * LANES)


def _float_pointer(builder, address):
    return builder.inttoptr(address, F32.as_pointer())


def _load(builder, base, offset, mask):
    """16 floats from base + offset; with a mask, lanes outside it read 0."""
    at = vector_at(builder, base, offset)
    if mask is None:
        return builder.load(at, align=4)
    return builder.call(masked_load(builder.module), [at, _ALIGN, mask,
                                                      cgutils.get_null_value(VEC)])


def _store(builder, value, base, offset, mask):
    at = vector_at(builder, base, offset)
    if mask is None:
        builder.store(value, at, align=4)
    else:
        builder.call(masked_store(builder.module), [value, at, _ALIGN, mask])


def _in_chunks(builder, n, body):
    """body(at, mask) for each 16 lanes of a row of n: mask None on the full chunks, then the
    tail's lanes once (a mask per chunk cost 4 instructions of about 35)."""
    intp = n.type
    full = builder.sub(n, builder.srem(n, ir.Constant(intp, LANES)))
    with cgutils.for_range_slice(builder, ir.Constant(intp, 0), full, ir.Constant(intp, LANES),
                                 intp) as (at, _):
        body(at, None)
    with builder.if_then(builder.icmp_signed("<", full, n)):
        body(full, lanes_below(builder, builder.sub(n, full)))


def _add_where(builder, lanes, total, value):
    """total + value in the lanes selected, total elsewhere: one masked add (total +
    select(lanes, value, 0) is two: it would turn a -0 total into +0)."""
    return builder.select(lanes, builder.fadd(total, value), total)


def _and_mask(builder, lanes, mask):
    return lanes if mask is None else builder.and_(lanes, mask)


def _table(builder, table, n_entries):
    """(values, slopes): table[e] and table[e + 1] - table[e] for e < TABLE_ENTRIES in
    TABLE_REGISTERS registers each, zeros past the end (never read: callers index below C)."""
    intp = n_entries.type
    values, slopes = [], []
    for q in range(TABLE_REGISTERS):
        first = ir.Constant(intp, q * LANES)
        value = _load(builder, table, first, lanes_below(builder, builder.sub(n_entries, first)))
        following = builder.add(first, ir.Constant(intp, 1))
        upper = _load(builder, table, following,
                      lanes_below(builder, builder.sub(n_entries, following)))
        values.append(value)
        slopes.append(builder.fsub(upper, value))
    return values, slopes


def _lookup(builder, registers, index):
    """registers[index // 16][index % 16] per lane, for 0 <= index < TABLE_ENTRIES: each
    vpermi2ps reads 32 entries (index bits 0-4), bit 5 picks between the two halves."""
    pick = declare(builder.module, "llvm.x86.avx512.vpermi2var.ps.512", VEC, [VEC, IVEC, VEC])
    low = builder.call(pick, [registers[0], index, registers[1]])
    high = builder.call(pick, [registers[2], index, registers[3]])
    upper = builder.icmp_signed("!=", builder.and_(index, _ints(2 * LANES)), _ints(0))
    return builder.select(upper, high, low)


def _table_coordinates(builder, x_i, y_rows, at, mask, inv_step, cutoff):
    """The first pass over 16 keys: (u, 1 / d) with u = d / step, NaN where hidden (beyond
    the cutoff, NaN positions); 1 / d is huge but finite at d = 0 (where r = 0)."""
    module = builder.module
    fma = declare(module, "llvm.fma.v16f32", VEC, [VEC, VEC, VEC])
    rsqrt = declare(module, "llvm.x86.avx512.rsqrt14.ps.512", VEC, [VEC, VEC, I16])
    r = _displacements(builder, x_i, y_rows, at, mask)
    d2 = builder.call(fma, [r[2], r[2], builder.call(fma, [r[1], r[1], builder.fmul(r[0], r[0])])])
    # 1 / sqrt of at least TINY, so that d = d2 / sqrt(d2) is 0, not NaN, at d2 = 0 (x86's max
    # returns its second operand for NaN: NaN d2 still gives NaN d)
    tiny = _floats(TINY)
    guess = builder.call(rsqrt, [builder.select(builder.fcmp_ordered(">", d2, tiny), d2, tiny),
                                 cgutils.get_null_value(VEC), ir.Constant(I16, -1)])
    # one Newton step, from rsqrt14's 14 bits to about float32's 24:
    # 1 / d = y h and d = d2 y h with h = 3/2 - (d2 y) y / 2
    d2_guess = builder.fmul(d2, guess)
    h = builder.call(fma, [builder.fmul(d2_guess, guess), _floats(-0.5), _floats(1.5)])
    u = builder.fmul(builder.fmul(d2_guess, splat(builder, inv_step, VEC)), h)
    visible = builder.fcmp_ordered("<=", d2, splat(builder, builder.fmul(cutoff, cutoff), VEC))
    return builder.select(visible, u, _floats(float("nan"))), builder.fmul(guess, h)


def _displacements(builder, x_i, y_rows, at, mask):
    """r = x_i - y for 16 keys (3 vectors)."""
    return [builder.fsub(x, _load(builder, y, at, mask)) for x, y in zip(x_i, y_rows)]


def _entries(builder, u):
    """(k, w) with u = k + w, for u in [0, C - 1) (other lanes: any k, callers replace them):
    u >= 0, so truncation is the floor."""
    entry = builder.fptosi(u, IVEC)
    return entry, builder.fsub(u, builder.sitofp(entry, VEC))


def _float32_args(context, builder, signature, args, first):
    """args[first:] cast to float32."""
    return [context.cast(builder, a, t, types.float32)
            for a, t in zip(args[first:], signature.args[first:])]


# Both distance kernels go over a row twice: u (and 1 / d) into scratch buffers, then the
# lookups. In one pass, the chain from the coordinates to the score (subtractions, rsqrt and
# its Newton step, conversion, permutes, interpolation) is about 75 cycles per 16 keys, longer
# than the scheduler can overlap: the loop ran at about 30 cycles per 16 keys.

@intrinsic
def distance_row_add(typingctx, row, yx, yy, yz, table, scratch, n, n_entries, xi, yi, zi,
                     inv_step, last, cutoff):
    """row[c] += f(|x_i - y_c|) for c < n, and -inf where hidden. row, yx, yy, yz (the key
    coordinates), table (C <= TABLE_ENTRIES entries) and scratch (room for n + 16 floats) are
    addresses; inv_step = (C - 1) / r_max, last = C - 1."""
    def codegen(context, builder, signature, args):
        row, yx, yy, yz, table, scratch = (_float_pointer(builder, a) for a in args[:6])
        n, n_entries = args[6], args[7]
        xi, yi, zi, inv_step, last, cutoff = _float32_args(context, builder, signature, args, 8)
        fma = declare(builder.module, "llvm.fma.v16f32", VEC, [VEC, VEC, VEC])
        values, slopes = _table(builder, table, n_entries)
        beyond = splat(builder, builder.load(builder.gep(
            table, [builder.sub(n_entries, ir.Constant(n_entries.type, 1))])), VEC)
        last_v = splat(builder, last, VEC)
        x_i = [splat(builder, x, VEC) for x in (xi, yi, zi)]

        def coordinates(at, mask):
            u, _ = _table_coordinates(builder, x_i, (yx, yy, yz), at, mask, inv_step, cutoff)
            _store(builder, u, scratch, at, None)

        def add(at, mask):
            u = _load(builder, scratch, at, None)
            entry, weight = _entries(builder, u)
            value = builder.call(fma, [weight, _lookup(builder, slopes, entry),
                                       _lookup(builder, values, entry)])
            # constant (the last entry) beyond r_max; -inf where hidden (u is NaN)
            value = builder.select(builder.fcmp_ordered("<", u, last_v), value, beyond)
            value = builder.select(builder.fcmp_unordered("uno", u, u), _floats(float("-inf")),
                                   value)
            _store(builder, builder.fadd(_load(builder, row, at, mask), value), row, at, mask)

        _in_chunks(builder, n, coordinates)
        _in_chunks(builder, n, add)
        return context.get_dummy_value()

    return types.none(row, yx, yy, yz, table, scratch, n, n_entries, xi, yi, zi, inv_step, last,
                      cutoff), codegen


@intrinsic
def distance_row_grads(typingctx, g, yx, yy, yz, dyx, dyy, dyz, table, scratch_u,
                       scratch_inv_d, near_entry, near_low, near_high, sums, n, n_entries, xi,
                       yi, zi, inv_step, last, cutoff):
    """The gradients of one row of distance biases from g[c] = dL/dscore, c < n (0 where
    hidden); returns n_near. All but the last eight arguments are addresses.

    With coef = g df/dd / d (0 where hidden or beyond r_max; at d = 0, r = 0) and
    r = x_i - y_c: dy_axis[c] -= coef r_axis; sums = (sum coef r_x, sum coef r_y,
    sum coef r_z, the sum of g over the visible keys beyond r_max, which all add into the
    last table entry). The keys below r_max are packed in order into near_entry (int32 k),
    near_low (g (1 - w)) and near_high (g w), for the caller's scatter-adds into table
    entries k and k + 1. The two scratch buffers and the three near buffers need room for
    n + 16 values."""
    def codegen(context, builder, signature, args):
        module = builder.module
        (g, yx, yy, yz, dyx, dyy, dyz, table, scratch_u, scratch_inv_d, near_entry, near_low,
         near_high, sums) = (_float_pointer(builder, a) for a in args[:14])
        n, n_entries = args[14], args[15]
        intp = n.type
        xi, yi, zi, inv_step, last, cutoff = _float32_args(context, builder, signature, args, 16)
        fma = declare(module, "llvm.fma.v16f32", VEC, [VEC, VEC, VEC])
        compress = declare(module, "llvm.x86.avx512.mask.compress.v16f32", VEC,
                           [VEC, VEC, MASK])
        popcount = declare(module, "llvm.ctpop.i16", I16, [I16])
        reduce_add = declare(module, "llvm.vector.reduce.fadd.v16f32", F32, [F32, VEC])
        zero = cgutils.get_null_value(VEC)
        _, slopes = _table(builder, table, n_entries)
        # df/dd = (T[k+1] - T[k]) / step: the slopes in units of distance
        slopes = [builder.fmul(slope, splat(builder, inv_step, VEC)) for slope in slopes]
        last_v = splat(builder, last, VEC)
        x_i = [splat(builder, x, VEC) for x in (xi, yi, zi)]
        totals = [cgutils.alloca_once_value(builder, zero) for _ in range(4)]
        count = cgutils.alloca_once_value(builder, ir.Constant(intp, 0))

        def coordinates(at, mask):
            u, inv_d = _table_coordinates(builder, x_i, (yx, yy, yz), at, mask, inv_step,
                                          cutoff)
            _store(builder, u, scratch_u, at, None)
            _store(builder, inv_d, scratch_inv_d, at, None)

        def gradients(at, mask):
            u = _load(builder, scratch_u, at, None)
            gv = _load(builder, g, at, mask)
            far = builder.fcmp_ordered(">=", u, last_v)  # not NaN: visible
            builder.store(_add_where(builder, far, builder.load(totals[3]), gv), totals[3])
            near = _and_mask(builder, builder.fcmp_ordered("<", u, last_v), mask)
            entry, weight = _entries(builder, u)
            # forward: f = T[k] + w (T[k+1] - T[k]), w = d / step - k  =>
            #   df/dx_i = (T[k+1] - T[k]) / step * r / d = -df/dy_j
            coef = builder.fmul(builder.fmul(gv, _lookup(builder, slopes, entry)),
                                _load(builder, scratch_inv_d, at, None))
            r = _displacements(builder, x_i, (yx, yy, yz), at, mask)
            for axis, dy in enumerate((dyx, dyy, dyz)):
                # masked, not multiplied by 0: a hidden NaN position must not reach the sums
                total = builder.load(totals[axis])
                builder.store(builder.select(near, builder.call(fma, [coef, r[axis], total]),
                                             total), totals[axis])
                old = _load(builder, dy, at, mask)
                minus = builder.call(fma, [builder.fneg(coef), r[axis], old])
                _store(builder, builder.select(near, minus, old), dy, at, mask)
            # forward: f = (1 - w) T[k] + w T[k + 1]  =>  dT[k] += g (1 - w), dT[k+1] += g w
            high = builder.fmul(gv, weight)
            low = builder.fsub(gv, high)
            packed_at = builder.load(count)
            for lanes, buffer in ((builder.bitcast(entry, VEC), near_entry), (low, near_low),
                                  (high, near_high)):
                builder.store(builder.call(compress, [lanes, zero, near]),
                              vector_at(builder, buffer, packed_at), align=4)
            packed = builder.zext(builder.call(popcount, [builder.bitcast(near, I16)]), intp)
            builder.store(builder.add(packed_at, packed), count)

        _in_chunks(builder, n, coordinates)
        _in_chunks(builder, n, gradients)
        for t, total in enumerate(totals):
            # reassoc: a tree of adds, not 16 in a chain
            summed = builder.call(reduce_add, [ir.Constant(F32, 0.0), builder.load(total)],
                                  fastmath=("reassoc",))
            builder.store(summed, builder.gep(sums, [ir.Constant(intp, t)]))
        return builder.load(count)

    return types.intp(g, yx, yy, yz, dyx, dyy, dyz, table, scratch_u, scratch_inv_d,
                      near_entry, near_low, near_high, sums, n, n_entries, xi, yi, zi, inv_step,
                      last, cutoff), codegen


def _load_codes(builder, codes_type, data, at, mask):
    """16 codes from data + at as int32 (with a mask, lanes outside it read 0)."""
    width = codes_type.dtype.bitwidth
    lanes = ir.VectorType(ir.IntType(width), LANES)
    address = builder.bitcast(builder.gep(data, [at]), lanes.as_pointer())
    if mask is None:
        loaded = builder.load(address, align=width // 8)
    else:
        load = declare(builder.module, f"llvm.masked.load.v16i{width}.p0", lanes,
                       [lanes.as_pointer(), I32, MASK, lanes])
        loaded = builder.call(load, [address, ir.Constant(I32, width // 8), mask,
                                     cgutils.get_null_value(lanes)])
    return loaded if width == 32 else builder.sext(loaded, IVEC)


def _is_code_row(codes):
    return (isinstance(codes, types.Array) and codes.ndim == 1
            and codes.dtype in (types.int8, types.int16, types.int32))


def _prefetch(builder, address, n_bytes):
    """Asks for the n_bytes from address in the caches, a line (64 bytes) at a time; any
    address will do (a prefetch never faults)."""
    byte_pointer = ir.IntType(8).as_pointer()
    prefetch = declare(builder.module, "llvm.prefetch.p0", ir.VoidType(),
                       [byte_pointer, I32, I32, I32])
    intp = n_bytes.type
    with cgutils.for_range_slice(builder, ir.Constant(intp, 0), n_bytes, ir.Constant(intp, 64),
                                 intp) as (offset, _):
        at = builder.inttoptr(builder.add(address, offset), byte_pointer)
        # read, keep in all cache levels, data
        builder.call(prefetch, [at, ir.Constant(I32, 0), ir.Constant(I32, 3), ir.Constant(I32, 1)])


@intrinsic
def code_row_add(typingctx, row, codes, table, ahead, n, n_entries):
    """row[c] += table[codes[c]] for c < n, -inf where the code is negative. row and table
    (C <= TABLE_ENTRIES entries, all codes < C) are addresses; codes a 1-D int8, int16 or int32
    array with unit stride. ``ahead``: the address of codes that a later call reads (n of
    them), prefetched: a code row of a large (N, M) array starts a page of its own, where the
    hardware prefetcher starts cold."""
    if not _is_code_row(codes):
        return None

    def codegen(context, builder, signature, args):
        row, table = _float_pointer(builder, args[0]), _float_pointer(builder, args[2])
        data = context.make_array(codes)(context, builder, args[1]).data
        n, n_entries = args[4], args[5]
        _prefetch(builder, args[3], builder.mul(n, ir.Constant(n.type,
                                                               codes.dtype.bitwidth // 8)))
        values, _ = _table(builder, table, n_entries)

        def chunk(at, mask):
            code = _load_codes(builder, codes, data, at, mask)
            value = _lookup(builder, values, code)  # any entry for a negative code: replaced
            hidden = builder.icmp_signed("<", code, _ints(0))
            value = builder.select(hidden, _floats(float("-inf")), value)
            _store(builder, builder.fadd(_load(builder, row, at, mask), value), row, at, mask)

        _in_chunks(builder, n, chunk)
        return context.get_dummy_value()

    return types.none(row, codes, table, ahead, n, n_entries), codegen


def _code_sums(n_codes):
    """An intrinsic (g, codes, sums, n) with sums an address of n_codes x 16 floats:
    sums[e * 16 + l] += the g[c] with codes[c] == e of lanes l = c % 16, c < n (negative
    codes add nowhere). One compare and one masked add per code and 16 scores, all in
    registers: no scatter, and no chain of adds into one entry."""
    @intrinsic
    def code_sums(typingctx, g, codes, sums, n):
        if not _is_code_row(codes):
            return None

        def codegen(context, builder, signature, args):
            g, sums = _float_pointer(builder, args[0]), _float_pointer(builder, args[2])
            data = context.make_array(codes)(context, builder, args[1]).data
            n = args[3]
            intp = n.type
            slots = [cgutils.alloca_once_value(builder, _load(
                builder, sums, ir.Constant(intp, e * LANES), None)) for e in range(n_codes)]

            def chunk(at, mask):
                code = _load_codes(builder, codes, data, at, mask)
                gv = _load(builder, g, at, mask)  # 0 past n
                for e, slot in enumerate(slots):
                    hit = builder.icmp_signed("==", code, _ints(e))
                    builder.store(_add_where(builder, hit, builder.load(slot), gv), slot)

            _in_chunks(builder, n, chunk)
            for e, slot in enumerate(slots):
                _store(builder, builder.load(slot), sums, ir.Constant(intp, e * LANES), None)
            return context.get_dummy_value()

        return types.none(g, codes, sums, n), codegen

    return code_sums


# Code tables whose gradient is summed in registers (one register per code): up to 8 or 16.
FEW_CODES, SUMMED_CODES = LANES // 2, LANES
code_sums_8, code_sums_16 = _code_sums(FEW_CODES), _code_sums(SUMMED_CODES)
