"""Per-variable normalization statistics: computed once, applied and inverted automatically,
saved as JSON or netCDF (never pickle, which would execute code when loaded).

The statistics live in an xarray Dataset: one data variable per normalized variable, with dims
``("stat", *per_dims)`` and ``stat = ["mean", "std"]``. Keeping them as xarray objects means
applying them aligns on coordinates (a statistic per pressure level meets the right level even in
a window that holds only some levels).

Coordinates are matched, not merely aligned: a numeric value of a ``per_dims`` coordinate meets
the fitted value within :data:`MATCH_TOLERANCE` of the fitted values' spacing (a level written
as 850.0000001, or stored as float32, still meets 850); a value that meets none (a level fit never
saw), a label that differs, or a dim without coordinates whose size differs, is refused with an
error naming the coordinate and the value, never normalized into NaN.
"""

import dask
import numpy as np
import xarray as xr

from .coords import as_float, is_label

STATS = ("mean", "std")
# How far (relative to the spacing of the fitted values) a per_dims coordinate value may lie from
# the fitted one it stands for.
MATCH_TOLERANCE = 1e-6


class Normalizer:
    """``(x - mean) / std`` per variable, optionally per index of some dims (``per_dims``).

    Made by ``Normalizer.fit`` from data, or from saved statistics.

    Parameters
    ----------
    stats : xarray.Dataset
        One data variable per normalized variable, dims ``("stat", *per_dims)`` with
        ``stat = ["mean", "std"]``.

    Raises
    ------
    TypeError
        If `stats` is not an xarray Dataset.
    """

    def __init__(self, stats):
        if not isinstance(stats, xr.Dataset):
            raise TypeError(f"stats must be an xarray.Dataset, got {type(stats).__name__}")
        self.stats = stats

    @classmethod
    def fit(cls, ds, variables, per_dims=()):
        """Compute mean and std of each variable over all its dims except `per_dims`, ignoring
        NaNs. On dask-backed data this is one lazy pass, computed together for all variables."""
        lazy = {}
        for name in variables:
            if name not in ds.data_vars:
                raise ValueError(f"variable {name!r} is not in the dataset "
                                 f"(it has {sorted(map(str, ds.data_vars))})")
            da = ds[name]
            empty = [d for d in da.dims if da.sizes[d] == 0]
            if empty:
                raise ValueError(f"variable {name!r} has no values to fit statistics on: dims "
                                 f"{empty} have size 0; select data with at least one sample")
            for d in per_dims:
                _require_distinct(da, d, name)
            if da.dtype == np.float16:  # its squares overflow past 256: count in float32
                da = da.astype(np.float32)
            elif da.dtype.kind in "iub":  # statistics of counts keep every digit
                da = da.astype(np.float64)
            over = [d for d in da.dims if d not in per_dims]
            lazy[name] = (da.mean(over, skipna=True), da.std(over, skipna=True),
                          np.isinf(da).any() if da.dtype.kind == "f" else False)
        (computed,) = dask.compute(lazy)
        stats = {}
        for name, (mean, std, infinite) in computed.items():
            if bool(infinite):
                raise ValueError(f"variable {name!r} holds an infinite value; expected finite "
                                 "values, NaN where one is missing")
            if not np.isfinite(mean.values).any():
                raise ValueError(f"variable {name!r} is all NaN, so it has no statistics; drop it "
                                 "or fill it before fitting")
            # A constant field has std 0; dividing by 1 keeps it finite and still invertible.
            std = std.where(std > 0, 1.0)
            stats[name] = xr.concat([mean, std], dim=xr.DataArray(list(STATS), dims="stat"))
        return cls(xr.Dataset(stats))

    @property
    def variables(self):
        return list(self.stats.data_vars)

    def check(self, ds):
        """Raise the error :meth:`apply` would: a ``per_dims`` coordinate value of `ds` that has
        no statistics (see the module docstring)."""
        for name in self.variables:
            if name in ds.data_vars:
                self._matched(self.stats[name], ds[name], name)

    def _matched(self, stats, da, name):
        """`stats` of variable `name` on `da`'s coordinates along the dims they share."""
        for dim in stats.dims:
            if dim == "stat" or dim not in da.dims:
                continue
            if dim not in stats.coords or dim not in da.coords:
                if stats.sizes[dim] != da.sizes[dim]:
                    raise ValueError(f"variable {name!r} has {da.sizes[dim]} entries along "
                                     f"{dim!r}, but its statistics per {dim!r} were fitted on "
                                     f"{stats.sizes[dim]}; give {dim!r} a coordinate or the "
                                     "same size as at fit")
                continue
            fitted, given = np.asarray(stats[dim].values), np.asarray(da[dim].values)
            if fitted.shape == given.shape and np.array_equal(fitted, given):
                continue  # the data hold the fitted values themselves: nothing to match
            index = _match_index(fitted, given, dim, name)
            stats = stats.isel({dim: index}).assign_coords({dim: given})
        return stats

    def apply(self, ds):
        """A new Dataset with every variable that has statistics normalized."""
        return self._mapped(ds, lambda x, mean, std: (x - mean) / std)

    def invert(self, ds):
        """Undo :meth:`apply` on a new Dataset."""
        return self._mapped(ds, lambda x, mean, std: x * std + mean)

    def invert_scale(self, ds):
        """Undo only the division by std on a new Dataset: for differences of normalized values
        (forecast increments), whose means cancel, ``(a - mean) / std - (b - mean) / std``."""
        return self._mapped(ds, lambda x, mean, std: x * std)

    def _mapped(self, ds, formula):
        """A new Dataset with ``formula(x, mean, std)`` in place of every variable x that has
        statistics (its attrs kept).

        The statistics are matched to each variable's coordinates first (:meth:`_matched`).
        Where each of their dims is one of the variable's, with a coordinate on both or on
        neither, the formula runs on the arrays broadcast by position and the Dataset is copied
        with the new arrays: on a batch's region xarray's alignment and merge cost more than
        the arithmetic. Otherwise xarray broadcasts and aligns them."""
        arrays, aligned = {}, {}
        for name in self.variables:
            if name not in ds.data_vars:
                continue
            da = ds[name]
            stats = self._matched(self.stats[name], da, name)
            dims = [d for d in stats.dims if d != "stat"]
            if set(stats.coords) <= set(stats.dims) and all(
                    d in da.dims and (d in stats.coords) == (d in da.coords) for d in dims):
                order = [d for d in da.dims if d in dims]
                shape = [da.sizes[d] if d in dims else 1 for d in da.dims]
                values = np.asarray(stats.transpose("stat", *order).values)
                at = list(stats["stat"].values)
                mean, std = (values[at.index(s)].reshape(shape) for s in STATS)
                arrays[name] = formula(da.data, mean, std)
            else:
                mean, std = (stats.sel(stat=s, drop=True) for s in STATS)
                aligned[name] = formula(da, mean, std).assign_attrs(da.attrs)
        out = ds.copy(data={name: arrays.get(name, ds[name].data) for name in ds.data_vars}
                      if arrays else None)
        for name, da in aligned.items():
            out[name] = da
        return out

    def to_dict(self):
        """A JSON-serializable description (values as lists, coordinates kept, and each
        variable's dtype, which JSON numbers would lose)."""
        return {"stats": self.stats.to_dict(data="list"),
                "dtypes": {name: self.stats[name].dtype.name for name in self.stats.data_vars}}

    @classmethod
    def from_dict(cls, d):
        stats = xr.Dataset.from_dict(d["stats"])
        dtypes = d.get("dtypes", {})
        return cls(stats.assign({name: stats[name].astype(dtype)
                                 for name, dtype in dtypes.items()}))


