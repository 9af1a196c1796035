"""Structured attention biases on the CPU: added to a score tile, differentiated from a dS tile.

Called only from the score modification and the backward of ``attention.py``. A tile covers
queries i0 + r and keys j0 + c of batch b and head h. The arguments are the kernel forms built by
:func:`distance_args` and :func:`pair_args` (see ``seqattn.ops.structured_bias`` for what the
fields mean); the per-pair formulas are those of ``kernels/structured_bias_math`` that the CUDA
kernels use too.

Two paths for the common cases (a distance bias without cell, types or envelope; pair codes
from an array): float32 on a CPU with AVX-512 runs the rows of ``structured_bias_rows.py``,
whose tables sit in registers (their sizes permitting); float64 and other CPUs run the Numba
loops here (``*_loops``), which look each entry up with a scalar load. The relative-position
form needs no lookup when the key positions are consecutive (the default): a row's codes are
then one run of the table, clamped at both ends.

Whether a call has each bias is decided when Numba compiles, not at run time: an absent bias's
kernel form carries None in its flag (``has`` of :class:`DistanceArgs`, ``mode`` of
:class:`PairArgs`), and the public functions here (:func:`add_distance_bias`,
:func:`distance_bias_grads`, :func:`add_pair_bias`, :func:`pair_bias_grads`, :func:`has_distance`,
:func:`has_pair`) then compile to nothing. Attention without a structured bias compiles none of
this file's code, and a model with one bias compiles only that bias's code
(``benchmarks/compile_profile.py``); a pair bias's relative form carries None in its codes, so
that each form compiles its own code only.

Gradients go into buffers owned by one backward task each (no two tasks write the same memory,
so the result is deterministic): dtable (LANES, P, C) and dpair (LANES, C) for this head, dx (3, N)
and dy (3, M) for this batch. The table gradients are scatter-adds, and neighbouring keys often
add into the same entry (every key beyond r_max adds into the last one, every clipped relative
offset into an end code): one accumulator would make each add wait for the previous one's store
(measured 4 ns per score). Key c adds into copy c % LANES instead; the launcher sums the copies.
"""
from collections import namedtuple

import numpy as np
from numba import types
from numba.extending import overload

from .. import structured_bias_math as sbm
from .float32_math import FASTMATH
from .jit_options import njit
from .llvm_vectors import LANES as VECTOR_LANES, unit_stride_row
from .structured_bias_rows import (FEW_CODES, IN_REGISTERS, SUMMED_CODES, TABLE_ENTRIES,
                                   code_row_add, code_sums_8, code_sums_16, distance_row_add,
                                   distance_row_grads)

NEG_INF = -np.inf
# Copies of each table-gradient accumulator (a power of two): enough that a copy's previous add
# has left the store buffer by the time key c + LANES adds into it again.
LANES = 8
LANE_MASK = LANES - 1
# Code rows prefetched ahead of the one read: a row of keys takes about 100 ns, a read from
# memory about as long.
CODE_ROWS_AHEAD = 4
# Room past a row in the buffers of the register kernels (whole 16-lane stores).
PACK_SLACK = VECTOR_LANES

_fractional = njit(inline="always")(sbm.fractional)
_cartesian = njit(inline="always")(sbm.cartesian)
_nearest_image = njit(inline="always")(sbm.nearest_image)
_table_coordinate = njit(inline="always")(sbm.table_coordinate)
_log_envelope = njit(inline="always")(sbm.log_cosine_envelope)
_log_envelope_grad = njit(inline="always")(sbm.log_cosine_envelope_grad)

DistanceArgs = namedtuple(
    "DistanceArgs",
    "has x y table types_q types_k n_types has_types cell inv_cell images periodic inv_step last "
    "cutoff smooth smooth_a zero half one two",
)
PairArgs = namedtuple("PairArgs",
                      "mode codes query_positions key_positions table max_offset consecutive_keys")


