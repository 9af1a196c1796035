"""Per-variable normalization statistics: computed once, applied and inverted automatically,
saved as JSON or netCDF (never pickle, which would execute code when loaded).

The statistics live in an xarray Dataset: one data variable per normalized variable, with dims
``("stat", *per_dims)`` and ``stat = ["mean", "std"]``. Keeping them as xarray objects means
applying them aligns on coordinates (a statistic per pressure level meets the right level even in
a window that holds only some levels).
"""

import dask
import numpy as np
import xarray as xr

STATS = ("mean", "std")


class Normalizer:
    """``(x - mean) / std`` per variable, optionally per index of some dims (``per_dims``)."""

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
            over = [d for d in da.dims if d not in per_dims]
            lazy[name] = (da.mean(over, skipna=True), da.std(over, skipna=True))
        (computed,) = dask.compute(lazy)
        stats = {}
        for name, (mean, std) in computed.items():
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

    def _pair(self, name):
        s = self.stats[name]
        return s.sel(stat="mean", drop=True), s.sel(stat="std", drop=True)

    def apply(self, ds):
        """A new Dataset with every variable that has statistics normalized."""
        out = ds.copy()
        for name in self.variables:
            if name in ds.data_vars:
                mean, std = self._pair(name)
                out[name] = ((ds[name] - mean) / std).assign_attrs(ds[name].attrs)
        return out

    def invert(self, ds):
        """Undo :meth:`apply` on a new Dataset."""
        out = ds.copy()
        for name in self.variables:
            if name in ds.data_vars:
                mean, std = self._pair(name)
                out[name] = (ds[name] * std + mean).assign_attrs(ds[name].attrs)
        return out

    def invert_scale(self, ds):
        """Undo only the division by std on a new Dataset: for differences of normalized values
        (forecast increments), whose means cancel, ``(a - mean) / std - (b - mean) / std``."""
        out = ds.copy()
        for name in self.variables:
            if name in ds.data_vars:
                _, std = self._pair(name)
                out[name] = (ds[name] * std).assign_attrs(ds[name].attrs)
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
