"""A SequenceModel's neighbour path: the nearest-neighbour classifier inside the model.

On small sets of aligned series (outlines, sensor traces) the nearest training series often
classifies best, and neither a linear map of pooled features nor attention trained on a few
dozen series contains that rule. ``SequenceModelConfig(linear=True,
linear_features="neighbours")`` adds to the head's class logits a linear map of the log
probabilities that a fitted :class:`seqattn.baselines.NearestNeighbour` gives: the smoothed
votes of the k reference samples nearest to the input, compared as the baseline compares them
(standardized flattened inputs for sequences of one length, ``linear_tokens``, else their
pooled statistics). :func:`seqattn.baselines.warm_start` copies the baseline's references, its
standardization and k into the path and starts its map at the identity with the head zeroed,
so the model starts as the baseline and training learns the residual; early stopping on
validation can keep the baseline's rule where attention adds nothing.

While the model trains, a reference identical to the input (distance zero) is left out of its
neighbours: a training sample is then scored by the others, as a new sample will be, instead of
voting for itself. In evaluation mode (``seqattn.predict``, validation) nothing is left out: a
new sample that duplicates a reference counts it, as the fitted baseline does.
The references are data the model holds: they are saved with its weights (persistent buffers)
and take no gradient. Float tokens and classes only.
"""
import numpy as np

from ..autodiff.tensor import unwrap
from ..backend import CPU, device_of
from ..nn import Linear, Module
from ..nn.placement import moved
from .feature_path import host_tokens

# a squared distance below this fraction of the two samples' squared norms is rounding of zero
SAME_SAMPLE = 1e-10


def reference_width(in_features, n_tokens):
    """The columns the path compares: every position's inputs for sequences of one length
    (`n_tokens`), else each channel's pooled statistics and the number of tokens."""
    return n_tokens * in_features if n_tokens else 4 * in_features + 1


