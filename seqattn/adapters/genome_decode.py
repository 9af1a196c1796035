"""A model's outputs for genome records back on the Dataset's coordinates.

Outputs per record (B, F) or per token (B, N, F) become a Dataset on the records' sample dims
(and the position dim per token, each base getting the mean of the unmasked tokens covering it):
under the target's name (values, with the target's attrs), as the predicted label plus
``<target>_probability`` on ``class`` (classes), or as ``prediction`` on (..., ``output``) when
the adapter was fitted without targets. A record without any unmasked token (all N, say) has no
prediction: NaN, no label.
"""
import numpy as np
import xarray as xr

from ..data.targets import class_predictions
from .genome_tokens import spread_to_bases


def decode_outputs(adapter, template, starts, key_padding_mask, valid, values, spec=None,
                   per_base=None):
    """The Dataset of `values` (B, F) or (B, N, F) for the samples at `starts` (B, sample dims)
    of `template` (their tokens' `key_padding_mask` (B, N) and `valid` (B, N, k)), on those
    samples' coordinates in the template's order. `spec` / `per_base`: the fitted target."""
    values = np.asarray(values, np.float64)
    B, n = key_padding_mask.shape
    if values.ndim == 1 and spec is not None and spec.kind == "values" and not per_base:
        values = values[:, None]
    per_token = values.ndim == 3
    if values.ndim not in (2, 3) or values.shape[:values.ndim - 1] != (B, n)[:values.ndim - 1]:
        raise ValueError(f"values have shape {values.shape}; expected one output vector per "
                         f"record (B, F) = ({B}, F) or per token (B, N, F) = ({B}, {n}, F)")
    if spec is not None and per_token != bool(per_base):
        wanted = "per base (B, N, F)" if per_base else "per record (B, F)"
        raise ValueError(f"values have shape {values.shape}, but target {spec.name!r} is "
                         f"{wanted}; use the model that model_config describes")
    width = spec.n_classes if spec is not None and spec.kind == "classes" else 1
    if spec is not None and values.shape[-1] != width:
        what = f"{width} class logits" if spec.kind == "classes" else "1 value"
        raise ValueError(f"values have {values.shape[-1]} outputs per "
                         f"{'token' if per_token else 'record'}; target {spec.name!r} needs "
                         f"{what} {list(spec.classes) if spec.kind == 'classes' else ''}")

    dims = template.var_dims[adapter.variable]
    sample_dims = tuple(d for d in dims if d != adapter.position_dim)
    chosen = [np.unique(starts[:, i]) for i in range(len(sample_dims))]
    at = tuple(np.searchsorted(c, starts[:, i]) for i, c in enumerate(chosen))
    grid = tuple(len(c) for c in chosen)
    coords_ds = template.coords.isel(dict(zip(sample_dims, chosen)))
    if per_token:
        length = template.sizes[adapter.position_dim]
        per_sample = spread_to_bases(values, key_padding_mask, valid, adapter.k, adapter.stride,
                                     length)
        out_dims = sample_dims + (adapter.position_dim,)
    else:
        empty = key_padding_mask.all(axis=1)  # nothing to predict from
        per_sample = np.where(empty[:, None], np.nan, values)
        out_dims = sample_dims
    out = np.full(grid + per_sample.shape[1:], np.nan)
    out[at] = per_sample
    coords = {name: c.variable for name, c in coords_ds.coords.items()
              if set(c.dims) <= set(out_dims)}
    attrs = template.coords.attrs
    if spec is None:
        return xr.Dataset({"prediction": (out_dims + ("output",), out)}, coords=coords,
                          attrs=attrs)
    if spec.kind == "classes":
        arrays = class_predictions(spec, np.nan_to_num(out), out_dims, coords,
                                   ~np.isnan(out).any(axis=-1))
        return xr.Dataset(arrays, coords=coords, attrs=attrs)
    data = xr.DataArray(out[..., 0], dims=out_dims, coords=coords,
                        attrs=dict(spec.attrs or {}))
    return xr.Dataset({spec.name: data}, coords=coords, attrs=attrs)
