"""The linear path of a task model: outputs += a linear function of the inputs.

With ``linear=True`` in a TokenModelConfig or SequenceModelConfig the model adds, to what its
head says, a linear map of its own inputs: per token for a TokenModel (float tokens through a
Linear, ids through an Embedding of ``out_features``, i.e. linear in the one-hot ids), of the
inputs' mean over the unpadded tokens for a SequenceModel (for ids: their frequencies). The
model's function class then contains ridge or logistic regression on those inputs
(:class:`seqattn.baselines.TokenFeatures`, ``PooledFeatures(statistics=("mean",))``). The path
starts at zero, so an untrained model is the model without it; ``start_from_linear`` instead
starts it from a fitted linear baseline with the head zeroed, so training learns the residual
(:func:`seqattn.baselines.warm_start`). Off by default: see CHANGELOG.md for what was measured.
"""
import numpy as np

from .. import autodiff
from ..nn import Embedding, Linear, Module


class LinearPath(Module):
    """inputs (B, N, F) floats or (B, N) ids -> (B, N, out) per token, or with ``pooled`` the
    mean over unpadded tokens (B, out)."""

    def __init__(self, in_features, vocab_size, out_features, dtype):
        super().__init__()
        if vocab_size is not None:
            self.map = Embedding(vocab_size, out_features, dtype=dtype, seed=0)
        else:
            self.map = Linear(in_features, out_features, dtype=dtype, seed=0)
        for _, parameter in self.named_parameters():
            parameter.data[...] = 0

    def forward(self, inputs, key_padding_mask=None, pooled=False):
        mapped = self.map(inputs)
        return autodiff.masked_mean(mapped, key_padding_mask) if pooled else mapped

    def set(self, weight, bias):
        """Take a fitted linear map: `weight` (out, D) and `bias` (out,) acting on the float
        inputs (D = F), or on the one-hot ids (D <= vocab_size: ids past D get the bias)."""
        weight, bias = np.asarray(weight), np.asarray(bias)
        if isinstance(self.map, Linear):
            expected = self.map.weight.data.shape
            if weight.shape != expected or bias.shape != expected[:1]:
                raise ValueError(f"weight has shape {weight.shape} and bias {bias.shape}; the "
                                 f"linear path expects {expected} and {expected[:1]}")
            self.map.weight.data[...] = weight
            self.map.bias.data[...] = bias
            return
        vocab, out = self.map.weight.data.shape
        if weight.ndim != 2 or weight.shape[0] != out or weight.shape[1] > vocab \
                or bias.shape != (out,):
            raise ValueError(f"weight has shape {weight.shape} and bias {bias.shape}; the linear "
                             f"path over ids expects ({out}, at most {vocab}) and ({out},)")
        table = np.broadcast_to(bias, (vocab, out)).copy()
        table[:weight.shape[1]] += weight.T
        self.map.weight.data[...] = table


def linear_path(config):
    """The config's LinearPath, or None when ``config.linear`` is off."""
    if not config.linear:
        return None
    return LinearPath(config.in_features, config.vocab_size, config.out_features,
                      np.dtype(config.dtype).type)


def start_from_linear(model, weight, bias):
    """Start `model` (with a linear path) at the linear map (weight, bias): the path takes it,
    the head is zeroed, so the model's outputs are the linear map's until training moves it."""
    if getattr(model, "linear", None) is None:
        raise ValueError(f"{type(model).__name__} has no linear path; build it with "
                         "linear=True in its config")
    model.linear.set(weight, bias)
    for _, parameter in model.head.named_parameters():
        parameter.data[...] = 0
