"""Position-wise feed-forward blocks: the two-layer MLP of the Transformer and SwiGLU."""
import numpy as np

from .. import autodiff
from .activations import activation_named
from .dropout import Dropout
from .init import generator
from .linear import Linear
from .module import Module


class FeedForward(Module):
    """The feed-forward block of a Transformer layer: linear2(dropout(activation(linear1(x)))).

    x (..., d_model) -> (..., d_model), through a hidden width of ``dim_feedforward``.

    Parameters
    ----------
    d_model : int
        Width of the input and output.
    dim_feedforward : int
        Width of the hidden layer.
    activation : str, default 'gelu'
        ``"gelu"``, ``"relu"`` or ``"silu"``.
    dropout : float, default 0.0
        Dropout on the hidden layer, in training.
    bias : bool, default True
        Whether the two linear layers have biases.
    dtype : NumPy float type, default numpy.float32
        Type of the parameters and of the activations they produce (float32 or float64).
    seed : int, numpy.random.Generator or None, default None
        Seed of the initial weights. One Generator shared by a model's modules makes the whole
        model reproducible from one seed; None draws fresh entropy.
    """

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
    """The gated feed-forward block of LLaMA: w2(silu(w1 x) * w3 x).

    x (..., d_model) -> (..., d_model); the parameters are named ``w1``, ``w2``, ``w3`` as there.

    Parameters
    ----------
    d_model : int
        Width of the input and output.
    hidden_dim : int
        Width of the gated hidden layer.
    bias : bool, default False
        Whether the three linear layers have biases (LLaMA's have none).
    dtype : NumPy float type, default numpy.float32
        Type of the parameters and of the activations they produce (float32 or float64).
    seed : int, numpy.random.Generator or None, default None
        Seed of the initial weights. One Generator shared by a model's modules makes the whole
        model reproducible from one seed; None draws fresh entropy.
    """

    def __init__(self, d_model, hidden_dim, bias=False, dtype=np.float32, seed=None):
        super().__init__()
        rng = generator(seed)
        self.w1 = Linear(d_model, hidden_dim, bias, dtype, rng)
        self.w2 = Linear(hidden_dim, d_model, bias, dtype, rng)
        self.w3 = Linear(d_model, hidden_dim, bias, dtype, rng)

    def forward(self, x):
        return self.w2(autodiff.swiglu(self.w1(x), self.w3(x)))