def distance_args(distance, dtype):
    """A DistanceCall's kernel form, its scalars in the kernel's float dtype; ``has`` True, or
    None where the call has no distance bias (a kernel then compiles none of its code)."""
    f = np.dtype(dtype).type
    C = distance.table.shape[2]
    cutoff = distance.cutoff
    return DistanceArgs(True if distance.has else None, distance.x, distance.y, distance.table,
                        distance.types_q, distance.types_k, distance.n_types, distance.has_types,
                        distance.cell, distance.inv_cell, distance.images, distance.periodic,
                        f((C - 1) / distance.r_max), f(C - 1), f(cutoff), distance.smooth,
                        f(np.pi / (2 * cutoff)), f(0), f(0.5), f(1), f(2))


def pair_args(pair):
    """A PairCall's kernel form, its mode None where the call has no pair bias (a kernel then
    compiles none of its code), its codes None in the relative form (a kernel then compiles
    the relative form's code only, and the code array's form none of it); consecutive_keys:
    key positions step by one along each row (the relative form's default), so a row's
    relative codes are one run of the table."""
    consecutive = bool(np.all(np.diff(pair.key_positions, axis=1) == 1))
    codes = None if pair.mode == sbm.RELATIVE_OFFSET else pair.codes
    return PairArgs(None if pair.mode == sbm.NO_PAIR else pair.mode, codes,
                    pair.query_positions, pair.key_positions, pair.table, pair.max_offset,
                    consecutive)


def _in_registers_or_loops(in_registers, loops):
    """A function for @njit code that runs ``in_registers`` on float32 tiles on a CPU with
    AVX-512 (the rows of structured_bias_rows.py) and ``loops`` otherwise; both take the tile
    first. The choice is made once per signature, at compile time."""
    def run(*args):
        raise NotImplementedError("callable from @njit code only")

    # not cache=True here: the lambda closes over a dispatcher, whose per-process id would enter
    # its cache key (a miss every process); the @njit(cache=True) callers cache it with them
    @overload(run)
    def _choose(*args):
        kernel = in_registers if args[0].dtype == types.float32 and IN_REGISTERS else loops
        return lambda *args: kernel(*args)
    return run


# The per-pair helpers below take scalars and the arrays they read, never the DistanceArgs
# tuple: an inlined call copies its arguments, and a copy of the tuple takes and drops a
# reference to each of its arrays, per pair (8x the cost of the pair's own work).

@njit(inline="always")
def _minimum_image(rx, ry, rz, b, periodic, half, cell, inv_cell, images):
    """The displacement r wrapped by the minimum image in batch b's periodic cell."""
    fx, fy, fz = _fractional(rx, ry, rz, inv_cell, b)
    rx, ry, rz = _cartesian(fx - np.floor(fx + half), fy - np.floor(fy + half),
                            fz - np.floor(fz + half), cell, b)
    if periodic == sbm.TRICLINIC:
        rx, ry, rz = _nearest_image(rx, ry, rz, images, b)
    return rx, ry, rz


@njit(inline="always")
def _entry(u, last, one):
    """(k, w): u interpolates table entries k and k + 1 as (1 - w) T[k] + w T[k + 1]."""
    lower = min(np.floor(u), last - one)
    return int(lower), u - lower


# --- The open case (no cell, types or envelope): x_rows (3, rows) and y_cols (3, cols) are the
# tile's query and key coordinates, tab (C,) the head's table.

@njit(cache=True, fastmath=FASTMATH, error_model="numpy")
def _open_row_entries(entry, weight, xi, yi, zi, yx, yy, yz, inv_step, last, one, cutoff):
    """Each key's table entry (-1 where hidden: beyond the cutoff, NaN positions) and weight,
    in a loop LLVM vectorises."""
    for c in range(entry.shape[0]):
        rx = xi - yx[c]
        ry = yi - yy[c]
        rz = zi - yz[c]
        d = np.sqrt(rx * rx + ry * ry + rz * rz)
        u = _table_coordinate(d, inv_step, last)
        lower = min(np.floor(u), last - one)
        weight[c] = u - lower
        entry[c] = np.int32(lower) if d <= cutoff else np.int32(-1)


@njit(cache=True, fastmath=FASTMATH, error_model="numpy")
def _add_interpolated(row, entry, weight, tab):
    """row[c] += (1 - w) T[k] + w T[k + 1], -inf where k = -1: a scalar load per lookup."""
    for c in range(row.shape[0]):
        k = max(entry[c], 0)
        low = tab[k]
        value = low + weight[c] * (tab[k + 1] - low)
        row[c] = row[c] + value if entry[c] >= 0 else NEG_INF


