"""predict: run a model over a whole Dataset and get its predictions back on the same coordinates.

The model protocol is :mod:`seqattn.data.model_call`'s: ``model(tokens, key_padding_mask,
coords=coords)`` returning NumPy predictions; seqattn's models run in evaluation mode (their mode
is restored afterwards), plain callables and objects with a ``predict`` method work as well.

* N -> N (the default): predictions (B, N, F_out) in the token layout of the adapter's
  ``variables`` (a value for every cell the tokens came from), decoded to the grid or series and
  put back in physical units (the adapter's normalizer inverted).
* N -> 1 (``per_sample=True``): predictions (B, F_out), one vector per sample; the result is then
  indexed by the adapter's sample dims only (time steps, stations). These outputs are small, so
  they are computed at once, even on dask data, which is still read block by block.
* Forecasts: pass a :class:`ForecastWindows` in place of the adapter (``predict(model, ds,
  windows)``, the same as ``windows.predict(model, ds)``): one Dataset with a ``lead`` dim on valid
  times; see :mod:`seqattn.adapters.forecast_predict`.
* Adapters whose samples are whole structures (:class:`MoleculeAdapter`, :class:`GraphAdapter`)
  predict with their own ``predict(model, ds, batch_size=...)``, which this calls: per-structure
  and per-token predictions back on the molecule, atom, graph or node dims.

On dask-backed data the prediction is lazy and chunk-parallel: ``xarray.map_blocks`` runs the model
on each chunk, chunks being kept along the adapter's sample dims (time steps, stations) and made
whole along the dims a sample spans (patch, channel and windowed dims), so every window is
complete. With a dask.distributed client active, the chunks run on its workers (the model and
adapter are shipped to them, so they must be picklable); ``store`` writes the result to zarr.
"""
import numpy as np
import xarray as xr

from ..data.batching import BatchIterator
from .forecast import ForecastWindows
from .forecast_predict import predict_forecast
from ..data.model_call import ModelCall


def predict(model, ds, adapter, *, input_dims=None, input_overlap=None, batch_size=64,
            variables=None, mask_missing=True, per_sample=False, store=None):
    """Predictions of `model` for every sample of `ds`, as a Dataset on `ds`'s coordinates.

    `adapter` is an adapter (GridAdapter, SignalAdapter) or a ForecastWindows set-up (then the
    result has a ``lead`` dim on valid times; windowing and per-sample options do not apply).
    `batch_size` samples go through the model at a time.

    `input_dims`/`input_overlap` window the samples as in :class:`BatchIterator` (overlapping
    predictions are blended); `variables` are the variables the predictions stand for (default:
    the adapter's); `mask_missing` makes a prediction NaN where its input cell was missing.
    Lazy when `ds` is dask-backed; with `store` (a path or zarr store) the result is written there
    and the opened store is returned.

    With `per_sample` the model is N -> 1 (see the module docstring): the result has one variable
    ``prediction`` on (*sample dims, ``output``), or with `variables` one variable per output
    feature, named in order, on the sample dims.
    """
    run = ModelCall(model)
    if isinstance(adapter, ForecastWindows):
        given = {name: value for name, value in (("input_dims", input_dims),
                                                 ("input_overlap", input_overlap),
                                                 ("per_sample", per_sample)) if value}
        if given:
            raise ValueError(f"{sorted(given)} do not apply to forecasts: ForecastWindows "
                             "already fixes what a sample is; drop them")
        return predict_forecast(run, adapter, ds, variables=variables, mask_missing=mask_missing,
                                store=store, batch_size=batch_size)
    if callable(getattr(adapter, "predict", None)):
        given = {name: value for name, value in (("input_dims", input_dims),
                                                 ("input_overlap", input_overlap),
                                                 ("per_sample", per_sample), ("store", store),
                                                 ("mask_missing", not mask_missing)) if value}
        if given:
            raise ValueError(f"{sorted(given)} do not apply to a {type(adapter).__name__}: its "
                             "samples are whole structures; drop them")
        options = {} if variables is None else {"variables": variables}
        return adapter.predict(model, ds, batch_size=batch_size, **options)
    adapter.check(ds)
    if per_sample:
        if input_dims:
            raise ValueError(f"per_sample=True predicts one vector per whole sample, but "
                             f"input_dims={input_dims} cuts samples into windows; drop input_dims")
        result = _predict_per_sample(ds[adapter.variables], run, adapter, batch_size, variables)
        return result if store is None else _stored(result, store)
    variables = list(variables or adapter.variables)
    options = dict(input_dims=input_dims, input_overlap=input_overlap, batch_size=batch_size,
                   variables=variables, mask_missing=mask_missing)
    source = ds[adapter.variables]
    if any(source[v].chunks is not None for v in adapter.variables):
        result = _predict_lazily(run, source, adapter, options)
    else:
        result = _predict_in_memory(source, run=run, adapter=adapter, **options)
    return result if store is None else _stored(result, store)


