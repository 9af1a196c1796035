"""Blending overlapping writes: how values from overlapping windows or frames are put back.

Overlapping windows each say something about the cells they share; the cell gets their weighted
mean. It is computed as ``first + sum(w * (v - first)) / sum(w)`` relative to the first value
written, so that identical values (an encode -> decode round trip) come back bit for bit, which a
plain ``sum(w * v) / sum(w)`` would not guarantee. NaNs carry no weight: a cell that no window saw
with a valid value stays NaN.
"""
import numpy as np


def taper(size, overlap):
    """1-D blending weights for a window of `size` overlapping its neighbours by `overlap` cells:
    1 in the middle, ramping linearly towards each edge over the overlap, so a window's edge (where
    the model saw the least context) counts less than the neighbour's middle."""
    i = np.arange(size, dtype=np.float64)
    if overlap <= 0:
        return np.ones(size)
    ramp = np.minimum(i + 1, size - i) / (overlap + 1)
    return np.minimum(ramp, 1.0)


class Blender:
    """Accumulates weighted writes into an array of `shape` (float64) and blends them."""

    def __init__(self, shape):
        self._base = np.full(shape, np.nan)
        self._acc = np.zeros(shape)
        self._weight = np.zeros(shape)

    def add(self, index, values, weights=1.0):
        """Write `values` at `index` (a tuple of slices, so the views below alias the arrays)."""
        base = self._base[index]
        present = ~np.isnan(values)
        first = present & np.isnan(base)
        base[first] = values[first]
        w = np.where(present, weights, 0.0)
        self._acc[index] += w * np.where(present, values - base, 0.0)
        self._weight[index] += w

    def add_at(self, cells, values, weights):
        """Write `values` with `weights` (1-d, the same length) at the flat C-order positions
        `cells`, one after the other: what ``add`` of each value in turn gives, to the bit, in
        a few array operations (a cell may be written more than once)."""
        base, acc, weight = (a.reshape(-1) for a in (self._base, self._acc, self._weight))
        present = ~np.isnan(values)
        # the first valid value written to a cell that had none becomes its base
        unset = present & np.isnan(base[cells])
        firsts, order = np.unique(cells[unset], return_index=True)
        base[firsts] = values[unset][order]
        w = np.where(present, weights, 0.0)
        # np.add.at adds one value after another, in order: the sums round as add's do
        np.add.at(acc, cells, w * np.where(present, values - base[cells], 0.0))
        np.add.at(weight, cells, w)

    def result(self):
        seen = self._weight > 0
        return np.where(seen, self._base + self._acc / np.where(seen, self._weight, 1.0), np.nan)
