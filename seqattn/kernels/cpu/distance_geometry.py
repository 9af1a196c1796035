"""A distance bias's per-pair geometry, worked out once per batch and shared by its heads.

The short-sequence attention (``attention_small.py``) adds a distance bias to whole (batch, head)
score tiles. A pair's bias costs the minimum image, a square root, the table coordinate, and
the cosine envelope's log and tan: work that depends on the two positions only, not on the head.
Recomputed for every head, and again for the backward's recomputed scores and its gradients (as
the tiled kernel's loops in attention_bias.py do), it was most of a molecule model's attention.
Here it is done once per batch into a :class:`DistanceGeometry`, from which each head's scores
and gradients take a table lookup per pair. The open case (no cell, types or envelope) takes it
too: as fast as attention_bias's register rows at these lengths, and the short kernel then
compiles one distance path, not three.

Per pair (i, j) of batch ``batch[0]``:

* ``entry``: the flat index p C + k into the head's table (P, C) of the lower interpolated entry
  (p the pair's type pair, k as in ``attention_bias._entry``), -1 where the key is hidden
  (beyond the cutoff, NaN positions);
* ``weight``: w in f = (1 - w) T[k] + w T[k + 1];
* ``envelope``: the smooth cutoff's log envelope (0 without one);
* with gradients: ``table_slope`` (1/step) / d where the table is not flat there (d below
  r_max, d > 0; else 0), ``envelope_slope`` its derivative / d, and the displacement r (after
  the minimum image), so that dL/dx_i = sum_j g ((T[k+1] - T[k]) table_slope + envelope_slope) r
  and dL/dy_j the opposite.

The buffers come from batch_geometry.py, which fills every batch's part in one launch and keeps
it for the calls that bring the same positions; a part that holds another batch is filled again
here first.
"""
from collections import namedtuple

import numpy as np
from numba import types
from numba.extending import overload

from .attention_bias import (DistanceArgs, _cartesian, _fractional, _log_envelope,
                             _log_envelope_grad, _nearest_image, _table_coordinate,
                             _where_present)
from .called_by_name import called_by_name
from .. import structured_bias_math as sbm
from .float32_math import FASTMATH, log_f32, sin_cos_f32
from .jit_options import CACHED, njit

NEG_INF = -np.inf

DistanceGeometry = namedtuple(
    "DistanceGeometry",
    "batch entry weight envelope table_slope envelope_slope rx ry rz")


def _envelope(d, a, cutoff, two):
    raise NotImplementedError("callable from @njit code only")


@overload(_envelope)
def _envelope_by_dtype(d, a, cutoff, two):
    """(value, slope) of the smooth cutoff's log envelope 2 log cos(a d) at d <= cutoff, a =
    pi / (2 cutoff): in float32 from the polynomials of float32_math (a loop of them
    vectorises), as 2 log sin(u) and -2 a cos(u) / sin(u) with u = pi/2 - a d = a (cutoff - d),
    free of cancellation near the cutoff; in float64 from libm, as the other kernels do
    (gradient checks want its accuracy)."""
    if d == types.float32:
        def polynomials(d, a, cutoff, two):
            sine, cosine = sin_cos_f32(a * (cutoff - d))
            return two * log_f32(sine), -two * a * cosine / sine
        return polynomials
    return lambda d, a, cutoff, two: (_log_envelope(d, a, two), _log_envelope_grad(d, a, two))


