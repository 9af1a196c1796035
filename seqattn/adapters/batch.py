"""The batch container that adapters produce and models consume.

A :class:`Batch` is what crosses the boundary between xarray and the models: plain NumPy arrays
in the shape legend of DESIGN.md, plus a :class:`Placement` that says where every sample came
from, so that the adapter can put values (the inputs themselves, or a model's predictions) back
on the source's coordinates.

Shapes (B samples, N tokens, F features per token):

* ``tokens`` (B, N, F) float: values after normalization; a missing element (NaN in the data, or
  padding past the edge of the grid) is 0 here and False in ``valid``. When the adapter adds
  validity or calendar channels they come after the value features, so
  ``tokens[..., :valid.shape[-1]]`` are always the values.
* ``key_padding_mask`` (B, N) bool, True = padded token to ignore (the convention of
  ``seqattn.attention``): the token holds no valid value at all.
* ``valid`` (B, N, Fv) bool: which value features were present in the data.
* ``coords``: name -> (B, N) float64 per-token coordinates for positional encodings (patch
  centres in lat/lon/level, sample time in seconds since 1970-01-01, ...).
* ``targets`` / ``target_valid`` (B, N, Ft): what a forecasting adapter asks the model to predict,
  or None; ``lead`` (B,) the lead time of each sample in steps of the time dim, or None.
"""
from dataclasses import dataclass

import numpy as np
import xarray as xr


@dataclass(frozen=True)
class Template:
    """The parts of a Dataset that decoding needs to rebuild it: coordinates, attrs, and each
    variable's dims, attrs and dtype. It holds no data values, so it is cheap to keep."""

    coords: xr.Dataset
    var_dims: dict
    var_attrs: dict
    var_dtypes: dict

    @classmethod
    def of(cls, ds):
        names = list(ds.data_vars)
        return cls(
            coords=ds.drop_vars(names),
            var_dims={v: tuple(ds[v].dims) for v in names},
            var_attrs={v: dict(ds[v].attrs) for v in names},
            var_dtypes={v: ds[v].dtype for v in names},
        )

    @property
    def sizes(self):
        return dict(self.coords.sizes)


@dataclass(frozen=True)
class Placement:
    """Where each sample of a batch sits in its source.

    ``dims`` are the windowed dims; sample b covers ``starts[b, i] : starts[b, i] + sizes[i]``
    along ``dims[i]`` and the whole extent of every other dim. ``overlap`` (per windowed dim) says
    how far neighbouring windows overlap, which decides how values are blended when they are put
    back.
    """

    template: Template
    dims: tuple
    sizes: tuple
    overlap: tuple
    starts: np.ndarray  # (B, len(dims)) int64

    def window_sizes(self):
        """Size of one sample window along every dim of the source."""
        sizes = self.template.sizes
        sizes.update(zip(self.dims, self.sizes))
        return sizes


@dataclass(frozen=True)
class Batch:
    """Encoded samples: see the module docstring for the meaning and shape of every field."""

    tokens: np.ndarray
    key_padding_mask: np.ndarray
    valid: np.ndarray
    coords: dict
    placement: Placement
    targets: np.ndarray = None
    target_valid: np.ndarray = None
    lead: np.ndarray = None

    def __len__(self):
        return self.tokens.shape[0]

    @property
    def values(self):
        """The value features of ``tokens`` (without validity or calendar channels)."""
        return self.tokens[..., : self.valid.shape[-1]]