@njit(cache=True, fastmath=FASTMATH, error_model="numpy")
def add_open_distance_loops(s, x_rows, y_cols, tab, inv_step, last, one, cutoff):
    """s[r, c] += f(|x_r - y_c|), -inf beyond the cutoff or for NaN positions (Numba loops)."""
    rows, cols = s.shape
    entry = np.empty(cols, np.int32)
    weight = np.empty(cols, s.dtype)
    for r in range(rows):
        _open_row_entries(entry, weight, x_rows[0, r], x_rows[1, r], x_rows[2, r], y_cols[0],
                          y_cols[1], y_cols[2], inv_step, last, one, cutoff)
        _add_interpolated(s[r], entry, weight, tab)


@njit(cache=True)
def add_open_distance_in_registers(s, x_rows, y_cols, tab, inv_step, last, one, cutoff):
    """add_open_distance_loops for float32 on AVX-512: rows by distance_row_add while the table
    fits in registers. s's rows, y_cols' rows and tab need unit stride."""
    rows, cols = s.shape
    if tab.shape[0] > TABLE_ENTRIES:
        add_open_distance_loops(s, x_rows, y_cols, tab, inv_step, last, one, cutoff)
        return
    scratch = np.empty(cols + PACK_SLACK, s.dtype)
    for r in range(rows):
        distance_row_add(s[r].ctypes.data, y_cols[0].ctypes.data, y_cols[1].ctypes.data,
                         y_cols[2].ctypes.data, tab.ctypes.data, scratch.ctypes.data, cols,
                         tab.shape[0], x_rows[0, r], x_rows[1, r], x_rows[2, r], inv_step, last,
                         cutoff)


_add_open_distance = _in_registers_or_loops(add_open_distance_in_registers,
                                            add_open_distance_loops)


@njit(cache=True, fastmath=FASTMATH, error_model="numpy")
def _row_axis_grads(dy_axis, coef, xi, y_axis, zero):
    """One axis of a row's position gradients: returns sum_c coef[c] r_c and subtracts
    coef[c] r_c from dy_axis[c], r_c = xi - y_axis[c], skipping coef[c] = 0 (one store per
    loop, so LLVM vectorises it)."""
    total = zero
    for c in range(coef.shape[0]):
        # coef = 0 for hidden keys, whose NaN position must not reach the sum
        term = coef[c] * (xi - y_axis[c]) if coef[c] != zero else zero
        total += term
        dy_axis[c] -= term
    return total


@njit(cache=True, fastmath=FASTMATH, error_model="numpy")
def _open_row_far_sum(g_row, entry, weight, one, zero):
    """sum of g over the row's far keys: visible and beyond r_max (w = 1 on the last entry),
    where f is the constant last entry, so they add only into it (a vectorised reduction)."""
    total = zero
    for c in range(g_row.shape[0]):
        total += g_row[c] if entry[c] >= 0 and weight[c] == one else zero
    return total


@njit(cache=True, fastmath=FASTMATH, error_model="numpy")
def _open_row_near_keys(near, coef, entry, weight, one, zero):
    """Writes the near keys' columns (visible, below r_max) to near[:n] and returns n; zeroes
    coef. Branch-free: whether a key is near is data, which a branch would mispredict."""
    coef[:] = zero
    n = 0
    for c in range(entry.shape[0]):
        near[n] = c
        n += np.int32((entry[c] >= 0) & (weight[c] < one))
    return n