@njit(cache=True, fastmath=FASTMATH, error_model="numpy")
def _fill(geometry, b, dist):
    """The geometry of batch b's pairs (the module docstring), gradient fields where they have
    room. Per query row, loops over the keys that LLVM vectorises (the triclinic cell's nearest
    image and float64's libm excepted), written out here: a call per row and loop, with the
    reference counting of its array arguments, cost as much as the loops at these lengths."""
    entry, weight, envelope = geometry.entry, geometry.weight, geometry.envelope
    with_grads = geometry.rx.shape[0] > 0
    rows, cols = entry.shape
    C = dist.table.shape[2]
    zero, one, half = dist.zero, dist.one, dist.half
    inv_step, last, cutoff = dist.inv_step, dist.last, dist.cutoff
    a, two = dist.smooth_a, dist.two
    xq, yk = dist.x[b], dist.y[b]
    periodic = dist.periodic
    cell, inv_cell, images = dist.cell, dist.inv_cell, dist.images
    # the entry's p C, p = type_i T + type_j: the key's part here, the query's per row
    key_entries = np.zeros(cols, np.int32)
    if dist.has_types:
        for j in range(cols):
            key_entries[j] = dist.types_k[b, j] * C
    # the displacements: the geometry's rows where it keeps them, else one scratch row each
    scratch = np.empty((3, cols), xq.dtype)
    distance = np.empty(cols, xq.dtype)
    for i in range(rows):
        rx, ry, rz = ((geometry.rx[i], geometry.ry[i], geometry.rz[i]) if with_grads
                      else (scratch[0], scratch[1], scratch[2]))
        xi, yi, zi = xq[0, i], xq[1, i], xq[2, i]
        if periodic == sbm.NOT_PERIODIC:
            for j in range(cols):
                rx[j], ry[j], rz[j] = xi - yk[0, j], yi - yk[1, j], zi - yk[2, j]
        else:  # the minimum image: fractional coordinates wrapped into [-1/2, 1/2)
            for j in range(cols):
                fx, fy, fz = _fractional(xi - yk[0, j], yi - yk[1, j], zi - yk[2, j], inv_cell,
                                         b)
                rx[j], ry[j], rz[j] = _cartesian(fx - np.floor(fx + half),
                                                 fy - np.floor(fy + half),
                                                 fz - np.floor(fz + half), cell, b)
            if periodic == sbm.TRICLINIC:  # then the nearest of the 27 images
                for j in range(cols):
                    rx[j], ry[j], rz[j] = _nearest_image(rx[j], ry[j], rz[j], images, b)
        first_entry = dist.types_q[b, i] * dist.n_types * C if dist.has_types else 0
        entry_row, weight_row = entry[i], weight[i]
        for j in range(cols):
            d = np.sqrt(rx[j] * rx[j] + ry[j] * ry[j] + rz[j] * rz[j])
            visible = d <= cutoff
            u = _table_coordinate(d, inv_step, last)
            lower = min(np.floor(u), last - one)
            entry_row[j] = np.int32(first_entry + key_entries[j] + np.int32(lower)) \
                if visible else np.int32(-1)
            weight_row[j] = u - lower if visible else zero
            distance[j] = d
        if with_grads:
            # the slope of the table / d (0 where flat, at d = 0 or hidden); the hidden keys'
            # displacements zeroed (their NaN must not reach the position gradients)
            slope_row = geometry.table_slope[i]
            for j in range(cols):
                d = distance[j]
                hidden = entry_row[j] < 0
                near = (d > zero) & (d * inv_step < last)
                slope_row[j] = zero if hidden or not near else inv_step / d
                rx[j] = zero if hidden else rx[j]
                ry[j] = zero if hidden else ry[j]
                rz[j] = zero if hidden else rz[j]
        envelope_row = envelope[i]
        if not dist.smooth:
            envelope_row[:] = zero
            if with_grads:
                geometry.envelope_slope[i] = zero
        elif with_grads:
            envelope_slope_row = geometry.envelope_slope[i]
            for j in range(cols):
                d = distance[j]
                value, slope = _envelope(d, a, cutoff, two)
                envelope_row[j] = value if entry_row[j] >= 0 else zero
                envelope_slope_row[j] = slope / d if (entry_row[j] >= 0) & (d > zero) else zero
        else:
            for j in range(cols):
                value, slope = _envelope(distance[j], a, cutoff, two)
                envelope_row[j] = value if entry_row[j] >= 0 else zero
    geometry.batch[0] = b


def _fill_fields(batch, entry, weight, envelope, table_slope, envelope_slope, rx, ry, rz, b, x,
                 y, table, types_q, types_k, n_types, has_types, cell, inv_cell, images, periodic,
                 inv_step, last, cutoff, smooth, smooth_a, zero, half, one, two):
    """:func:`_fill` with the geometry's and the bias's fields as arguments, the form of the C
    function below."""
    _fill(DistanceGeometry(batch, entry, weight, envelope, table_slope, envelope_slope, rx, ry,
                           rz), b,
          DistanceArgs(True, x, y, table, types_q, types_k, n_types, has_types, cell, inv_cell,
                       images, periodic, inv_step, last, cutoff, smooth, smooth_a, zero, half,
                       one, two))


def _fill_signature(dtype):
    """The C signature of _fill_fields for row-major arrays of ``dtype``."""
    def array(ndim, of=dtype):
        return types.Array(of, ndim, "C")
    f = dtype
    return types.void(array(1, types.int64), array(2, types.int32), *(array(2),) * 7,
                      types.intp, array(3), array(3), array(3), array(2, types.int32),
                      array(2, types.int32), types.int64, types.boolean, array(3), array(3),
                      array(3), types.int64, f, f, f, types.boolean, f, f, f, f, f)


# Called by name, one C function per dtype: its loops are 217 KB of LLVM IR, which each of the
# kernels of a molecule model's attention linked, optimized and emitted again (called_by_name.py).
_FILL_BY_NAME = {
    dtype: called_by_name(f"seqattn_distance_geometry_fill_{dtype}",
                          _fill_signature(dtype))(_fill_fields)
    for dtype in (types.float32, types.float64)}


def _fill_called_by_name(geometry, b, dist):
    raise NotImplementedError("callable from @njit code only")


