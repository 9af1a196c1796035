"""Per sample, on sequences of one length: a linear model on each position's own token (the
additive model of mutation effects) and, with ``pairwise``, on the tokens of every two
positions jointly (the pairwise, epistatic model), as MAVE-NN fits them.

Reads tokens with no padding, every sample of the same length N: ids (B, N), taken one-hot over
the vocabulary V, or float rows (B, N, F) as they are (one-hot rows for residues). The additive
features are every position's row (N * F columns); the pairwise ones add, for every two
positions i < j, the outer product of their rows (N (N - 1) / 2 * F^2 columns): for one-hot
rows, the pair of residues one-hot. A model that reads a sequence's positions has both in its
function class; a k-mer or frequency model does not, so on a fixed-length library of variants
these are the baselines to beat. Past ``max_features`` columns fit refuses (the ridge solve is
cubic in them).
"""
import numpy as np

from .linear import LinearBaseline, token_inputs, vocab_size_of

MAX_FEATURES = 4096


def position_width(batch, pairwise, vocab_size=None):
    """The number of feature columns of `batch`'s tokens, additive or pairwise (ids: over
    `vocab_size`, by default the batch's largest id plus one)."""
    tokens = np.asarray(batch.tokens)
    n = tokens.shape[1]
    f = tokens.shape[2] if tokens.ndim == 3 else (vocab_size or int(tokens.max(initial=0)) + 1)
    return n * f + (n * (n - 1) // 2 * f ** 2 if pairwise else 0)


def position_features(rows, pairwise):
    """(B, N, F) rows -> (B, N F): every position's row; with `pairwise` then the outer products
    of the rows of every two positions i < j, in ``np.triu_indices`` order (N (N - 1) / 2 F^2
    more columns)."""
    additive = rows.reshape(len(rows), -1)
    if not pairwise:
        return additive
    i, j = np.triu_indices(rows.shape[1], k=1)
    pairs = np.einsum("bpf,bpg->bpfg", rows[:, i], rows[:, j])  # (B, pairs, F, F)
    return np.hstack([additive, pairs.reshape(len(rows), -1)])


def fixed_length(batch):
    """Whether `batch`'s tokens are ids (B, N) or float rows (B, N, F) with no padding."""
    tokens = np.asarray(batch.tokens)
    shaped = (tokens.dtype.kind in "iu" and tokens.ndim == 2) or (
        tokens.dtype.kind == "f" and tokens.ndim == 3)
    return shaped and not np.asarray(batch.key_padding_mask).any()


class PositionFeatures(LinearBaseline):
    """Ridge (values) or logistic regression (classes) on the tokens per position, with
    `pairwise` per pair of positions too (see the module docstring), for targets per
    sequence (N -> 1) of sequences of one length without padding; the penalty chosen on
    validation.

    Parameters
    ----------
    pairwise : bool, default False
        False: the additive model (every position's row, N * F columns). True: the pairwise
        model, adding the outer product of the rows of every two positions
        (N (N - 1) / 2 * F^2 more columns).
    max_features : int, default 4096
        The most feature columns fit accepts; past it fit raises ValueError.
    """

    def __init__(self, pairwise=False, max_features=MAX_FEATURES):
        self.pairwise, self.max_features = bool(pairwise), int(max_features)

    @property
    def kind(self):
        return "pairwise" if self.pairwise else "additive"

    def prepare(self, train):
        if self.layout.per_token:
            raise ValueError("PositionFeatures predicts one target per sequence; these targets "
                             "are per token")
        if not all(fixed_length(b) for b in train):
            raise ValueError("PositionFeatures reads ids (B, N) or float rows (B, N, F) of one "
                             "length with no padding; these training batches have padding or "
                             f"tokens of shape {np.asarray(train[0].tokens).shape}")
        self.length = np.asarray(train[0].tokens).shape[1]
        self.vocab_size = vocab_size_of(train)
        width = position_width(train[0], self.pairwise, self.vocab_size)
        if width > self.max_features:
            raise ValueError(f"{self.kind} features of {self.length} positions take {width} "
                             f"columns, past max_features={self.max_features}")

    def features(self, batch):
        tokens = np.asarray(batch.tokens)
        if tokens.shape[1] != self.length or np.asarray(batch.key_padding_mask).any():
            raise ValueError(f"the batch's sequences have {tokens.shape[1]} positions (or "
                             f"padding); PositionFeatures was fitted on {self.length}, unpadded")
        return position_features(token_inputs(batch, self.vocab_size), self.pairwise)
