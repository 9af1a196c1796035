"""Embedding: a learned vector per category (a base, an atom type, a node type), as
torch.nn.Embedding (weight (V, E) drawn from N(0, 1), the padding row zero and never updated)."""
import numpy as np

from .. import autodiff
from .init import generator, normal
from .module import Module
from .parameter import Parameter


class Embedding(Module):
    """A table of learnable vectors looked up by integer id, as torch.nn.Embedding.

    ids (B, N) (any integer dtype) -> (B, N, embedding_dim); ``weight`` is (num_embeddings,
    embedding_dim), drawn from N(0, 1) as torch does.

    Parameters
    ----------
    num_embeddings : int
        Number of ids (the vocabulary size).
    embedding_dim : int
        Width of each vector.
    padding_idx : int, optional
        An id whose vector starts at zero and receives no gradient (padding).
    dtype : NumPy float type, default numpy.float32
        Type of the parameters and of the activations they produce (float32 or float64).
    seed : int, numpy.random.Generator or None, default None
        Seed of the initial weights. One Generator shared by a model's modules makes the whole
        model reproducible from one seed; None draws fresh entropy.
    """

    def __init__(self, num_embeddings, embedding_dim, padding_idx=None, dtype=np.float32,
                 seed=None):
        super().__init__()
        weight = normal(generator(seed), (num_embeddings, embedding_dim), dtype)
        if padding_idx is not None:
            if not -num_embeddings <= padding_idx < num_embeddings:
                raise ValueError(f"padding_idx must lie in [-{num_embeddings}, {num_embeddings}),"
                                 f" got {padding_idx}")
            padding_idx %= num_embeddings
            weight[padding_idx] = 0
        self.padding_idx = padding_idx
        self.weight = Parameter(weight)

    def forward(self, ids):
        """ids (...) integers -> (..., E)."""
        self.check_device(ids=ids)
        return autodiff.embedding(ids, self.weight, self.padding_idx)
