"""Position-wise feed-forward blocks: the two-layer MLP of the Transformer and SwiGLU."""
import numpy as np

from .. import autodiff
from .activations import activation_named
from .dropout import Dropout
from .init import generator
from .linear import Linear
from .module import Module


class FeedForward(Module):
    """linear2(dropout(activation(linear1(x)))), the MLP inside torch's Transformer layers."""

    def __init__(self, d_model, dim_feedforward, activation="gelu", dropout=0.0, bias=True,
                 dtype=np.float32, seed=None):
        super().__init__()
        rng = generator(seed)
        self.linear1 = Linear(d_model, dim_feedforward, bias, dtype, rng)
        self.activation = activation_named(activation)
        self.dropout = Dropout(dropout, rng)
        self.linear2 = Linear(dim_feedforward, d_model, bias, dtype, rng)

    def forward(self, x):
        return self.linear2(self.dropout(self.activation(self.linear1(x))))


class SwiGLUFeedForward(Module):
    """w2(silu(w1 x) * w3 x), the gated feed-forward of LLaMA (names w1, w2, w3, no biases)."""

    def __init__(self, d_model, hidden_dim, bias=False, dtype=np.float32, seed=None):
        super().__init__()
        rng = generator(seed)
        self.w1 = Linear(d_model, hidden_dim, bias, dtype, rng)
        self.w2 = Linear(hidden_dim, d_model, bias, dtype, rng)
        self.w3 = Linear(d_model, hidden_dim, bias, dtype, rng)

    def forward(self, x):
        return self.w2(autodiff.swiglu(self.w1(x), self.w3(x)))
