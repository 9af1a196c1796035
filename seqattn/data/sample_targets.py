"""Targets with one value or one class per sample (N -> 1: a speaker's name, a storm's
intensity), in batches and back.

In a batch, targets of values are ``targets`` (B, T) float32 for T target variables, normalized
by the adapter's statistics of each target (fitted on the training samples), 0 where missing
and False there in ``target_valid`` (B, T); a target of classes is ``targets`` (B,) int64 class
indices, :data:`~seqattn.data.targets.MISSING_CLASS` where the label is missing. A model's
outputs (B, T) or (B, C) class logits go back, by :class:`SamplePutBack`, as one variable per
target on the batch's sample dims, in physical units (values) or as labels with probabilities
(classes); a sample without any valid token has no prediction (NaN).
"""
import numpy as np
import xarray as xr

from .targets import class_indices, class_predictions


def check_sample_specs(specs):
    """Targets per sample are several values or one classification."""
    kinds = {s.kind for s in specs}
    if "classes" in kinds and len(specs) > 1:
        raise ValueError(f"targets {[s.name for s in specs]} mix a classification with other "
                         "targets; a model predicts one classification per sample, or values "
                         "for several targets: fit one adapter per classification")
    return specs


def out_features(specs):
    """How many outputs per sample a model needs for these targets."""
    if specs[0].kind == "classes":
        return specs[0].n_classes
    return len(specs)


def per_sample_values(ds, specs, normalizer, sample_dims):
    """(dims, targets, valid) of `ds`'s targets `specs` along `sample_dims`: targets with those
    dims first, (*sizes, T) float32 (normalized) or (*sizes,) int64 classes; valid alike or None."""
    arrays = [ds[s.name] for s in specs]
    dims = tuple(d for d in sample_dims if d in arrays[0].dims)
    for spec, da in zip(specs, arrays):
        spanned = [d for d in da.dims if d not in sample_dims]
        if spanned:
            raise ValueError(f"target {spec.name!r} varies along {spanned}, which a sample spans "
                             f"(its tokens or channels); a target per sample lies along the "
                             f"sample dims {tuple(sample_dims)}")
        if set(da.dims) != set(dims):
            raise ValueError(f"targets {[s.name for s in specs]} lie on different dims "
                             f"({[a.dims for a in arrays]}); give targets on the same sample dims")
    if specs[0].kind == "classes":
        return dims, class_indices(specs[0], arrays[0].transpose(*dims).values), None
    columns = []
    for spec, da in zip(specs, arrays):
        if da.dtype.kind != "f":
            raise TypeError(f"target {spec.name!r} has dtype {da.dtype}, but fit saw float values")
        if normalizer is not None and spec.name in normalizer.variables:
            da = normalizer.apply(da.to_dataset(name=spec.name))[spec.name]
        columns.append(np.asarray(da.transpose(*dims).values, dtype=np.float64))
    values = np.stack(columns, axis=-1)
    valid = np.isfinite(values)
    return dims, np.where(valid, values, 0.0).astype(np.float32), valid


class SamplePutBack:
    """Per-sample outputs back on the sample dims: ``add(batch, values)`` for each batch, then
    ``result()`` is a Dataset with one variable per target (see the module docstring)."""

    def __init__(self, template, sample_dims, specs, normalizer):
        self.template = template
        self.dims = tuple(sample_dims)
        self.specs = specs
        self.normalizer = normalizer
        self.width = out_features(specs)
        shape = tuple(template.sizes[d] for d in self.dims)
        self._out = np.full(shape + (self.width,), np.nan)

    def add(self, batch, values):
        values = np.asarray(values, dtype=np.float64)
        if values.shape != (len(batch), self.width):
            what = (f"{self.width} class logits" if self.specs[0].kind == "classes"
                    else f"{self.width} values")
            raise ValueError(f"values have shape {values.shape}; expected (B, {self.width}) = "
                             f"({len(batch)}, {self.width}), {what} per sample for targets "
                             f"{[s.name for s in self.specs]}")
        empty = batch.key_padding_mask.all(axis=1)  # no valid token: nothing to predict from
        values = np.where(empty[:, None], np.nan, values)
        placement = batch.placement
        at = tuple(placement.starts[:, placement.dims.index(d)] for d in self.dims)
        self._out[at] = values

    def result(self):
        coords = {name: c.variable for name, c in self.template.coords.coords.items()
                  if set(c.dims) <= set(self.dims)}
        attrs = self.template.coords.attrs
        if self.specs[0].kind == "classes":
            valid = ~np.isnan(self._out).any(axis=-1)
            arrays = class_predictions(self.specs[0], np.nan_to_num(self._out), self.dims,
                                       coords, valid)
            return xr.Dataset(arrays, coords=coords, attrs=attrs)
        data = {}
        for i, spec in enumerate(self.specs):
            data[spec.name] = xr.DataArray(self._out[..., i], dims=self.dims, coords=coords,
                                           attrs=dict(spec.attrs or {}))
        out = xr.Dataset(data, coords=coords, attrs=attrs)
        if self.normalizer is None:
            return out
        return self.normalizer.invert(out)
