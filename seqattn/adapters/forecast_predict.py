"""Forecasts in one call: a model over every sample of a ForecastWindows set-up, put back on
valid times in physical units.

Both spellings run this::

    windows = ForecastWindows(train_ds, adapter, leads=["6h", "12h"], history=2)
    ...                                   # fit a model on windows' batches
    forecast = windows.predict(model)     # on the windows' own Dataset
    forecast = predict(model, val_ds, windows)   # the same set-up over another Dataset
    forecast = val_ds.seqattn.predict(model, windows)

The result holds the target variables on (lead, *their dims), ``time`` being the valid time, on
the Dataset's own coordinates; with ``increments=True`` the predictions are added to the values
they are changes from. The model follows :mod:`seqattn.data.model_call` and returns
(B, N, Ft) in the layout of ``batch.targets``.

On dask data the result is lazy and chunk-parallel: one task per chunk of the time dim (and of
the other sample dims every target has) reads the steps its valid times need (the chunk and
``history`` + the longest lead before it; on a signal also ``history`` after it), forecasts them
in memory and keeps the chunk's valid times, so it equals the in-memory result exactly. With a
dask.distributed client active the tasks run on its workers (the model goes to each worker once;
it and the adapter must be picklable).
"""
import dask
import dask.array as dsa
import numpy as np
import xarray as xr

from ..data.checks import require_variables
from .forecast import LEAD, ForecastWindows
from ..data.model_call import ModelCall


def predict_forecast(model, windows, ds, variables=None, mask_missing=True, store=None,
                     batch_size=None):
    """`model`'s forecasts for `ds` with the set-up of `windows` (see the module docstring);
    `variables` the subset of targets the predictions stand for (default all), `mask_missing`
    NaN where a target is missing, `batch_size` samples per model call (default the windows');
    with `store` written to zarr and opened from there."""
    call = model if isinstance(model, ModelCall) else ModelCall(model)
    variables = list(variables or windows.targets)
    needed = list(windows.source.data_vars)
    require_variables(ds, needed)
    changes = {"shuffle": False, "drop_last": False}
    if batch_size is not None:
        changes["batch_size"] = batch_size
    windows = windows.like(ds[needed], **changes)
    if any(windows.source[v].chunks is not None for v in needed):
        result = _forecast_lazily(call, windows, variables, mask_missing)
    else:
        result = _forecast_in_memory(call, windows, variables, mask_missing)
    if store is None:
        return result
    result.to_zarr(store, mode="w")
    return xr.open_zarr(store)


def _forecast_in_memory(call, windows, variables, mask_missing):
    """Every batch of `windows` (in order) through `call`, put back on valid times."""
    put_back = windows.put_back(variables, mask_missing)
    for batch in windows.epoch(0):
        predictions = call(batch)
        if predictions.ndim != 3:
            raise ValueError(f"the model returned shape {predictions.shape} for tokens of shape "
                             f"{batch.tokens.shape}; a forecast needs (B, N, Ft), the layout "
                             f"of batch.targets {batch.targets.shape} for {variables}")
        put_back.add(batch, predictions)
    return put_back.result()


def _forecast_lazily(call, windows, variables, mask_missing):
    ds, time = windows.source, windows.time_dim
    size = ds.sizes[time]
    chunks = _chunks(ds, [time] + [d for d in windows.other_dims
                                   if all(d in ds[v].dims for v in variables)])
    before = windows.history + int(windows.steps.max())
    after = windows.history if windows.along_tokens else 0
    model = dask.delayed(call, pure=True)  # one task: the model goes to each worker once
    blocks = {}
    for index in np.ndindex(*[len(c) for c in chunks.values()]):
        spans = {d: _span(c, i) for (d, c), i in zip(chunks.items(), index)}
        start, stop = spans[time]
        lo, hi = max(start - before, 0), min(stop + after, size)
        region = ds.isel({time: slice(lo, hi),
                          **{d: slice(*s) for d, s in spans.items() if d != time}})
        blocks[index] = dask.delayed(_forecast_block)(
            model, windows.adapter, windows.config(), windows.steps.tolist(), region,
            slice(start - lo, stop - lo), variables, mask_missing)

    template = windows.template
    data = {}
    for name in variables:
        dims = template.var_dims[name]
        dtype = _dtype(template.var_dtypes[name])
        grid = np.empty([len(chunks[d]) if d in chunks else 1 for d in dims], dtype=object)
        for index, block in blocks.items():
            at = dict(zip(chunks, index))
            shape = [chunks[d][at[d]] if d in chunks else template.sizes[d] for d in dims]
            grid[tuple(at.get(d, 0) for d in dims)] = dsa.from_delayed(
                dask.delayed(_pick)(block, name), shape=shape, dtype=dtype)
        data[name] = xr.Variable(dims, dsa.block(grid.tolist()), template.var_attrs[name])
    return xr.Dataset(data, coords=template.coords.coords, attrs=template.coords.attrs)


def _forecast_block(call, adapter, config, steps, region, keep, variables, mask_missing):
    """One task: forecasts over the in-memory `region`, then its valid times `keep`.
    A lead too long for the region has no sample whose valid time is kept: it stays NaN."""
    time = config["time_dim"]
    size = region.sizes[time]
    leads = config["leads"]
    fits = [i for i, s in enumerate(steps) if config["history"] + s < size]
    out = {}
    result = None
    if fits:
        windows = ForecastWindows(region, adapter, **{**config, "leads": [leads[i] for i in fits],
                                                      "shuffle": False, "drop_last": False})
        result = _forecast_in_memory(call, windows, variables, mask_missing).isel({time: keep})
    for name in variables:
        dims = (LEAD, *region[name].dims)
        shape = [len(leads) if d == LEAD else keep.stop - keep.start if d == time
                 else region.sizes[d] for d in dims]
        values = np.full(shape, np.nan, dtype=_dtype(region[name].dtype))
        if result is not None:
            values[fits] = result[name].transpose(*dims).values
        out[name] = values
    return out


def _pick(block, name):
    return block[name]


def _dtype(dtype):
    """The dtype predictions for a variable of `dtype` come back in (floats keep theirs)."""
    return dtype if np.issubdtype(dtype, np.floating) else np.dtype(np.float64)


def _chunks(ds, dims):
    """{dim: chunk sizes} along `dims`, the whole dim where `ds` is not chunked along it."""
    try:
        sizes = ds.chunksizes
    except ValueError:  # variables chunked differently: unify them first
        sizes = ds.unify_chunks().chunksizes
    return {d: tuple(sizes.get(d, (ds.sizes[d],))) for d in dims}


def _span(chunks, i):
    start = int(sum(chunks[:i]))
    return start, start + int(chunks[i])
