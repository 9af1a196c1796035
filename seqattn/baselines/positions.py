"""Per sample, on sequences of one length: a linear model on each position's own token (the
additive model of mutation effects) and, with ``pairwise``, on the tokens of every two
positions jointly (the pairwise, epistatic model), as MAVE-NN fits them.

Reads integer ids (B, N) with no padding, every sample of the same length N: the additive
features are the ids one-hot at each position (N * V columns, V the vocabulary), the pairwise
ones add the pair of ids at each two positions i < j one-hot (N (N - 1) / 2 * V^2 columns).
A model that reads a sequence's positions (learned positions, or none beyond the order) has
both in its function class; a k-mer or frequency model does not, so on a fixed-length library
of variants these are the baselines to beat. Past ``max_features`` columns fit refuses (the
ridge solve is cubic in them).
"""
import numpy as np
from scipy import sparse

from .linear import LinearBaseline, token_inputs, vocab_size_of

MAX_FEATURES = 8192


def position_width(batch, vocab_size, pairwise):
    """The number of feature columns of `batch`'s ids, additive or pairwise."""
    n = np.asarray(batch.tokens).shape[1]
    return n * vocab_size + (n * (n - 1) // 2 * vocab_size ** 2 if pairwise else 0)


def fixed_length_ids(batch):
    """Whether `batch`'s tokens are ids (B, N) with no padding."""
    tokens = np.asarray(batch.tokens)
    return tokens.dtype.kind in "iu" and tokens.ndim == 2 and not np.asarray(
        batch.key_padding_mask).any()


class PositionFeatures(LinearBaseline):
    """Ridge (values) or logistic regression (classes) on the one-hot ids per position, with
    `pairwise` per pair of positions too (see the module docstring)."""

    def __init__(self, pairwise=False, max_features=MAX_FEATURES):
        self.pairwise, self.max_features = bool(pairwise), int(max_features)

    @property
    def kind(self):
        return "pairwise" if self.pairwise else "additive"

    def prepare(self, train):
        if not all(fixed_length_ids(b) for b in train):
            raise ValueError("PositionFeatures reads ids (B, N) of one length with no padding; "
                             "these training batches have float tokens or padding")
        if self.layout.per_token:
            raise ValueError("PositionFeatures predicts one target per sequence; these targets "
                             "are per token")
        self.length = np.asarray(train[0].tokens).shape[1]
        self.vocab_size = vocab_size_of(train)
        width = position_width(train[0], self.vocab_size, self.pairwise)
        if width > self.max_features:
            raise ValueError(f"{self.kind} features of {self.length} positions over "
                             f"{self.vocab_size} ids take {width} columns, past "
                             f"max_features={self.max_features}")

    def features(self, batch):
        tokens = np.asarray(batch.tokens)
        if tokens.shape[1] != self.length or np.asarray(batch.key_padding_mask).any():
            raise ValueError(f"the batch's sequences have {tokens.shape[1]} positions (or "
                             f"padding); PositionFeatures was fitted on {self.length}, unpadded")
        onehot = token_inputs(batch, self.vocab_size).reshape(len(tokens), -1)
        if not self.pairwise:
            return onehot
        V = self.vocab_size
        i, j = np.triu_indices(self.length, k=1)
        column = tokens[:, i] * V + tokens[:, j] + np.arange(len(i)) * V * V  # (B, pairs)
        # an id unseen in training (at or past V) leaves its pairs without a column
        seen = (tokens[:, i] >= 0) & (tokens[:, i] < V) & (tokens[:, j] >= 0) & (tokens[:, j] < V)
        rows = np.nonzero(seen)[0]
        pairs = sparse.csr_matrix((np.ones(len(rows)), (rows, column[seen])),
                                  shape=(len(tokens), len(i) * V * V))
        return np.hstack([onehot, pairs.toarray()])