@njit(cache=True, fastmath=FASTMATH, error_model="numpy")
def _open_row_table_grads(dtab, coef, g_row, entry, weight, tab, near, n_near, xi, yi, zi, yx,
                          yy, yz, inv_step, one, zero):
    """dtab (LANES, C) += g d f/d table for one row; coef[c] = g df/dd / d, the factor of
    x_i - y_j in the position gradients (0 where hidden, beyond r_max, or at d = 0). The far
    keys add only into the last entry (f is constant there), summed apart; the near ones take
    a scalar loop of table lookups and scatters."""
    dtab[0, dtab.shape[1] - 1] += _open_row_far_sum(g_row, entry, weight, one, zero)
    for t in range(n_near):
        c = near[t]
        g = g_row[c]
        k = entry[c]
        w = weight[c]
        lane = t & LANE_MASK
        # forward: value = (1 - w) T[k] + w T[k + 1]
        dtab[lane, k] += g - g * w
        dtab[lane, k + 1] += g * w
        # forward: d = |x_i - y_j|, u = d / step  =>  df/dx_i = (T[k+1] - T[k]) / step r / d
        rx = xi - yx[c]
        ry = yi - yy[c]
        rz = zi - yz[c]
        d = np.sqrt(rx * rx + ry * ry + rz * rz)
        coef[c] = g * (tab[k + 1] - tab[k]) * inv_step / d if d > 0 else zero


@njit(cache=True, fastmath=FASTMATH, error_model="numpy")
def open_distance_grads_loops(ds, x_rows, y_cols, tab, inv_step, last, one, zero, cutoff, dtab,
                              dx_rows, dy_cols):
    """From dS (rows, cols): dtab (LANES, C) += dS df/d table (copies as in the module
    docstring), dx_rows (3, rows) += dS df/dx_i, dy_cols (3, cols) += dS df/dy_j (Numba loops).
    Hidden pairs have dS = 0 exactly."""
    rows, cols = ds.shape
    entry = np.empty(cols, np.int32)
    weight = np.empty(cols, ds.dtype)
    coef = np.empty(cols, ds.dtype)
    near = np.empty(cols, np.int32)
    yx, yy, yz = y_cols[0], y_cols[1], y_cols[2]
    for r in range(rows):
        xi, yi, zi = x_rows[0, r], x_rows[1, r], x_rows[2, r]
        _open_row_entries(entry, weight, xi, yi, zi, yx, yy, yz, inv_step, last, one, cutoff)
        n_near = _open_row_near_keys(near, coef, entry, weight, one, zero)
        _open_row_table_grads(dtab, coef, ds[r], entry, weight, tab, near, n_near, xi, yi, zi,
                              yx, yy, yz, inv_step, one, zero)
        dx_rows[0, r] += _row_axis_grads(dy_cols[0], coef, xi, yx, zero)
        dx_rows[1, r] += _row_axis_grads(dy_cols[1], coef, yi, yy, zero)
        dx_rows[2, r] += _row_axis_grads(dy_cols[2], coef, zi, yz, zero)


@njit(cache=True)
def open_distance_grads_in_registers(ds, x_rows, y_cols, tab, inv_step, last, one, zero, cutoff,
                                     dtab, dx_rows, dy_cols):
    """open_distance_grads_loops for float32 on AVX-512 while the table fits in registers:
    distance_row_grads does all but the near keys' scatter-adds into the table gradient."""
    rows, cols = ds.shape
    C = tab.shape[0]
    if C > TABLE_ENTRIES:
        open_distance_grads_loops(ds, x_rows, y_cols, tab, inv_step, last, one, zero, cutoff,
                                  dtab, dx_rows, dy_cols)
        return
    scratch = np.empty((2, cols + PACK_SLACK), ds.dtype)
    near_entry = np.empty(cols + PACK_SLACK, np.int32)
    near_low = np.empty(cols + PACK_SLACK, ds.dtype)
    near_high = np.empty(cols + PACK_SLACK, ds.dtype)
    sums = np.empty(4, ds.dtype)
    for r in range(rows):
        n_near = distance_row_grads(
            ds[r].ctypes.data, y_cols[0].ctypes.data, y_cols[1].ctypes.data,
            y_cols[2].ctypes.data, dy_cols[0].ctypes.data, dy_cols[1].ctypes.data,
            dy_cols[2].ctypes.data, tab.ctypes.data, scratch[0].ctypes.data,
            scratch[1].ctypes.data, near_entry.ctypes.data, near_low.ctypes.data,
            near_high.ctypes.data, sums.ctypes.data, cols, C, x_rows[0, r], x_rows[1, r],
            x_rows[2, r], inv_step, last, cutoff)
        dx_rows[0, r] += sums[0]
        dx_rows[1, r] += sums[1]
        dx_rows[2, r] += sums[2]
        dtab[0, C - 1] += sums[3]
        for t in range(n_near):
            lane = t & LANE_MASK
            k = near_entry[t]
            dtab[lane, k] += near_low[t]
            dtab[lane, k + 1] += near_high[t]


