"""Pointwise activation layers: GELU, ReLU, SiLU, and the lookup by torch's activation names."""
from .. import ops
from .module import Module


class GELU(Module):
    def __init__(self, approximate="none"):
        super().__init__()
        self.approximate = approximate

    def forward(self, x):
        self.save_for_backward(x=x)
        return ops.gelu(x, self.approximate)

    def backward(self, dout):
        return ops.gelu_backward(dout, self.saved()["x"], self.approximate)


class ReLU(Module):
    def forward(self, x):
        self.save_for_backward(x=x)
        return ops.relu(x)

    def backward(self, dout):
        return ops.relu_backward(dout, self.saved()["x"])


class SiLU(Module):
    def forward(self, x):
        self.save_for_backward(x=x)
        return ops.silu(x)

    def backward(self, dout):
        return ops.silu_backward(dout, self.saved()["x"])


ACTIVATIONS = {"relu": ReLU, "gelu": GELU, "silu": SiLU}


def activation_named(name):
    """A new activation layer from its torch name ('relu', 'gelu', 'silu')."""
    if name not in ACTIVATIONS:
        raise ValueError(f"activation must be one of {sorted(ACTIVATIONS)}, got {name!r}")
    return ACTIVATIONS[name]()
