"""Batches of genome records: the protocol's one batch producer (:class:`Batches`) with the genome
adapter's collation and reverse-complement augmentation.

A batch holds B records (flattened over the sample dims, e.g. record, or variant x allele), each
padded to the Dataset's longest: ``tokens``, ``key_padding_mask`` (B, N), ``valid`` (B, N, k),
``coords["position"]`` (B, N) the position coordinate of each token's first base (NaN for
padding), one coordinate per sample dim (its numeric value, else the sample's index along it).
Targets: per record ``targets`` (B,) class indices or (B, 1) values; per base (single-base tokens)
(B, N) class indices or (B, N, 1) values, missing past a record's end (MISSING_CLASS, or NaN and
False in ``target_valid``).
"""
import numpy as np
import xarray as xr

from ..data.batch import Batch, Placement, Template
from ..data.protocol import Batches
from ..data.targets import MISSING_CLASS, class_indices
from ..readers.dna_codes import plain


def reversal_order(lengths, n, which):
    """(B, n) token order that reverses the first `lengths[b]` tokens of the rows `which`."""
    t = np.arange(n)[None, :]
    lengths = np.asarray(lengths)[:, None]
    flip = np.asarray(which, bool)[:, None] & (t < lengths)
    return np.where(flip, lengths - 1 - t, t)


def reverse_complement(adapter, batch, which=None, per_base_targets=False):
    """`batch` with the samples `which` (B,) bool (default all) on the reverse strand: each
    record's tokens reversed (padding stays at the end) and complemented; with
    `per_base_targets` the batch's targets (B, N, ...) are reversed with their bases."""
    B, n = batch.key_padding_mask.shape
    which = np.ones(B, bool) if which is None else np.asarray(which, bool)
    lengths = batch.valid.any(axis=-1).sum(axis=1)
    order = reversal_order(lengths, n, which)
    rows = np.arange(B)[:, None]
    if adapter.tokens == "ids":
        tokens = np.where(which[:, None], adapter.complement[batch.tokens[rows, order]],
                          batch.tokens)
    else:
        flipped = batch.tokens[rows, order][..., adapter.complement]
        tokens = np.where(which[:, None, None], flipped, batch.tokens)
    valid = np.where(which[:, None, None], batch.valid[rows, order][..., ::-1], batch.valid)
    targets, target_valid = batch.targets, batch.target_valid
    if per_base_targets:
        targets = np.asarray(targets)[rows, order]
        target_valid = None if target_valid is None else np.asarray(target_valid)[rows, order]
    return Batch(tokens=tokens, key_padding_mask=batch.key_padding_mask[rows, order],
                 valid=valid, coords=batch.coords, placement=batch.placement, targets=targets,
                 target_valid=target_valid)