@overload(_fill_called_by_name, jit_options=CACHED)
def _fill_called_by_name_impl(geometry, b, dist):
    """The C function of the geometry's dtype where every array is row-major, the same
    signature as the C function's; else :func:`_fill` compiled into the caller. Any integer
    batch index is passed as the C function's intp (a parallel loop's index is unsigned)."""
    dtype = geometry.types[geometry.fields.index("weight")].dtype
    call = _FILL_BY_NAME.get(dtype)
    index = types.intp if isinstance(b, types.Integer) else b
    fields = (*geometry.types, index, *dist.types[1:])
    if call is None or _fill_signature(dtype).args != tuple(types.unliteral(t) for t in fields):
        return lambda geometry, b, dist: _fill(geometry, b, dist)

    def by_name(geometry, b, dist):
        g, d = geometry, dist
        call((g.batch, g.entry, g.weight, g.envelope, g.table_slope, g.envelope_slope, g.rx,
              g.ry, g.rz, b, d.x, d.y, d.table, d.types_q, d.types_k, d.n_types, d.has_types,
              d.cell, d.inv_cell, d.images, d.periodic, d.inv_step, d.last, d.cutoff, d.smooth,
              d.smooth_a, d.zero, d.half, d.one, d.two))
    return by_name


@njit(cache=True, fastmath=FASTMATH, error_model="numpy")
def _add_from_geometry(s, tab, entry, weight, envelope):
    """s[r, c] += (1 - w) T[k] + w T[k + 1] + envelope, -inf where the key is hidden; tab is the
    head's table flattened (P C,)."""
    for r in range(s.shape[0]):
        row = s[r]
        for c in range(s.shape[1]):
            e = entry[r, c]
            k = max(e, 0)
            low = tab[k]
            value = low + weight[r, c] * (tab[k + 1] - low) + envelope[r, c]
            row[c] = row[c] + value if e >= 0 else NEG_INF


@njit(cache=True, fastmath=FASTMATH, error_model="numpy")
def _grads_from_geometry(ds, tab, geometry, dtab, dx, dy):
    """From dS (rows, cols): dtab (P C,) += dS df/dtable, dx (3, rows) += dS df/dx_i,
    dy (3, cols) += dS df/dy_j. Hidden pairs have dS = 0 and entry -1. One copy of the table
    gradient, not attention_bias's LANES: with types and distances, neighbouring keys seldom add
    into the same entry (as fast as eight copies, measured), and the per-task copies were
    megabytes to zero and sum (the keys beyond r_max all add into the last entry, which costs
    the open case about a nanosecond each). dx and dy without columns (positions that need no
    gradient) skip the positions' part, more than half of the loop's time."""
    entry, weight = geometry.entry, geometry.weight
    if dx.shape[1] == 0:
        for r in range(ds.shape[0]):
            for c in range(ds.shape[1]):
                g = ds[r, c]
                e = entry[r, c]
                if g == 0 or e < 0:
                    continue
                w = weight[r, c]
                dtab[e] += g - g * w
                dtab[e + 1] += g * w
        return
    zero = ds.dtype.type(0)
    for r in range(ds.shape[0]):
        gx = gy = gz = zero
        for c in range(ds.shape[1]):
            g = ds[r, c]
            e = entry[r, c]
            if g == 0 or e < 0:
                continue
            w = weight[r, c]
            # forward: value = (1 - w) T[k] + w T[k + 1] + envelope(d)
            dtab[e] += g - g * w
            dtab[e + 1] += g * w
            coef = g * ((tab[e + 1] - tab[e]) * geometry.table_slope[r, c]
                        + geometry.envelope_slope[r, c])
            # forward: d = |x_i - y_j|  =>  dd/dx_i = r / d = -dd/dy_j
            tx, ty, tz = coef * geometry.rx[r, c], coef * geometry.ry[r, c], coef * geometry.rz[r, c]
            gx += tx
            gy += ty
            gz += tz
            dy[0, c] -= tx
            dy[1, c] -= ty
            dy[2, c] -= tz
        dx[0, r] += gx
        dx[1, r] += gy
        dx[2, r] += gz


@njit(cache=True)
def _add_shared_distance_bias(s, b, h, dist, geometry):
    """s (N, M) += the distance bias of (b, h), from the geometry (filled for b first where it
    holds another batch)."""
    if geometry.batch[0] != b:
        _fill_called_by_name(geometry, b, dist)
    tab = dist.table[h]
    _add_from_geometry(s, tab.reshape(tab.size), geometry.entry, geometry.weight,
                       geometry.envelope)


@njit(cache=True)
def _shared_distance_bias_grads(ds, b, h, dist, geometry, dtab, dx, dy):
    """The distance bias's gradients from the (N, M) dS tile of (b, h) (see
    _grads_from_geometry), from the geometry: dtab (1, P, C), one copy."""
    if geometry.batch[0] != b:
        _fill_called_by_name(geometry, b, dist)
    tab = dist.table[h]
    _grads_from_geometry(ds, tab.reshape(tab.size), geometry, dtab[0].reshape(dtab[0].size),
                         dx, dy)


add_shared_distance_bias = _where_present("has", _add_shared_distance_bias)
add_shared_distance_bias.__doc__ = """s (N, M) += the distance bias of (b, h) through the shared
geometry (see _add_shared_distance_bias), or nothing without one: (s, b, h, dist, geometry)."""
shared_distance_bias_grads = _where_present("has", _shared_distance_bias_grads)
shared_distance_bias_grads.__doc__ = """The distance bias's gradients through the shared geometry
(see _shared_distance_bias_grads), or nothing without one: (ds, b, h, dist, geometry, dtab, dx,
dy)."""