_open_distance_grads = _in_registers_or_loops(open_distance_grads_in_registers,
                                              open_distance_grads_loops)


@njit(inline="always")
def _open_case(dist):
    return dist.periodic == sbm.NOT_PERIODIC and not dist.has_types and not dist.smooth


# --- Distance biases, any case.

@njit(cache=True, fastmath=FASTMATH, error_model="numpy")
def _add_distance_bias(s, b, h, i0, j0, dist):
    """s[r, c] += f_h(d(i0 + r, j0 + c)); -inf beyond the cutoff or for NaN positions."""
    rows, cols = s.shape
    xq, yk = dist.x[b], dist.y[b]
    tab = dist.table[h]
    if _open_case(dist):
        _add_open_distance(s, xq[:, i0:i0 + rows], yk[:, j0:j0 + cols], tab[0], dist.inv_step,
                           dist.last, dist.one, dist.cutoff)
        return
    periodic, half = dist.periodic, dist.half
    cell, inv_cell, images = dist.cell, dist.inv_cell, dist.images
    for r in range(rows):
        i = i0 + r
        row = s[r]
        p0 = dist.types_q[b, i] * dist.n_types if dist.has_types else 0
        for c in range(cols):
            j = j0 + c
            rx, ry, rz = xq[0, i] - yk[0, j], xq[1, i] - yk[1, j], xq[2, i] - yk[2, j]
            if periodic != sbm.NOT_PERIODIC:
                rx, ry, rz = _minimum_image(rx, ry, rz, b, periodic, half, cell, inv_cell,
                                            images)
            d = np.sqrt(rx * rx + ry * ry + rz * rz)
            if not d <= dist.cutoff:
                row[c] = NEG_INF
                continue
            p = p0 + dist.types_k[b, j] if dist.has_types else 0
            k, w = _entry(_table_coordinate(d, dist.inv_step, dist.last), dist.last, dist.one)
            value = tab[p, k] + w * (tab[p, k + 1] - tab[p, k])
            if dist.smooth:
                value += _log_envelope(d, dist.smooth_a, dist.two)
            row[c] += value


@njit(cache=True, fastmath=FASTMATH, error_model="numpy")
def _distance_bias_grads(ds, b, h, i0, j0, dist, dtab, dx, dy):
    """From dS = dL/dscore of a tile: dtab (LANES, P, C) += dS d f/d table (key c into copy
    c % LANES), dx (3, N) += dS df/dx_i, dy (3, M) += dS df/dy_j. Hidden pairs have dS = 0
    exactly."""
    rows, cols = ds.shape
    xq, yk = dist.x[b], dist.y[b]
    tab = dist.table[h]
    if _open_case(dist):
        _open_distance_grads(ds, xq[:, i0:i0 + rows], yk[:, j0:j0 + cols], tab[0], dist.inv_step,
                             dist.last, dist.one, dist.zero, dist.cutoff, dtab[:, 0],
                             dx[:, i0:i0 + rows], dy[:, j0:j0 + cols])
        return
    periodic, half = dist.periodic, dist.half
    cell, inv_cell, images = dist.cell, dist.inv_cell, dist.images
    for r in range(rows):
        i = i0 + r
        p0 = dist.types_q[b, i] * dist.n_types if dist.has_types else 0
        gx = gy = gz = dist.zero
        for c in range(cols):
            g = ds[r, c]
            if g == 0:
                continue
            j = j0 + c
            rx, ry, rz = xq[0, i] - yk[0, j], xq[1, i] - yk[1, j], xq[2, i] - yk[2, j]
            if periodic != sbm.NOT_PERIODIC:
                rx, ry, rz = _minimum_image(rx, ry, rz, b, periodic, half, cell, inv_cell,
                                            images)
            d = np.sqrt(rx * rx + ry * ry + rz * rz)
            p = p0 + dist.types_k[b, j] if dist.has_types else 0
            u = _table_coordinate(d, dist.inv_step, dist.last)
            k, w = _entry(u, dist.last, dist.one)
            lane = c & LANE_MASK
            # forward: value = (1 - w) T[k] + w T[k + 1]
            dtab[lane, p, k] += g - g * w
            dtab[lane, p, k + 1] += g * w
            slope = dist.zero  # constant beyond r_max
            if d * dist.inv_step < dist.last:
                slope = (tab[p, k + 1] - tab[p, k]) * dist.inv_step
            if dist.smooth:
                slope += _log_envelope_grad(d, dist.smooth_a, dist.two)
            # forward: d = |x_i - y_j|  =>  dd/dx_i = r / d = -dd/dy_j (zero at d = 0)
            coef = g * slope / d if d > 0 else dist.zero
            gx += coef * rx
            gy += coef * ry
            gz += coef * rz
            dy[0, j] -= coef * rx
            dy[1, j] -= coef * ry
            dy[2, j] -= coef * rz
        dx[0, i] += gx
        dx[1, i] += gy
        dx[2, i] += gz


