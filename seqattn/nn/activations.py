"""Pointwise activation layers: GELU, ReLU, SiLU, and the lookup by torch's activation names."""
from .. import autodiff
from .module import Module


class GELU(Module):
    """The Gaussian error linear unit, x * Phi(x), elementwise, as torch.nn.GELU.

    Parameters
    ----------
    approximate : str, default 'none'
        ``"none"`` for the exact function (with erf), ``"tanh"`` for the tanh approximation.
    """

    def __init__(self, approximate="none"):
        super().__init__()
        self.approximate = approximate

    def forward(self, x):
        return autodiff.gelu(x, self.approximate)


class ReLU(Module):
    """max(x, 0), elementwise, as torch.nn.ReLU."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        return autodiff.relu(x)


class SiLU(Module):
    """x * sigmoid(x) (the swish), elementwise, as torch.nn.SiLU."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        return autodiff.silu(x)


ACTIVATIONS = {"relu": ReLU, "gelu": GELU, "silu": SiLU}


def activation_named(name):
    """A new activation layer from its torch name ('relu', 'gelu', 'silu')."""
    if name not in ACTIVATIONS:
        raise ValueError(f"activation must be one of {sorted(ACTIVATIONS)}, got {name!r}")
    return ACTIVATIONS[name]()
