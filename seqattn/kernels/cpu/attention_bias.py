"""Structured attention biases on the CPU: added to a score tile, differentiated from a dS tile.

Called only from the score modification and the backward of ``attention.py``. A tile covers
queries i0 + r and keys j0 + c of batch b and head h. The arguments are the kernel forms built by
:func:`distance_args` and :func:`pair_args` (see ``seqattn.ops.structured_bias`` for what the
fields mean); the per-pair formulas are those of ``kernels/structured_bias_math`` that the CUDA
kernels use too.

Gradients go into buffers owned by one backward task each (no two tasks write the same memory,
so the result is deterministic): dtable (LANES, P, C) and dpair (LANES, C) for this head, dx (3, N)
and dy (3, M) for this batch. The table gradients are scatter-adds, and neighbouring keys often
add into the same entry (every key beyond r_max adds into the last one, every clipped relative
offset into an end code): one accumulator would make each add wait for the previous one's store
(measured 4 ns per score). Key c adds into copy c % LANES instead; the launcher sums the copies.
"""
from collections import namedtuple

import numpy as np
from numba import njit

from .. import structured_bias_math as sbm
from .float32_math import FASTMATH

NEG_INF = -np.inf
# Copies of each table-gradient accumulator (a power of two): enough that a copy's previous add
# has left the store buffer by the time key c + LANES adds into it again.
LANES = 8
LANE_MASK = LANES - 1

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
PairArgs = namedtuple("PairArgs", "mode codes query_positions key_positions table max_offset")


def distance_args(distance, dtype):
    """A DistanceCall's kernel form, its scalars in the kernel's float dtype."""
    f = np.dtype(dtype).type
    C = distance.table.shape[2]
    cutoff = distance.cutoff
    return DistanceArgs(distance.has, distance.x, distance.y, distance.table, distance.types_q,
                        distance.types_k, distance.n_types, distance.has_types, distance.cell,
                        distance.inv_cell, distance.images, distance.periodic,
                        f((C - 1) / distance.r_max), f(C - 1), f(cutoff), distance.smooth,
                        f(np.pi / (2 * cutoff)), f(0), f(0.5), f(1), f(2))


def pair_args(pair):
    return PairArgs(pair.mode, pair.codes, pair.query_positions, pair.key_positions, pair.table,
                    pair.max_offset)


@njit(inline="always")
def _displacement(xq, yk, i, j, b, dist):
    """x_i - y_j, by the minimum image in a periodic cell."""
    rx = xq[0, i] - yk[0, j]
    ry = xq[1, i] - yk[1, j]
    rz = xq[2, i] - yk[2, j]
    if dist.periodic != sbm.NOT_PERIODIC:
        fx, fy, fz = _fractional(rx, ry, rz, dist.inv_cell, b)
        rx, ry, rz = _cartesian(fx - np.floor(fx + dist.half), fy - np.floor(fy + dist.half),
                                fz - np.floor(fz + dist.half), dist.cell, b)
        if dist.periodic == sbm.TRICLINIC:
            rx, ry, rz = _nearest_image(rx, ry, rz, dist.images, b)
    return rx, ry, rz


@njit(inline="always")
def _entry(u, last, one):
    """(k, w): u interpolates table entries k and k + 1 as (1 - w) T[k] + w T[k + 1]."""
    lower = min(np.floor(u), last - one)
    return int(lower), u - lower


@njit(cache=True, fastmath=FASTMATH, error_model="numpy")
def _open_row_entries(entry, weight, xi, yi, zi, yx, yy, yz, inv_step, last, one, cutoff):
    """The common case without cell, types or envelope, in a loop LLVM vectorises: each key's
    table entry (-1 where hidden: beyond the cutoff, NaN positions) and weight."""
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
    """row[c] += (1 - w) T[k] + w T[k + 1], -inf where k = -1. A scalar loop: x86 gathers are
    slower than scalar loads since the Downfall microcode, and LLVM does not emit them."""
    for c in range(row.shape[0]):
        k = max(entry[c], 0)
        low = tab[k]
        value = low + weight[c] * (tab[k + 1] - low)
        row[c] = row[c] + value if entry[c] >= 0 else NEG_INF


@njit(cache=True, fastmath=FASTMATH, error_model="numpy")
def add_distance_bias(s, b, h, i0, j0, dist):
    """s[r, c] += f_h(d(i0 + r, j0 + c)); -inf beyond the cutoff or for NaN positions."""
    rows, cols = s.shape
    xq, yk = dist.x[b], dist.y[b]
    tab = dist.table[h]
    if dist.periodic == sbm.NOT_PERIODIC and not dist.has_types and not dist.smooth:
        entry = np.empty(cols, np.int32)
        weight = np.empty(cols, s.dtype)
        for r in range(rows):
            i = i0 + r
            _open_row_entries(entry, weight, xq[0, i], xq[1, i], xq[2, i], yk[0, j0:j0 + cols],
                              yk[1, j0:j0 + cols], yk[2, j0:j0 + cols], dist.inv_step,
                              dist.last, dist.one, dist.cutoff)
            _add_interpolated(s[r], entry, weight, tab[0])
        return
    for r in range(rows):
        i = i0 + r
        row = s[r]
        p0 = dist.types_q[b, i] * dist.n_types if dist.has_types else 0
        for c in range(cols):
            j = j0 + c
            rx, ry, rz = _displacement(xq, yk, i, j, b, dist)
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
def _row_axis_grads(dy_axis, coef, xi, y_axis, zero):
    """One axis of a row's position gradients: returns sum_c coef[c] r_c and subtracts
    coef[c] r_c from dy_axis[c], r_c = xi - y_axis[c] (one store per loop, so LLVM
    vectorises it)."""
    total = zero
    for c in range(coef.shape[0]):
        term = coef[c] * (xi - y_axis[c])
        total += term
        dy_axis[c] -= term
    return total