def _match_index(fitted, given, dim, name):
    """For each of coordinate `dim`'s `given` values, the index of the `fitted` value it stands
    for: equal labels or times, numbers within MATCH_TOLERANCE of the fitted spacing."""
    exact = is_label(fitted) or is_label(given) or fitted.dtype.kind not in "iuf" \
        or given.dtype.kind not in "iuf"
    if exact:
        index = {value: i for i, value in enumerate(fitted.tolist())}
        found = [index.get(value, -1) for value in given.tolist()]
        distance = np.where(np.array(found) < 0, np.inf, 0.0)
        found, tolerance = np.array(found, dtype=np.int64), 0.0
    else:
        f, g = as_float(fitted), as_float(given)
        spacing = np.diff(np.unique(f))  # fit refuses empty dims: f holds a value at least
        scale = spacing.min() if spacing.size else max(abs(f[0]), 1.0)
        tolerance = MATCH_TOLERANCE * scale
        gaps = np.abs(g[:, None] - f[None, :])
        found, distance = gaps.argmin(axis=1), gaps.min(axis=1, initial=np.inf)
    unmatched = ~(distance <= tolerance)
    if unmatched.any():
        value = given[np.argmax(unmatched)]
        value = value.item() if isinstance(value, np.generic) else value
        shown = fitted.tolist() if fitted.size <= 12 else f"{fitted.size} values"
        within = "" if exact else (f" (within {MATCH_TOLERANCE:g} of their spacing, "
                                   f"{tolerance:.3g})")
        raise ValueError(f"coordinate {dim!r} = {value!r} has no statistics of variable {name!r}: "
                         f"fit saw {dim!r} = {shown}{within}; select the {dim} values fit saw "
                         f"or refit on data that has this one")
    return found


def _require_distinct(da, dim, name):
    """A per_dims coordinate names each statistic: a value it repeats would name two."""
    if dim not in da.coords or da[dim].ndim != 1:
        return
    values = da[dim].to_index()
    if values.has_duplicates:
        repeated = values[values.duplicated()][0]
        raise ValueError(f"coordinate {dim!r} of variable {name!r} repeats the value "
                         f"{repeated}; per_dims={dim!r} keeps a statistic per {dim} value, so "
                         "they must be distinct (drop or merge the repeated entries)")
