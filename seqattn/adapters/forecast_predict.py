"""Forecasts in one call: a model over every sample of a ForecastWindows set-up, put back on
valid times in physical units.

Every spelling runs this::

    windows = ForecastWindows(adapter, leads=["6h", "12h"], history=2).fit(ds, where=train)
    ...                                   # fit a model on windows.batches(ds, where=train)
    forecast = seqattn.predict(model, ds, windows, where=test)
    forecast = ds.seqattn.predict(model, windows)   # the same, from the Dataset

The result holds the target variables on ``(lead, *their dims)``, ``time`` being the valid
time, on the Dataset's own coordinates; with ``increments=True`` the predictions are added to the
values they are changes from. The model follows :mod:`seqattn.data.model_call` and returns
``(B, N, Ft)`` in the layout of ``batch.targets``.

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

from ..data.batch import Template
from ..data.checks import require_variables
from ..data.model_call import ModelCall

LEAD = "lead"  # the dim that forecasts gain, one index per lead


def predict_forecast(model, windows, ds, where=None, variables=None, mask_missing=True,
                     store=None, batch_size=64):
    """`model`'s forecasts for `ds` with the fitted set-up `windows` (see the module
    docstring); `variables` the subset of targets the predictions stand for (default all),
    `mask_missing` NaN where a target is missing, `batch_size` samples per model call; `where`
    the samples to forecast (in memory); with `store` written to zarr and opened from there."""
    call = model if isinstance(model, ModelCall) else ModelCall(model)
    needed = list(dict.fromkeys(windows.adapter.variables + windows._targets(ds)))
    require_variables(ds, needed)
    ds = ds[needed]
    variables = list(variables or windows._targets(ds))
    if any(ds[v].chunks is not None for v in needed):
        if where is not None:
            raise ValueError("where= with dask-backed data: select the times with "
                             "ds.sel(time=...) first, or load the data")
        result = _forecast_lazily(call, windows, ds, variables, mask_missing, batch_size)
    else:
        result = _forecast_in_memory(call, windows, ds, variables, mask_missing, batch_size,
                                     where)
    if store is None:
        return result
    result.to_zarr(store, mode="w")
    return xr.open_zarr(store)


def _forecast_in_memory(call, windows, ds, variables, mask_missing, batch_size, where=None):
    """Every batch of `windows` over `ds` (in order) through `call`, put back on valid times."""
    batches = windows.batches(ds, where=where, batch_size=batch_size)
    put_back = batches.put_back(variables, mask_missing)
    for batch in batches.epoch(0):
        predictions = call(batch)
        if predictions.ndim != 3:
            raise ValueError(f"the model returned shape {predictions.shape} for tokens of shape "
                             f"{batch.tokens.shape}; a forecast needs (B, N, Ft), the layout "
                             f"of batch.targets {batch.targets.shape} for {variables}")
        put_back.add(batch, predictions)
    return put_back.result()


def _template(windows, ds):
    """The Template of a forecast over `ds`: the target variables with a leading lead dim."""
    targets = windows.target_adapter(windows._targets(ds)).variables
    return Template.of(ds[targets].expand_dims(
        {LEAD: np.asarray(windows._lead_values(ds, windows.steps))}))


def _forecast_lazily(call, windows, ds, variables, mask_missing, batch_size):
    time = windows.time_dim
    size = ds.sizes[time]
    chunks = _chunks(ds, [time] + [d for d in windows._other_dims(ds)
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
            model, windows, region, slice(start - lo, stop - lo), variables, mask_missing,
            batch_size)

    template = _template(windows, ds)
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


def _forecast_block(call, windows, region, keep, variables, mask_missing, batch_size):
    """One task: forecasts over the in-memory `region`, then its valid times `keep`.
    A lead too long for the region has no sample whose valid time is kept: it stays NaN."""
    time = windows.time_dim
    size = region.sizes[time]
    out = {}
    result = None
    if windows.history + int(windows.steps.min()) < size:
        result = _forecast_in_memory(call, windows, region, variables, mask_missing,
                                     batch_size).isel({time: keep})
    n_leads = len(windows.steps)
    for name in variables:
        dims = (LEAD, *region[name].dims)
        shape = [n_leads if d == LEAD else keep.stop - keep.start if d == time
                 else region.sizes[d] for d in dims]
        values = np.full(shape, np.nan, dtype=_dtype(region[name].dtype))
        if result is not None:
            values[...] = result[name].transpose(*dims).values
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
