"""Checks on user data shared by the adapters. Each raises an error that names the offending
dim or variable and says what was expected."""
import numpy as np

from .coords import as_float, is_cftime, is_label


def require_variables(ds, variables, role="variable"):
    have = list(ds.data_vars)
    for name in variables:
        if name not in have:
            raise ValueError(f"{role} {name!r} is not in the dataset (it has {sorted(map(str, have))}); "
                             "the adapter must see the same variables it was built/fitted with")


def require_dims(ds, dims, role):
    for d in dims:
        if d not in ds.dims:
            raise ValueError(f"{role} dim {d!r} is not in the dataset (it has dims {tuple(ds.dims)})")


def require_monotonic(ds, dim):
    """A dimension coordinate used to place tokens must be strictly increasing or decreasing.
    Labels (station ids, variable names) have no order: each is a token or part of one as it is."""
    if dim not in ds.coords or ds[dim].ndim != 1 or ds.sizes[dim] < 2:
        return
    values = np.asarray(ds[dim].values)
    if is_label(values):
        return
    step = np.diff(as_float(values) if is_cftime(values) else values)
    zero = step.dtype.type(0)
    if not (np.all(step > zero) or np.all(step < zero)):
        raise ValueError(f"coordinate {dim!r} is not monotonic; sort it first "
                         f"(ds.sortby({dim!r})) so that tokens are contiguous patches")


def require_positive_sizes(sizes, role):
    for d, s in sizes.items():
        if not isinstance(s, (int, np.integer)) or s < 1:
            raise ValueError(f"{role}[{d!r}] = {s!r}; expected a positive integer")


def require_samples(ds, sample_dims):
    """Every sample dim must hold at least one sample (an empty selection has nothing to encode)."""
    for d in sample_dims:
        if ds.sizes[d] == 0:
            raise ValueError(f"sample dim {d!r} has 0 entries in the dataset; expected at least "
                             "one sample (check the selection that made it)")


def require_increasing(ds, dim, role):
    """Coordinate `dim` must increase strictly for `role` to step forward along it (a repeated
    or earlier time would make a lead of zero or negative duration)."""
    if dim not in ds.coords or ds[dim].ndim != 1 or ds.sizes[dim] < 2:
        return
    values = np.asarray(ds[dim].values)
    if is_label(values):
        return
    step = np.diff(as_float(values))
    if not np.all(step > 0):
        i = int(np.argmax(~(step > 0)))
        raise ValueError(f"coordinate {dim!r} does not increase strictly: {values[i]} at "
                         f"index {i} is followed by {values[i + 1]}; {role} step forward "
                         f"along it, so sort it (ds.sortby({dim!r})) and drop repeated values")
