"""Putting sample windows back on their source's coordinates (the inverse of batching)."""
import numpy as np
import xarray as xr

from .blend import Blender, taper


class Stitcher:
    """Collects decoded sample windows of `variables` and blends them into one Dataset on the
    template's coordinates. Feed it batch after batch (``add``), then call ``result``.

    Parameters
    ----------
    template : Template
        The source Dataset's coordinates and variable layout, which the result is built on.
    variables : list of str
        The variables whose windows are collected; each gets one blended array the size of
        its dims in the source.
    """

    def __init__(self, template, variables):
        self.template = template
        sizes = template.sizes
        self._blenders = {v: Blender(tuple(sizes[d] for d in template.var_dims[v]))
                          for v in variables}

    def add(self, arrays, placement):
        """``arrays[v]`` is ``(B, *window sizes of v's dims in v's order)``, placed by
        `placement`."""
        window = placement.window_sizes()
        sizes = self.template.sizes
        overlap = dict(zip(placement.dims, placement.overlap))
        at = {d: i for i, d in enumerate(placement.dims)}
        starts = np.asarray(placement.starts, np.int64)
        for d, i in at.items():
            if len(starts) and (starts[:, i].min() < 0 or starts[:, i].max() + window[d] > sizes[d]):
                raise ValueError(f"placement.starts along {d!r} put windows of {window[d]} "
                                 f"outside the source's {sizes[d]} cells")
        for name, blender in self._blenders.items():
            dims = self.template.var_dims[name]
            values = np.asarray(arrays[name])
            weights = np.ones(())
            for d in dims:
                weights = np.multiply.outer(weights, taper(window[d], overlap.get(d, 0)))
            # every sample's cells at once, as flat positions in the blended array
            cells = np.zeros((len(values),) + (1,) * len(dims), np.int64)
            stride = 1
            for axis in reversed(range(len(dims))):
                d = dims[axis]
                shape = [1] * (len(dims) + 1)
                if d in at:
                    position = starts[:, at[d], None] + np.arange(window[d])
                    shape[0] = len(values)
                else:
                    position = np.arange(sizes[d])
                shape[axis + 1] = -1
                cells = cells + position.reshape(shape) * stride
                stride *= sizes[d]
            cells = np.broadcast_to(cells, values.shape)
            blender.add_at(cells.reshape(-1), values.reshape(-1),
                           np.broadcast_to(weights, values.shape).reshape(-1))

    def result(self):
        t = self.template
        data = {}
        for name, blender in self._blenders.items():
            dtype = t.var_dtypes[name]
            values = blender.result()
            if np.issubdtype(dtype, np.floating):
                # float16 data stay float32: their 3 digits would round the normalized values
                # before the statistics scale them back
                values = values.astype(np.promote_types(dtype, np.float32))
            data[name] = xr.Variable(t.var_dims[name], values, t.var_attrs[name])
        return xr.Dataset(data, coords=t.coords.coords, attrs=t.coords.attrs)


class PutBack:
    """Puts a stream of batches (their inputs, or a model's predictions for them) back on the
    source's coordinates through an adapter: ``add(batch, values)`` for each batch, then
    ``result()`` is a Dataset on the source's coordinates, in physical units again.

    Parameters
    ----------
    adapter : object
        The adapter that made the batches; its ``decode_samples`` turns a batch's token values
        back into sample windows and its ``denormalize`` restores physical units.
    template : Template
        The source Dataset's coordinates and variable layout.
    variables : list of str, optional
        The variables the values stand for, in the adapter's feature order; default None, the
        adapter's ``variables``.
    mask_missing : bool, default True
        Whether values where the batch's input was missing (False in ``valid``) become NaN.
        Putting back the batches' own inputs (``values=None`` in ``add``) always masks them.
    """

    def __init__(self, adapter, template, variables=None, mask_missing=True):
        self.adapter = adapter
        self.variables = list(variables or adapter.variables)
        self.mask_missing = mask_missing
        self._stitcher = Stitcher(template, self.variables)

    def add(self, batch, values=None):
        variables = None if values is None else self.variables
        arrays = self.adapter.decode_samples(batch, values, variables, self.mask_missing)
        self._stitcher.add(arrays, batch.placement)

    def result(self):
        return self.adapter.denormalize(self._stitcher.result())