# --- Pair codes from an array: codes (rows, cols) is the tile's block of codes, tab (C,) the
# head's table.

@njit(cache=True, fastmath=FASTMATH, error_model="numpy")
def add_codes_loops(s, codes, tab):
    """s[r, c] += tab[codes[r, c]], -inf where the code is negative (Numba loops)."""
    for r in range(s.shape[0]):
        row, code_row = s[r], codes[r]
        for c in range(s.shape[1]):
            code = code_row[c]
            row[c] = row[c] + tab[max(code, 0)] if code >= 0 else NEG_INF


@njit(cache=True)
def add_codes_in_registers(s, codes, tab):
    """add_codes_loops for float32 on AVX-512: rows by code_row_add while the table fits in
    registers. s's and codes' rows and tab need unit stride."""
    if tab.shape[0] > TABLE_ENTRIES:
        add_codes_loops(s, codes, tab)
        return
    for r in range(s.shape[0]):
        # the row CODE_ROWS_AHEAD below (in the next strip at the end: the kernels walk
        # down a block of keys)
        ahead = codes[r].ctypes.data + CODE_ROWS_AHEAD * codes.strides[0]
        code_row_add(s[r].ctypes.data, codes[r], tab.ctypes.data, ahead, s.shape[1],
                     tab.shape[0])


_add_codes = _in_registers_or_loops(add_codes_in_registers, add_codes_loops)


@njit(cache=True, fastmath=FASTMATH, error_model="numpy")
def code_grads_loops(ds, codes, dtab):
    """dtab (LANES, C) += dS summed per code, key c into copy c % LANES (forward: score +=
    tab[code]; negative codes hide the key and add nowhere). Numba loops."""
    for r in range(ds.shape[0]):
        code_row = codes[r]
        for c in range(ds.shape[1]):
            if code_row[c] >= 0:
                dtab[c & LANE_MASK, code_row[c]] += ds[r, c]


@njit(cache=True)
def code_grads_in_registers(ds, codes, dtab):
    """code_grads_loops for float32 on AVX-512 with at most SUMMED_CODES codes: per-code sums in
    registers (code_sums_8, code_sums_16), added into dtab[0] once per tile."""
    C = dtab.shape[1]
    if C > SUMMED_CODES:
        code_grads_loops(ds, codes, dtab)
        return
    sums = np.zeros((SUMMED_CODES, VECTOR_LANES), ds.dtype)
    for r in range(ds.shape[0]):
        if C <= FEW_CODES:
            code_sums_8(ds[r].ctypes.data, codes[r], sums.ctypes.data, ds.shape[1])
        else:
            code_sums_16(ds[r].ctypes.data, codes[r], sums.ctypes.data, ds.shape[1])
    for e in range(C):
        dtab[0, e] += sums[e].sum()


_code_grads = _in_registers_or_loops(code_grads_in_registers, code_grads_loops)


# --- Relative offsets: code = clip(p_j - p_i, -R, R) + R.

@njit(inline="always")
def _relative_code(query_position, key_position, max_offset):
    offset = key_position - query_position
    return min(max(offset, -max_offset), max_offset) + max_offset


