"""Learned absolute position embeddings: one trained vector per position, added to the tokens."""
import numpy as np

from ..init import generator, normal
from ..module import Module
from ..parameter import Parameter


class LearnedPositionalEmbedding(Module):
    """A learned vector per position, added to tokens (B, N, E) with N <= ``max_len``.

    ``weight`` (max_len, E) starts from N(0, 0.02), as in GPT-2.

    Parameters
    ----------
    max_len : int
        The longest sequence.
    dim : int
        E, the width of the tokens.
    dtype : NumPy float type, default numpy.float32
        Type of the parameters and of the activations they produce (float32 or float64).
    seed : int, numpy.random.Generator or None, default None
        Seed of the initial weights. One Generator shared by a model's modules makes the whole
        model reproducible from one seed; None draws fresh entropy.
    """

    def __init__(self, max_len, dim, dtype=np.float32, seed=None):
        super().__init__()
        self.weight = Parameter(normal(generator(seed), (max_len, dim), dtype, std=0.02))

    def forward(self, x):
        self.check_device(x=x)
        N = int(x.shape[1])
        if N > self.weight.shape[0]:
            raise ValueError(f"x has {N} positions but the embedding has max_len = "
                             f"{self.weight.shape[0]}")
        return x + self.weight[:N]  # rows 0..N-1, broadcast over the batch
