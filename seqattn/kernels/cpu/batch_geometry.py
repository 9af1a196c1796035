"""The distance bias's geometry of a whole batch, filled once and shared by the attention calls
that bring the same positions.

distance_geometry.py works out a pair's geometry once per batch within one launch of the
short-sequence attention. A molecule model calls that attention once per layer, and again in
each layer's backward, on the same positions, types and cells (only the tables differ, which
the geometry does not hold): at the examples' sizes the same numbers were filled four times a
step for a two-layer model, each fill a large part of the distance bias's cost. Here the
geometry of every batch, gradient fields included (the forward reads the others only), is filled
in one launch and kept, keyed by the values it was made from, for the calls that bring the same
ones: the next layer and the backward passes.
"""
from collections import OrderedDict
import threading

import numpy as np
from numba import prange

from .distance_geometry import DistanceGeometry, _fill_called_by_name
from .jit_options import njit
from .threads import sized_kernel

# Pairs a thread must have before a launch takes it (a pair's fill is several nanoseconds).
GRAIN = 1 << 16
# Geometries kept: the current pass's, and one more (a step on forces runs two passes).
KEPT = 2


def _buffers(B, rows, cols, dtype):
    """Unfilled geometry (batch (B, 1), the pair fields (B, rows, cols))."""
    return DistanceGeometry(np.full((B, 1), -1, np.int64), np.empty((B, rows, cols), np.int32),
                            *(np.empty((B, rows, cols), dtype) for _ in range(7)))


@njit(inline="always")
def batch_view(geometry, b):
    """Batch b's part of a batch geometry, in the form distance_geometry.py's functions take
    (its ``batch`` holds b once filled)."""
    g = geometry
    return DistanceGeometry(g.batch[b], g.entry[b], g.weight[b], g.envelope[b],
                            g.table_slope[b], g.envelope_slope[b], g.rx[b], g.ry[b], g.rz[b])


@sized_kernel(GRAIN, work=lambda geometry, dist: geometry.entry.size)
def _fill_batches(geometry, dist):
    for b in prange(geometry.entry.shape[0]):
        _fill_called_by_name(batch_view(geometry, b), b, dist)


def _key(dist, B, rows, cols, dtype):
    """What a geometry is made from: the batch's positions, types and cells, the table's
    bins and the distance options (not the table's values)."""
    parts = [B, rows, cols, np.dtype(dtype).str, dist.table.shape[2], dist.n_types,
             dist.has_types, dist.periodic, dist.smooth]
    parts += [float(dist.inv_step), float(dist.last), float(dist.cutoff), float(dist.smooth_a)]
    for a in (dist.x, dist.y, dist.types_q, dist.types_k, dist.cell, dist.inv_cell,
              dist.images):
        parts += [a.shape, a.dtype.str, a.tobytes()]
    return tuple(parts)


_KEPT = OrderedDict()
_LOCK = threading.Lock()


def shared_geometry(dist, B, rows, cols, dtype):
    """The filled geometry (B, rows, cols) of a call's distance bias (``dist``: its
    attention_bias.DistanceArgs, ``has`` True), from an earlier call with the same values where
    one is kept; it must not be written to."""
    key = _key(dist, B, rows, cols, dtype)
    with _LOCK:
        geometry = _KEPT.get(key)
        if geometry is not None:
            _KEPT.move_to_end(key)
            return geometry
    geometry = _buffers(B, rows, cols, np.dtype(dtype))
    _fill_batches(geometry, dist)
    with _LOCK:
        _KEPT[key] = geometry
        while len(_KEPT) > KEPT:
            _KEPT.popitem(last=False)
    return geometry