class GenomeBatches(Batches):
    """Batches of the records of a genome Dataset, epoch by epoch (see the module docstring).

    Parameters
    ----------
    adapter : GenomeAdapter
        Its token options encode the records.
    ds : xarray.Dataset
        The genome Dataset (every record of it is a sample; select before).
    targets : tuple (TargetSpec, bool, numpy.ndarray), optional
        The target's description, whether it is per base, and its values with the sample dims
        first (then the position dim when per base).
    batch_size, shuffle, seed, drop_last
        As in :class:`seqattn.data.protocol.Batches`.
    reverse_complement : bool
        Put each sample on the reverse strand with probability 1/2, drawn from (seed, epoch,
        batch) only, so ``epoch(e)`` replays the same strands; per-base targets go with them.
    weights : numpy.ndarray, optional
        A weight per sample (sample dims), given to the batches as ``coords["weight"]`` (B, N)
        for :class:`seqattn.train.weighted_mse.WeightedMSELoss`.
    """

    def __init__(self, adapter, ds, targets=None, *, batch_size=32, shuffle=False, seed=0,
                 drop_last=False, reverse_complement=False, weights=None):
        super().__init__(batch_size, shuffle, seed, drop_last)
        self.adapter = adapter
        self.sample_dims = adapter.sample_dims(ds)
        self._bases = ds[adapter.variable].transpose(*self.sample_dims, adapter.position_dim)
        self.shape = self._bases.shape[:-1]
        self.n_samples = int(np.prod(self.shape))
        self.template = Template.of(ds[adapter.variables])
        self._labels = {d: ds[d].values if d in ds.coords else None for d in self.sample_dims}
        self._sample_coords = {d: _numeric_or_index(ds, d) for d in self.sample_dims}
        self._position = _numeric_or_index(ds, adapter.position_dim)
        self.targets = targets
        self.reverse_complement = bool(reverse_complement)
        self.weights = weights

    @property
    def per_base_targets(self):
        return self.targets is not None and self.targets[1]

    def epoch(self, epoch):
        batches = super().epoch(epoch)
        return self._on_strands(batches, epoch) if self.reverse_complement else batches

    def _on_strands(self, batches, epoch):
        for i, batch in enumerate(batches):
            rng = np.random.default_rng(None if self.seed is None else [self.seed, epoch, i])
            yield reverse_complement(self.adapter, batch, rng.random(len(batch)) < 0.5,
                                     self.per_base_targets)

    def collate(self, indices):
        at = np.unravel_index(np.asarray(indices, np.int64), self.shape)
        codes = self._codes(at)
        tokenized = self.adapter.tokenize(codes, lambda b, offset: self._where(at, b, offset))
        padding = ~tokenized.valid.any(axis=-1)
        B, n = padding.shape
        coords = {"position": np.where(padding, np.nan, self._position[tokenized.first])}
        for d, a in zip(self.sample_dims, at):
            coords[d] = np.repeat(self._sample_coords[d][a][:, None], n, axis=1)
        if self.weights is not None:
            coords["weight"] = np.repeat(self.weights[at][:, None], n, axis=1)
        placement = Placement(self.template, self.sample_dims, (1,) * len(at), (0,) * len(at),
                              np.stack(at, axis=1).astype(np.int64))
        targets, target_valid = self._targets(at, tokenized.valid[..., 0])
        return Batch(tokens=tokenized.tokens, key_padding_mask=tokenized.key_padding_mask,
                     valid=tokenized.valid, coords=coords, placement=placement,
                     targets=targets, target_valid=target_valid)

    def _codes(self, at):
        data = self._bases.data
        if isinstance(data, np.ndarray):
            raw = data[at]
        else:  # dask and other lazy arrays: read only these records
            raw = self._bases.isel({d: xr.DataArray(a, dims="sample")
                                    for d, a in zip(self.sample_dims, at)}).values
        return self.adapter.read_codes(raw, lambda index: self._where(at, *index))

    def _where(self, at, b, offset):
        """'record ..., position ...' of base `offset` of sample `b`, for error messages."""
        labels = []
        for d, a in zip(self.sample_dims, at):
            i = int(a[b])
            names = self._labels[d]
            labels.append(f"{d} {plain(names[i])!r}" if names is not None else f"{d} {i}")
        return ", ".join(labels + [f"position {int(offset)}"])

    def _targets(self, at, base_exists):
        """(targets, target_valid) of the samples `at`; per-base ones missing where no base."""
        if self.targets is None:
            return None, None
        spec, per_base, values = self.targets
        raw = values[at]
        if spec.kind == "classes":
            if not per_base:
                return class_indices(spec, raw), None
            # a label past a record's end is no label (fit never saw it either)
            classes = np.full(raw.shape, MISSING_CLASS, dtype=np.int64)
            classes[base_exists] = class_indices(spec, raw[base_exists])
            return classes, None
        raw = np.asarray(raw, self.adapter.dtype)  # the tokens' float dtype
        valid = np.isfinite(raw) & (base_exists if per_base else True)
        return np.where(valid, raw, 0)[..., None], valid[..., None]


def _numeric_or_index(ds, dim):
    """float64 coordinate values along `dim` when numeric, else each index."""
    if dim in ds.coords and ds[dim].dtype.kind in "biuf":
        return ds[dim].values.astype(np.float64)
    return np.arange(ds.sizes[dim], dtype=np.float64)