@njit(inline="always")
def _relative_run(query_position, first_key, max_offset, cols):
    """(base, lo, hi) for keys at consecutive positions first_key + c: column c has code
    clip(base + c, 0, 2R), which is base + c for lo <= c < hi, 0 before lo and 2R from hi."""
    base = first_key - query_position + max_offset
    lo = min(max(-base, 0), cols)
    hi = min(max(2 * max_offset + 1 - base, lo), cols)
    return base, lo, hi


@njit(cache=True, fastmath=FASTMATH, error_model="numpy")
def _add_relative_runs(s, query_positions, first_key, tab, max_offset):
    """s[r, c] += tab[clip(first_key + c - query_positions[r], -R, R) + R]: per row two
    constants and one contiguous run of the table, no lookups. (Each loop indexes a view from
    0, so LLVM knows no index is negative and vectorises it; s's rows have unit stride, as the
    attention's padded score tiles do.)"""
    rows, cols = s.shape
    first, final = tab[0], tab[2 * max_offset]
    for r in range(rows):
        base, lo, hi = _relative_run(query_positions[r], first_key, max_offset, cols)
        row = unit_stride_row(s[r])  # a row of a padded score tile
        head, middle, tail = row[:lo], row[lo:hi], row[hi:]
        run = tab[base + lo:base + hi]
        for c in range(head.shape[0]):
            head[c] += first
        for c in range(middle.shape[0]):
            middle[c] += run[c]
        for c in range(tail.shape[0]):
            tail[c] += final


@njit(cache=True, fastmath=FASTMATH, error_model="numpy")
def _relative_runs_grads(ds, query_positions, first_key, max_offset, dtab):
    """dtab (LANES, C) += dS summed per code for consecutive keys: per row the clamped ends
    as two sums and the run as a contiguous add, row r into copy r % LANES (the runs of
    neighbouring rows overlap, shifted by one entry). ds's rows have unit stride."""
    rows, cols = ds.shape
    for r in range(rows):
        base, lo, hi = _relative_run(query_positions[r], first_key, max_offset, cols)
        row = unit_stride_row(ds[r])  # a row of a padded score tile
        head, middle, tail = row[:lo], row[lo:hi], row[hi:]
        out = dtab[r & LANE_MASK]
        run = out[base + lo:base + hi]
        low_sum = ds.dtype.type(0)
        for c in range(head.shape[0]):
            low_sum += head[c]
        high_sum = ds.dtype.type(0)
        for c in range(tail.shape[0]):
            high_sum += tail[c]
        out[0] += low_sum
        out[2 * max_offset] += high_sum
        for c in range(middle.shape[0]):
            run[c] += middle[c]


@njit(cache=True)
def _add_pair_codes(s, b, h, i0, j0, pair):
    """s[r, c] += table[h, code] for the codes of an array; a negative code hides the key
    (-inf)."""
    rows, cols = s.shape
    codes = pair.codes[b if pair.codes.shape[0] > 1 else 0]
    _add_codes(s, codes[i0:i0 + rows, j0:j0 + cols], pair.table[h])


@njit(cache=True, fastmath=FASTMATH, error_model="numpy")
def _add_relative_pair(s, b, h, i0, j0, pair):
    """s[r, c] += table[h, code] for the codes of the relative form."""
    rows, cols = s.shape
    tab = pair.table[h]
    bp = b if pair.query_positions.shape[0] > 1 else 0
    query_positions = pair.query_positions[bp, i0:i0 + rows]
    keys = pair.key_positions[bp, j0:j0 + cols]
    if pair.consecutive_keys:
        _add_relative_runs(s, query_positions, keys[0], tab, pair.max_offset)
        return
    for r in range(rows):
        row = s[r]
        for c in range(cols):
            row[c] += tab[_relative_code(query_positions[r], keys[c], pair.max_offset)]


@njit(cache=True)
def _pair_codes_grads(ds, b, i0, j0, pair, dtab):
    """dtab (LANES, C) += dS summed per code of the array, spread over the LANES copies
    (forward: score += table[h, code])."""
    rows, cols = ds.shape
    codes = pair.codes[b if pair.codes.shape[0] > 1 else 0]
    _code_grads(ds, codes[i0:i0 + rows, j0:j0 + cols], dtab)


