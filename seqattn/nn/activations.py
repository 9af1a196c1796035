"""Pointwise activation layers: GELU, ReLU, SiLU, and the lookup by torch's activation names."""
from .. import autodiff
from .module import Module


class GELU(Module):
    def __init__(self, approximate="none"):
        super().__init__()
        self.approximate = approximate

    def forward(self, x):
        return autodiff.gelu(x, self.approximate)


class ReLU(Module):
    def forward(self, x):
        return autodiff.relu(x)


class SiLU(Module):
    def forward(self, x):
        return autodiff.silu(x)


ACTIVATIONS = {"relu": ReLU, "gelu": GELU, "silu": SiLU}


def activation_named(name):
    """A new activation layer from its torch name ('relu', 'gelu', 'silu')."""
    if name not in ACTIVATIONS:
        raise ValueError(f"activation must be one of {sorted(ACTIVATIONS)}, got {name!r}")
    return ACTIVATIONS[name]()
