"""A SequenceModel's linear path on features of its inputs wider than their mean: the function
classes of the per-sample baselines that classify best on fixed-length images and pooled frames.

``SequenceModelConfig(linear=True, linear_features=...)`` picks what the path maps linearly:

* ``"mean"`` (the default): the inputs' mean over unpadded tokens (``LinearPath`` in
  :mod:`seqattn.models.linear_path`);
* ``"pooled"``: per input channel its mean, spread (std), minimum and maximum over the unpadded
  tokens, then the number of tokens, as :class:`seqattn.baselines.PooledFeatures` pools them
  by default;
* ``"additive"``: every position's row flattened (N * F columns), and ``"pairwise"``: those and,
  for every two positions i < j, the outer product of their rows (N (N - 1) / 2 * F^2 more),
  as :class:`seqattn.baselines.PositionFeatures` reads sequences of one length N
  (``linear_tokens=N``, no padding).

The features are computed on the host from the inputs (they take no gradient: the inputs are
data) and go through one Linear, started at zero; :func:`seqattn.baselines.warm_start` sets it
from the matching fitted baseline, whose weights act on these features unstandardized, with the
head zeroed, so that the model starts as that baseline. Float tokens only.
"""
import numpy as np

from ..autodiff.tensor import unwrap
from ..backend import CPU, device_of
from ..nn import Linear, Module
from ..nn.placement import moved

FEATURES = ("mean", "pooled", "additive", "pairwise")


def feature_width(features, in_features, n_tokens):
    """The number of columns of `features` ("pooled", "additive" or "pairwise")."""
    if features == "pooled":
        return 4 * in_features + 1
    width = n_tokens * in_features
    return width + (n_tokens * (n_tokens - 1) // 2 * in_features ** 2
                    if features == "pairwise" else 0)


def host_tokens(inputs, key_padding_mask, in_features, path):
    """Host inputs (B, N, F) in float64 and their padding (B, N) as bools (none: all False),
    checked to be float tokens of `in_features` channels; `path` names the path in the error."""
    inputs = np.asarray(inputs, np.float64)
    if inputs.ndim != 3 or inputs.shape[2] != in_features:
        raise ValueError(f"inputs have shape {inputs.shape}; the {path} path reads float "
                         f"tokens (B, N, {in_features})")
    padding = (np.zeros(inputs.shape[:2], bool) if key_padding_mask is None
               else np.asarray(key_padding_mask, bool))
    return inputs, padding


class FeaturePath(Module):
    """inputs (B, N, F) floats -> (B, out): one Linear on the inputs' ``features`` ("pooled",
    "additive" or "pairwise", see the module docstring); ``n_tokens`` is N for the position
    features (None for "pooled")."""

    def __init__(self, features, in_features, n_tokens, out_features, dtype):
        super().__init__()
        self.features, self.in_features, self.n_tokens = features, int(in_features), n_tokens
        self.map = Linear(feature_width(features, self.in_features, n_tokens), out_features,
                          dtype=dtype, seed=0)
        for _, parameter in self.map.named_parameters():
            parameter.data[...] = 0

    def inputs_features(self, inputs, key_padding_mask=None):
        """The features (B, width) of host arrays `inputs` (B, N, F), in float64."""
        # the baselines' own feature code, imported here: importing seqattn.baselines reaches
        # the models (through seqattn.data), so a module-level import would be circular
        from ..baselines.positions import position_features
        from ..baselines.sequences import STATISTICS
        from ..baselines.sequences import pooled as pooled_statistics

        inputs, padding = host_tokens(inputs, key_padding_mask, self.in_features, "feature")
        if self.features == "pooled":
            return pooled_statistics(inputs, padding, STATISTICS)
        if inputs.shape[1] != self.n_tokens or padding.any():
            raise ValueError(f"inputs have {inputs.shape[1]} tokens (or padding); the "
                             f"{self.features} path reads {self.n_tokens} unpadded tokens "
                             "(linear_tokens in the model's config)")
        return position_features(inputs, self.features == "pairwise")

    def forward(self, inputs, key_padding_mask=None, pooled=True, coords=None):
        if not pooled:
            raise ValueError("the feature path maps each sequence's features (pooled=True); "
                             "per-token outputs take the mean path (linear_features='mean')")
        data = unwrap(inputs)
        mask = None if key_padding_mask is None else moved(unwrap(key_padding_mask), CPU)
        host = self.inputs_features(moved(data, CPU), mask).astype(self.map.weight.dtype)
        return self.map(moved(host, device_of(data)))

    def set(self, weight, bias):
        """Take a fitted linear map: `weight` (out, width) on the unstandardized features and
        `bias` (out,)."""
        weight, bias = np.asarray(weight), np.asarray(bias)
        expected = self.map.weight.data.shape
        if weight.shape != expected or bias.shape != expected[:1]:
            raise ValueError(f"weight has shape {weight.shape} and bias {bias.shape}; the "
                             f"{self.features} path expects {expected} and {expected[:1]}")
        self.map.weight.data[...] = weight
        self.map.bias.data[...] = bias


def feature_path(config):
    """The FeaturePath of a SequenceModelConfig with ``linear`` and ``linear_features`` other
    than "mean" (checked: float tokens, ``linear_tokens`` for the position features)."""
    features = config.linear_features
    if features not in FEATURES:
        raise ValueError(f"linear_features={features!r}; expected one of "
                         f"{FEATURES + ('neighbours',)}")
    if config.in_features is None:
        raise ValueError(f"linear_features={features!r} needs float tokens (in_features); got "
                         f"vocab_size={config.vocab_size!r}: use linear_features='mean'")
    n_tokens = config.linear_tokens
    if features != "pooled" and (isinstance(n_tokens, bool) or not isinstance(n_tokens, int)
                                 or n_tokens < 1):
        raise ValueError(f"linear_features={features!r} reads sequences of one length: give "
                         f"linear_tokens=N (the tokens per sequence), got {n_tokens!r}")
    return FeaturePath(features, config.in_features, n_tokens if features != "pooled" else None,
                       config.out_features, np.dtype(config.dtype).type)