@njit(cache=True, fastmath=FASTMATH, error_model="numpy")
def _relative_pair_grads(ds, b, i0, j0, pair, dtab):
    """_pair_codes_grads for the codes of the relative form."""
    rows, cols = ds.shape
    bp = b if pair.query_positions.shape[0] > 1 else 0
    query_positions = pair.query_positions[bp, i0:i0 + rows]
    keys = pair.key_positions[bp, j0:j0 + cols]
    if pair.consecutive_keys:
        _relative_runs_grads(ds, query_positions, keys[0], pair.max_offset, dtab)
        return
    for r in range(rows):
        for c in range(cols):
            code = _relative_code(query_positions[r], keys[c], pair.max_offset)
            dtab[c & LANE_MASK, code] += ds[r, c]


# --- The entry points of attention.py: each compiles to its bias's code where the call has that
# bias (its flag field holds a value) and to nothing where the flag is None.

def _flag_is_none(args, flag):
    """Whether the field ``flag`` of the kernel-form namedtuple type ``args`` is None."""
    return isinstance(args.types[args.fields.index(flag)], types.NoneType)


def _where_present(flag, present):
    """A function for @njit code that runs ``present`` (same arguments) where its kernel-form
    argument (the namedtuple with a ``flag`` field) has that field set, and nothing where it is
    None; the choice is made once per signature, at compile time."""
    def run(*args):
        raise NotImplementedError("callable from @njit code only")

    # not cache=True, as in _in_registers_or_loops
    @overload(run)
    def _choose(*args):
        bias_args = [a for a in args if isinstance(a, types.BaseNamedTuple) and flag in a.fields]
        if _flag_is_none(bias_args[0], flag):
            return lambda *args: None
        return lambda *args: present(*args)
    return run


def _by_pair_form(from_codes, relative):
    """A function for @njit code that runs ``from_codes`` (same arguments) where the call's
    pair bias has an array of codes, ``relative`` where it has the relative form (codes None in
    its kernel form), and nothing where it has none; the choice is made once per signature, at
    compile time."""
    def run(*args):
        raise NotImplementedError("callable from @njit code only")

    # not cache=True, as in _in_registers_or_loops
    @overload(run)
    def _choose(*args):
        pair = next(a for a in args if isinstance(a, types.BaseNamedTuple) and "mode" in a.fields)
        if _flag_is_none(pair, "mode"):
            return lambda *args: None
        kernel = relative if _flag_is_none(pair, "codes") else from_codes
        return lambda *args: kernel(*args)
    return run


def _flag_set(flag):
    """A function for @njit code: whether the kernel-form argument's ``flag`` field holds a
    value, as a constant of the signature."""
    def run(args):
        raise NotImplementedError("callable from @njit code only")

    @overload(run)
    def _choose(args):
        present = not _flag_is_none(args, flag)
        return lambda args: present
    return run


add_distance_bias = _where_present("has", _add_distance_bias)
add_distance_bias.__doc__ = """s[r, c] += f_h(d(i0 + r, j0 + c)) (see _add_distance_bias), or
nothing where the call has no distance bias: (s, b, h, i0, j0, dist)."""
distance_bias_grads = _where_present("has", _distance_bias_grads)
distance_bias_grads.__doc__ = """The distance bias's gradients from a dS tile (see
_distance_bias_grads), or nothing without one: (ds, b, h, i0, j0, dist, dtab, dx, dy)."""
add_pair_bias = _by_pair_form(_add_pair_codes, _add_relative_pair)
add_pair_bias.__doc__ = """s[r, c] += table[h, code] (see _add_pair_codes and _add_relative_pair),
or nothing where the call has no pair bias: (s, b, h, i0, j0, pair)."""
pair_bias_grads = _by_pair_form(_pair_codes_grads, _relative_pair_grads)
pair_bias_grads.__doc__ = """The pair bias's table gradient from a dS tile (see
_pair_codes_grads and _relative_pair_grads), or nothing without one: (ds, b, i0, j0, pair,
dtab)."""
has_distance = _flag_set("has")
has_distance.__doc__ = "Whether the call has a distance bias (DistanceArgs), when compiled."
has_pair = _flag_set("mode")
has_pair.__doc__ = "Whether the call has a pair bias (PairArgs), when compiled."
