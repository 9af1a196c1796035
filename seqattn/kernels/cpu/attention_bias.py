"""Structured attention biases on the CPU: added to a score tile, differentiated from a dS tile.

Called only from the score modification and the backward of ``attention.py``. A tile covers
queries i0 + r and keys j0 + c of batch b and head h. The arguments are the kernel forms built by
:func:`distance_args` and :func:`pair_args` (see ``seqattn.ops.structured_bias`` for what the
fields mean); the per-pair formulas are those of ``kernels/structured_bias_math`` that the CUDA
kernels use too.

Gradients go into buffers owned by one backward task each (no two tasks write the same memory,
so the result is deterministic): dtable (P, C) and dpair (C,) for this head, dx (3, N) and
dy (3, M) for this batch.
"""
from collections import namedtuple

import numpy as np
from numba import njit

from .. import structured_bias_math as sbm
from ..float32_math import FASTMATH

NEG_INF = -np.inf

_wrap = njit(inline="always")(sbm.wrap_displacement)
_nearest_image = njit(inline="always")(sbm.nearest_image)
_bin = njit(inline="always")(sbm.bin_coordinate)
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
        rx, ry, rz = _wrap(rx, ry, rz, dist.cell, dist.inv_cell, b, dist.half, dist.one)
        if dist.periodic == sbm.TRICLINIC:
            rx, ry, rz = _nearest_image(rx, ry, rz, dist.images, b)
    return rx, ry, rz


@njit(cache=True, fastmath=FASTMATH, error_model="numpy")
def _open_distance_row(row, xi, yi, zi, yx, yy, yz, tab, inv_step, last, one, cutoff):
    """The common case as one loop LLVM vectorises: no cell, no types, no smooth envelope."""
    for c in range(row.shape[0]):
        rx = xi - yx[c]
        ry = yi - yy[c]
        rz = zi - yz[c]
        d = np.sqrt(rx * rx + ry * ry + rz * rz)
        k, w = _bin(d, inv_step, last, one)
        value = tab[k] + w * (tab[k + 1] - tab[k])
        row[c] = row[c] + value if d <= cutoff else NEG_INF


@njit(cache=True, fastmath=FASTMATH, error_model="numpy")
def add_distance_bias(s, b, h, i0, j0, dist):
    """s[r, c] += f_h(d(i0 + r, j0 + c)); -inf beyond the cutoff or for NaN positions."""
    rows, cols = s.shape
    xq, yk = dist.x[b], dist.y[b]
    tab = dist.table[h]
    simple = dist.periodic == sbm.NOT_PERIODIC and not dist.has_types and not dist.smooth
    for r in range(rows):
        i = i0 + r
        row = s[r]
        if simple:
            _open_distance_row(row, xq[0, i], xq[1, i], xq[2, i], yk[0, j0:j0 + cols],
                               yk[1, j0:j0 + cols], yk[2, j0:j0 + cols], tab[0], dist.inv_step,
                               dist.last, dist.one, dist.cutoff)
            continue
        p0 = dist.types_q[b, i] * dist.n_types if dist.has_types else 0
        for c in range(cols):
            j = j0 + c
            rx, ry, rz = _displacement(xq, yk, i, j, b, dist)
            d = np.sqrt(rx * rx + ry * ry + rz * rz)
            if not d <= dist.cutoff:
                row[c] = NEG_INF
                continue
            p = p0 + dist.types_k[b, j] if dist.has_types else 0
            k, w = _bin(d, dist.inv_step, dist.last, dist.one)
            value = tab[p, k] + w * (tab[p, k + 1] - tab[p, k])
            if dist.smooth:
                value += _log_envelope(d, dist.smooth_a, dist.two)
            row[c] += value


@njit(cache=True, fastmath=FASTMATH, error_model="numpy")
def distance_bias_grads(ds, b, h, i0, j0, dist, dtab, dx, dy):
    """From dS = dL/dscore of a tile: dtab (P, C) += dS d f/d table, dx (3, N) += dS df/dx_i,
    dy (3, M) += dS df/dy_j. Hidden pairs have dS = 0 exactly and are skipped."""
    rows, cols = ds.shape
    xq, yk = dist.x[b], dist.y[b]
    tab = dist.table[h]
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
            k, w = _bin(d, dist.inv_step, dist.last, dist.one)
            # forward: value = (1 - w) T[k] + w T[k + 1]
            dtab[p, k] += g - g * w
            dtab[p, k + 1] += g * w
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
    """dtab (C,) += dS summed per code (forward: score += table[h, code])."""
    rows, cols = ds.shape
    for r in range(rows):
        i = i0 + r
        if pair.mode == sbm.CODE_ARRAY:
            codes = pair.codes[b if pair.codes.shape[0] > 1 else 0, i, j0:j0 + cols]
            for c in range(cols):
                if codes[c] >= 0:
                    dtab[codes[c]] += ds[r, c]
        else:
            bp = b if pair.query_positions.shape[0] > 1 else 0
            query_position = pair.query_positions[bp, i]
            keys = pair.key_positions[bp, j0:j0 + cols]
            for c in range(cols):
                dtab[_relative_code(query_position, keys[c], pair.max_offset)] += ds[r, c]