class NeighbourPath(Module):
    """inputs (B, N, F) floats -> (B, classes): a Linear on the log smoothed votes of the
    ``neighbours`` nearest of ``references`` stored samples (see the module docstring).

    Parameters
    ----------
    in_features : int
        Input channels F.
    n_tokens : int or None
        N for inputs compared position by position (sequences of one length), None for inputs
        compared on their pooled statistics.
    references : int
        How many reference samples the path holds (0: it adds the map's bias only).
    neighbours : int
        k, the references that vote.
    classes : int
        The classes (the model's outputs).
    dtype : numpy float type
        The map's dtype.
    """

    def __init__(self, in_features, n_tokens, references, neighbours, classes, dtype):
        super().__init__()
        self.in_features, self.n_tokens = int(in_features), n_tokens
        self.neighbours, self.classes = int(neighbours), int(classes)
        width = reference_width(self.in_features, n_tokens)
        # stored in the model's dtype, as its weights are (the class ids are exact in it)
        self.register_buffer("references", np.zeros((references, width), dtype),
                             persistent=True)
        self.register_buffer("reference_classes", np.zeros(references, dtype), persistent=True)
        self.register_buffer("mean", np.zeros(width, dtype), persistent=True)
        self.register_buffer("scale", np.ones(width, dtype), persistent=True)
        self.map = Linear(self.classes, self.classes, dtype=dtype, seed=0)
        for _, parameter in self.map.named_parameters():
            parameter.data[...] = 0

    def compared(self, inputs, key_padding_mask):
        """The standardized columns (B, width) of host inputs (B, N, F), as the baseline
        compares samples."""
        from ..baselines.sequences import STATISTICS, pooled

        inputs, padding = host_tokens(inputs, key_padding_mask, self.in_features, "neighbour")
        if self.n_tokens:
            if inputs.shape[1] != self.n_tokens or padding.any():
                raise ValueError(f"inputs have {inputs.shape[1]} tokens (or padding); the "
                                 f"neighbour path compares {self.n_tokens} unpadded tokens")
            columns = inputs.reshape(len(inputs), -1)
        else:
            columns = pooled(inputs, padding, STATISTICS)
        return self.standardized(columns)

    def standardized(self, columns):
        mean = moved(self.mean, CPU).astype(np.float64)
        return (columns - mean) / moved(self.scale, CPU).astype(np.float64)

    def votes(self, inputs, key_padding_mask=None, coords=None):
        """The log smoothed votes (B, classes) of each input's nearest references, a reference
        identical to the input left out in training mode (`coords` unread: samples are
        compared on their tokens)."""
        query = self.compared(inputs, key_padding_mask)
        references = self.standardized(moved(self.references, CPU).astype(np.float64))
        if len(references) == 0:
            return np.zeros((len(query), self.classes))
        query_norms = (query ** 2).sum(axis=1)[:, None]
        reference_norms = (references ** 2).sum(axis=1)[None, :]
        distance = query_norms - 2.0 * query @ references.T + reference_norms
        return self.nearest_votes(distance, query_norms + reference_norms)

    def nearest_votes(self, distance, norms):
        """The log smoothed votes (B, classes) of the references nearest by ``distance``
        (B, R); in training mode those at a distance below SAME_SAMPLE of the pair's squared
        ``norms`` (the input itself) left out."""
        from ..baselines.sequences import smoothed_votes

        # only a training sample is its own reference; a new sample identical to a reference
        # (archives hold such copies) counts it, as the fitted baseline does
        same = (distance <= SAME_SAMPLE * norms if self.training
                else np.zeros(distance.shape, bool))
        distance = np.where(same, np.inf, distance)
        # k past the references left in is cut to them (none left: the votes are uniform)
        k = min(self.neighbours, distance.shape[1] - int(same.any()))
        nearest = np.argsort(distance, axis=1, kind="stable")[:, :k]
        classes = moved(self.reference_classes, CPU).astype(np.int64)
        return smoothed_votes(classes[nearest], self.classes)

    def forward(self, inputs, key_padding_mask=None, pooled=True, coords=None):
        if not pooled:
            raise ValueError("the neighbour path scores whole sequences (pooled=True)")
        data = unwrap(inputs)
        mask = None if key_padding_mask is None else moved(unwrap(key_padding_mask), CPU)
        votes = self.votes(moved(data, CPU), mask, coords).astype(self.map.weight.dtype)
        return self.map(moved(votes, device_of(data)))

    def set(self, references, reference_classes, mean, scale):
        """Take a fitted nearest-neighbour rule: the raw `references` (R, width), their classes
        (R,), the standardization's `mean` and `scale` (width,), all stored in the map's dtype
        (the references are the model's inputs, of that dtype already; the standardization
        rounds to it); the map starts at the identity, so the path's outputs are the rule's
        log probabilities."""
        references = np.asarray(references)
        width = reference_width(self.in_features, self.n_tokens)
        if references.ndim != 2 or references.shape[1] != width:
            raise ValueError(f"references have shape {references.shape}; the neighbour path "
                             f"compares {width} columns")
        dtype = self.map.weight.dtype
        for name, array in (("references", references), ("reference_classes", reference_classes),
                            ("mean", mean), ("scale", scale)):
            self.register_buffer(name, np.ascontiguousarray(array, dtype), persistent=True)
        self.map.weight.data[...] = np.eye(self.classes)
        self.map.bias.data[...] = 0


def neighbour_path(config):
    """The NeighbourPath of a SequenceModelConfig with ``linear_features="neighbours"``: one
    that compares by dynamic time warping where the config has a ``linear_window``
    (:mod:`seqattn.models.warping_path`)."""
    if config.in_features is None:
        raise ValueError("linear_features='neighbours' needs float tokens (in_features); got "
                         f"vocab_size={config.vocab_size!r}")
    references, neighbours = config.linear_references or 0, config.linear_neighbours
    if isinstance(neighbours, bool) or not isinstance(neighbours, int) or neighbours < 1:
        raise ValueError(f"linear_neighbours must be a positive int (k), got {neighbours!r}")
    dtype = np.dtype(config.dtype).type
    if config.linear_window is not None:
        from .warping_path import WarpingNeighbourPath

        return WarpingNeighbourPath(config.in_features, config.linear_tokens, references,
                                    neighbours, config.out_features, config.linear_window, dtype,
                                    config.linear_steps)
    return NeighbourPath(config.in_features, config.linear_tokens, references, neighbours,
                         config.out_features, dtype)
