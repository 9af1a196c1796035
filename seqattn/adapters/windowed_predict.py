"""A model over every sample of a GridAdapter or SignalAdapter, back on the Dataset's coordinates
(what their ``predict`` runs).

* Per token (N -> N, an adapter fitted without targets): predictions (B, N, F_out) in the token
  layout of the adapter's ``variables``, decoded to the grid or series in physical units. On
  dask-backed data lazy and chunk-parallel: ``xarray.map_blocks`` runs the model on each chunk,
  chunks being kept along the sample dims and made whole along the dims a sample spans (patch,
  channel and windowed dims), so every window is complete. With a dask.distributed client
  active the chunks run on its workers (model and adapter must be picklable).
* Per sample (N -> 1, an adapter fitted with targets): predictions (B, T) or (B, C) put on the
  sample dims; these outputs are small, so they are computed at once, even on dask data, which
  is still read block by block.
"""
import numpy as np
import xarray as xr

from ..data.batching import BatchIterator


def predict_per_token(run, ds, adapter, input_dims, input_overlap, batch_size, variables,
                      mask_missing):
    adapter.check(ds)
    options = dict(input_dims=input_dims, input_overlap=input_overlap, batch_size=batch_size,
                   variables=variables, mask_missing=mask_missing)
    source = ds[adapter.variables]
    if any(source[v].chunks is not None for v in adapter.variables):
        return _lazily(run, source, adapter, options)
    return _in_memory(source, run=run, adapter=adapter, **options)


def _in_memory(ds, run, adapter, input_dims, input_overlap, batch_size, variables, mask_missing):
    iterator = BatchIterator(ds, adapter, input_dims=input_dims, input_overlap=input_overlap,
                             batch_size=batch_size)
    put_back = iterator.put_back(variables, mask_missing)
    for batch in iterator:
        predictions = run(batch)
        if predictions.ndim != 3 or predictions.shape[:2] != batch.key_padding_mask.shape:
            raise ValueError(f"the model returned shape {predictions.shape} for tokens of shape "
                             f"{batch.tokens.shape}; expected (B, N, F_out) = "
                             f"{batch.key_padding_mask.shape + ('F_out',)}; a model with one "
                             "output per sample is fitted with targets: adapter.fit(ds, "
                             "targets=...)")
        put_back.add(batch, predictions)
    return put_back.result()


def _lazily(run, ds, adapter, options):
    spanned = set(adapter.token_dims) | set(adapter.channel_dims) | set(options["input_dims"] or ())
    whole = {d: -1 for d in ds.dims if d in spanned}
    ds = ds.chunk(whole)
    template = xr.Dataset(
        {v: ds[v].astype(ds[v].dtype if np.issubdtype(ds[v].dtype, np.floating) else np.float64)
         for v in options["variables"]}, attrs=ds.attrs)
    return xr.map_blocks(_in_memory, ds, kwargs=dict(run=run, adapter=adapter, **options),
                         template=template)


def predict_per_sample(run, ds, adapter, batch_size):
    iterator = BatchIterator(ds, adapter, batch_size=batch_size)
    put_back = adapter.sample_put_back(iterator.template)
    for batch in iterator:
        predictions = run(batch)
        if predictions.ndim != 2 or predictions.shape[0] != len(batch):
            raise ValueError(f"the model returned shape {predictions.shape} for tokens of shape "
                             f"{batch.tokens.shape}; targets per sample need (B, "
                             f"{put_back.width}) = ({len(batch)}, {put_back.width})")
        put_back.add(batch, predictions)
    return put_back.result()