def _stored(result, store):
    result.to_zarr(store, mode="w")
    return xr.open_zarr(store)


def _predict_in_memory(ds, run, adapter, input_dims, input_overlap, batch_size, variables,
                       mask_missing):
    iterator = BatchIterator(ds, adapter, input_dims=input_dims, input_overlap=input_overlap,
                             batch_size=batch_size)
    put_back = iterator.put_back(variables, mask_missing)
    for batch in iterator:
        predictions = run(batch)
        if predictions.ndim != 3 or predictions.shape[:2] != batch.key_padding_mask.shape:
            raise ValueError(f"the model returned shape {predictions.shape} for tokens of shape "
                             f"{batch.tokens.shape}; expected (B, N, F_out) = "
                             f"{batch.key_padding_mask.shape + ('F_out',)}; for an N -> 1 "
                             "model pass per_sample=True")
        put_back.add(batch, predictions)
    return put_back.result()


def _predict_lazily(run, ds, adapter, options):
    spanned = set(adapter.token_dims) | set(adapter.channel_dims) | set(options["input_dims"] or ())
    whole = {d: -1 for d in ds.dims if d in spanned}
    ds = ds.chunk(whole)
    template = xr.Dataset(
        {v: ds[v].astype(ds[v].dtype if np.issubdtype(ds[v].dtype, np.floating) else np.float64)
         for v in options["variables"]}, attrs=ds.attrs)
    return xr.map_blocks(_predict_in_memory, ds, kwargs=dict(run=run, adapter=adapter, **options),
                         template=template)


def _predict_per_sample(ds, run, adapter, batch_size, variables):
    iterator = BatchIterator(ds, adapter, batch_size=batch_size)
    dims = adapter.sample_dims(ds)
    columns = [iterator.dims.index(d) for d in dims]  # where each sample dim's index sits in starts
    out = None
    for batch in iterator:
        predictions = run(batch)
        if predictions.ndim != 2 or predictions.shape[0] != len(batch):
            raise ValueError(f"the model returned shape {predictions.shape} for tokens of shape "
                             f"{batch.tokens.shape}; per_sample=True expects (B, F_out) = "
                             f"({len(batch)}, F_out)")
        if out is None:
            out = np.full((*[ds.sizes[d] for d in dims], predictions.shape[1]), np.nan,
                          dtype=np.result_type(predictions.dtype, np.float32))
        out[tuple(batch.placement.starts[:, i] for i in columns)] = predictions
    coords = {name: c for name, c in ds.coords.items() if set(c.dims) <= set(dims)}
    if variables is None:
        return xr.Dataset({"prediction": (dims + ("output",), out)}, coords=coords, attrs=ds.attrs)
    if len(variables) != out.shape[-1]:
        raise ValueError(f"variables {variables} name {len(variables)} outputs, but the model "
                         f"returned {out.shape[-1]} per sample")
    return xr.Dataset({v: (dims, out[..., i]) for i, v in enumerate(variables)}, coords=coords,
                      attrs=ds.attrs)
