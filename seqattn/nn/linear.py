"""Linear layer y = x W^T + b, with torch.nn.Linear's parameter names, shapes and init."""
import numpy as np

from .. import autodiff
from .init import generator, uniform
from .module import Module
from .parameter import Parameter


class Linear(Module):
    """A linear layer, ``y = x W^T + b``, with torch.nn.Linear's names, shapes and init.

    Maps x (..., in_features) to (..., out_features). ``weight`` is (out_features,
    in_features) and ``bias`` (out_features,), both drawn from U(-1/sqrt(in_features),
    1/sqrt(in_features)) as torch does.

    Parameters
    ----------
    in_features : int
        Size of the last dim of the input.
    out_features : int
        Size of the last dim of the output.
    bias : bool, default True
        Whether to add a learnable bias.
    dtype : NumPy float type, default numpy.float32
        Type of the parameters and of the activations they produce (float32 or float64).
    seed : int, numpy.random.Generator or None, default None
        Seed of the initial weights. One Generator shared by a model's modules makes the whole
        model reproducible from one seed; None draws fresh entropy.
    """

    def __init__(self, in_features, out_features, bias=True, dtype=np.float32, seed=None):
        super().__init__()
        rng = generator(seed)
        bound = 1.0 / np.sqrt(in_features)
        self.in_features, self.out_features = in_features, out_features
        self.weight = Parameter(uniform(rng, (out_features, in_features), bound, dtype))
        self.bias = Parameter(uniform(rng, (out_features,), bound, dtype)) if bias else None

    def forward(self, x):
        self.check_device(x=x)
        if x.ndim == 0 or int(x.shape[x.ndim - 1]) != self.in_features:
            raise ValueError(f"x has shape {tuple(x.shape)}; Linear expects its last dim to be "
                             f"in_features = {self.in_features}")
        return autodiff.linear(x, self.weight, self.bias)