@njit(cache=True, fastmath=FASTMATH, error_model="numpy")
def _open_row_position_grads(dx, dy, i, coef, xi, yi, zi, yx, yy, yz, j0, zero):
    """dx[:, i] += sum_c coef[c] r_c and dy[:, j0 + c] -= coef[c] r_c, r_c = x_i - y_(j0+c):
    the position gradients of one row."""
    cols = coef.shape[0]
    dx[0, i] += _row_axis_grads(dy[0, j0:j0 + cols], coef, xi, yx, zero)
    dx[1, i] += _row_axis_grads(dy[1, j0:j0 + cols], coef, yi, yy, zero)
    dx[2, i] += _row_axis_grads(dy[2, j0:j0 + cols], coef, zi, yz, zero)


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
def distance_bias_grads(ds, b, h, i0, j0, dist, dtab, dx, dy):
    """From dS = dL/dscore of a tile: dtab (LANES, P, C) += dS d f/d table (key c into copy
    c % LANES), dx (3, N) += dS df/dx_i, dy (3, M) += dS df/dy_j. Hidden pairs have dS = 0
    exactly."""
    rows, cols = ds.shape
    xq, yk = dist.x[b], dist.y[b]
    tab = dist.table[h]
    if dist.periodic == sbm.NOT_PERIODIC and not dist.has_types and not dist.smooth:
        entry = np.empty(cols, np.int32)
        weight = np.empty(cols, ds.dtype)
        coef = np.empty(cols, ds.dtype)
        near = np.empty(cols, np.int32)
        yx, yy, yz = yk[0, j0:j0 + cols], yk[1, j0:j0 + cols], yk[2, j0:j0 + cols]
        for r in range(rows):
            i = i0 + r
            xi, yi, zi = xq[0, i], xq[1, i], xq[2, i]
            _open_row_entries(entry, weight, xi, yi, zi, yx, yy, yz, dist.inv_step, dist.last,
                              dist.one, dist.cutoff)
            n_near = _open_row_near_keys(near, coef, entry, weight, dist.one, dist.zero)
            _open_row_table_grads(dtab[:, 0], coef, ds[r], entry, weight, tab[0], near, n_near,
                                  xi, yi, zi, yx, yy, yz, dist.inv_step, dist.one, dist.zero)
            _open_row_position_grads(dx, dy, i, coef, xi, yi, zi, yx, yy, yz, j0, dist.zero)
        return
    for r in range(rows):
        i = i0 + r
        p0 = dist.types_q[b, i] * dist.n_types if dist.has_types else 0
        gx = gy = gz = dist.zero
        for c in range(cols):
            g = ds[r, c]
            if g == 0:
                continue
            j = j0 + c
            rx, ry, rz = _displacement(xq, yk, i, j, b, dist)
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


@njit(inline="always")
def _relative_code(query_position, key_position, max_offset):
    offset = key_position - query_position
    return min(max(offset, -max_offset), max_offset) + max_offset


@njit(cache=True, fastmath=FASTMATH, error_model="numpy")
def add_pair_bias(s, b, h, i0, j0, pair):
    """s[r, c] += table[h, code]; a negative code hides the key (-inf)."""
    rows, cols = s.shape
    tab = pair.table[h]
    for r in range(rows):
        i = i0 + r
        row = s[r]
        if pair.mode == sbm.CODE_ARRAY:
            codes = pair.codes[b if pair.codes.shape[0] > 1 else 0, i, j0:j0 + cols]
            for c in range(cols):
                code = codes[c]
                row[c] = row[c] + tab[max(code, 0)] if code >= 0 else NEG_INF
        else:
            bp = b if pair.query_positions.shape[0] > 1 else 0
            query_position = pair.query_positions[bp, i]
            keys = pair.key_positions[bp, j0:j0 + cols]
            for c in range(cols):
                row[c] += tab[_relative_code(query_position, keys[c], pair.max_offset)]


@njit(cache=True, fastmath=FASTMATH, error_model="numpy")
def pair_bias_grads(ds, b, i0, j0, pair, dtab):
    """dtab (LANES, C) += dS summed per code, key c into copy c % LANES (forward: score +=
    table[h, code])."""
    rows, cols = ds.shape
    for r in range(rows):
        i = i0 + r
        if pair.mode == sbm.CODE_ARRAY:
            codes = pair.codes[b if pair.codes.shape[0] > 1 else 0, i, j0:j0 + cols]
            for c in range(cols):
                if codes[c] >= 0:
                    dtab[c & LANE_MASK, codes[c]] += ds[r, c]
        else:
            bp = b if pair.query_positions.shape[0] > 1 else 0
            query_position = pair.query_positions[bp, i]
            keys = pair.key_positions[bp, j0:j0 + cols]
            for c in range(cols):
                code = _relative_code(query_position, keys[c], pair.max_offset)
                dtab[c & LANE_MASK, code] += ds[r, c]
