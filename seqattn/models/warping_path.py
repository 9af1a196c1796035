"""A SequenceModel's neighbour path that compares series by dynamic time warping.

The nearest-neighbour path (:mod:`seqattn.models.neighbour_path`) compares samples as
:class:`seqattn.baselines.NearestNeighbour` does. This one holds a fitted
:class:`seqattn.baselines.WarpingNeighbour` instead: its references are the training series'
standardized tokens, and an input's neighbours are the references nearest in dynamic time
warping distance within the baseline's Sakoe-Chiba band (each pair over its own unpadded
tokens, :mod:`seqattn.kernels.cpu.warping_distance`). :func:`seqattn.baselines.warm_start`
builds it where the model was built with ``linear_features="neighbours"``; the config's
``linear_window`` (the band) tells ``seqattn.load`` to rebuild this path. As in the other path,
a reference identical to the input is left out of its neighbours while training, the references
are saved with the weights and take no gradient, and the path's map starts at the identity.
Where the baseline chose to compare the steps that frame tokens hold (``steps=``), the path
holds the same (hop, K) feature indices (a buffer, its shape in the config's ``linear_steps``)
and compares an input's steps the same way, as many of each token's as its
``coords["steps"]`` counts (SignalAdapter's batches carry them; a call without is an error).
"""
import numpy as np

from ..backend import CPU, kernels_for
from ..nn.placement import moved
from .feature_path import host_tokens
from .neighbour_path import NeighbourPath


class WarpingNeighbourPath(NeighbourPath):
    """inputs (B, N, F) floats -> (B, classes): a Linear on the log smoothed votes of the
    ``neighbours`` references nearest in dynamic time warping distance within ``window``
    (see the module docstring).

    Parameters
    ----------
    in_features : int
        Input channels F.
    n_tokens : int
        The longest reference's tokens S (the references are stored padded to it).
    references : int
        How many reference series the path holds.
    neighbours : int
        k, the references that vote.
    classes : int
        The classes (the model's outputs).
    window : float
        The Sakoe-Chiba band, a fraction (0 to 1) of the longer series' tokens.
    dtype : numpy float type
        The map's dtype.
    steps_shape : (int, int), optional
        (hop, K) where the references are the steps the frame tokens hold (``n_tokens`` then
        counts steps, of K channels).
    """

    def __init__(self, in_features, n_tokens, references, neighbours, classes, window, dtype,
                 steps_shape=None):
        super().__init__(in_features, n_tokens, references, neighbours, classes, dtype)
        self.window = float(window)
        self.steps_shape = None if steps_shape is None else tuple(int(n) for n in steps_shape)
        width = self.width
        # per channel, as the baseline standardizes a token; the references stored standardized
        for name, shape, value in (("references", (references, n_tokens * width), 0.0),
                                   ("mean", width, 0.0), ("scale", width, 1.0),
                                   ("reference_lengths", references, 0.0)):
            self.register_buffer(name, np.full(shape, value, dtype), persistent=True)
        if steps_shape is not None:
            # feature indices, stored in the weights' dtype (exact) as the classes are
            self.register_buffer("steps", np.zeros(self.steps_shape, dtype), persistent=True)

    @property
    def width(self):
        """The channels compared per step of a series: a token's, or a step's inside the
        frames."""
        return self.in_features if self.steps_shape is None else self.steps_shape[1]

    def votes(self, inputs, key_padding_mask=None, coords=None):
        """The log smoothed votes (B, classes) of each input's nearest references in warping
        distance, a reference identical to the input left out in training mode; where the
        path compares steps, each token's own steps are read from ``coords["steps"]``."""
        from ..baselines.warping import as_steps, real_tokens_first, token_steps

        inputs, padding = host_tokens(inputs, key_padding_mask, self.in_features, "neighbour")
        queries, lengths = real_tokens_first(inputs, padding)
        if self.steps_shape is not None:
            queries, lengths = as_steps(queries, lengths,
                                        moved(self.steps, CPU).astype(np.int64),
                                        token_steps(coords, padding))
        mean, scale = (moved(b, CPU).astype(np.float64) for b in (self.mean, self.scale))
        real = (np.arange(queries.shape[1])[None, :] < lengths[:, None])[..., None]
        queries = np.where(real, (queries - mean) / scale, 0.0)
        references = moved(self.references, CPU).astype(np.float64).reshape(
            len(self.references), self.n_tokens, self.width)
        reference_lengths = moved(self.reference_lengths, CPU).astype(np.int64)
        if len(references) == 0:
            return np.zeros((len(queries), self.classes))
        distance = kernels_for(CPU, "warping_distance").warping_distance_matrix(
            queries, lengths, references, reference_lengths, self.window)
        norms = ((queries ** 2).sum(axis=(1, 2))[:, None]
                 + (references ** 2).sum(axis=(1, 2))[None, :])
        return self.nearest_votes(distance, norms)

    def set(self, references, reference_lengths, reference_classes, mean, scale, steps=None):
        """Take a fitted WarpingNeighbour's rule: its standardized `references` (R, S, F), the
        real tokens first and zeros after `reference_lengths` (R,), their classes (R,), and the
        per-channel `mean` and `scale` (F,) that standardize an input's tokens, all stored in
        the map's dtype, and where it compares steps, the (hop, K) feature indices `steps`
        (the references then (R, S, K)); the map starts at the identity."""
        references = np.asarray(references)
        if (steps is None) != (self.steps_shape is None) or (
                steps is not None and np.shape(steps) != self.steps_shape):
            raise ValueError(f"steps of shape {np.shape(steps) if steps is not None else None}; "
                             f"this warping path compares steps of shape {self.steps_shape}")
        if steps is not None:
            self.register_buffer("steps", np.asarray(steps, self.map.weight.dtype),
                                 persistent=True)
        expected = (self.n_tokens, self.width)
        if references.ndim != 3 or references.shape[1:] != expected:
            raise ValueError(f"references have shape {references.shape}; the warping path holds "
                             f"(R, {expected[0]}, {expected[1]}) series")
        dtype = self.map.weight.dtype
        flat = references.reshape(len(references), -1)
        for name, array in (("references", flat), ("reference_lengths", reference_lengths),
                            ("reference_classes", reference_classes), ("mean", mean),
                            ("scale", scale)):
            self.register_buffer(name, np.ascontiguousarray(array, dtype), persistent=True)
        self.map.weight.data[...] = np.eye(self.classes)
        self.map.bias.data[...] = 0
