"""Embedding: a learned vector per category (a base, an atom type, a node type), as
torch.nn.Embedding (weight (V, E) drawn from N(0, 1), the padding row zero and never updated)."""
import numpy as np

from .. import autodiff
from .init import generator, normal
from .module import Module
from .parameter import Parameter


class Embedding(Module):
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
