"""A linear model on features of a batch: ridge for values, logistic regression for classes.

A subclass says what the features are: ``features(batch)``, (B, D) per sample or (B, N, D) per
token, from the batch's fields only. The rows are the samples, or the tokens that are not
padding; the penalty is chosen on the validation batches (:mod:`seqattn.baselines.estimators`).
"""
import numpy as np

from .base import Baseline, target_matrix
from .estimators import fit_logistic, fit_ridge


def token_inputs(batch, vocab_size=None):
    """The model's inputs per token as float features (B, N, F): float tokens as they are,
    integer ids (B, N) one-hot over `vocab_size` (an id at or past it gets a zero row)."""
    tokens = np.asarray(batch.tokens)
    if tokens.dtype.kind == "f":
        return tokens.astype(np.float64)
    if tokens.ndim != 2:
        raise ValueError(f"integer tokens have shape {tokens.shape}; expected ids (B, N)")
    onehot = np.zeros((*tokens.shape, vocab_size))
    inside = (tokens >= 0) & (tokens < vocab_size)
    b, n = np.nonzero(inside)
    onehot[b, n, tokens[inside]] = 1.0
    return onehot


def id_frequencies(batch, vocab_size):
    """(B, vocab_size + 1): each sample's frequency of every id over its unpadded tokens (an id
    at or past `vocab_size` counts in none), then its number of tokens. The mean of the
    one-hot rows, without building them."""
    ids = np.asarray(batch.tokens)
    present = ~np.asarray(batch.key_padding_mask) & (ids >= 0) & (ids < vocab_size)
    rows, cols = np.nonzero(present)
    counts = np.zeros((len(ids), vocab_size + 1))
    np.add.at(counts, (rows, ids[rows, cols]), 1.0)
    tokens = (~np.asarray(batch.key_padding_mask)).sum(axis=1)
    counts[:, :-1] /= np.maximum(tokens, 1)[:, None]
    counts[:, -1] = tokens
    return counts


def vocab_size_of(batches):
    """One more than the largest id in integer-token batches (None for float tokens)."""
    tokens = [np.asarray(b.tokens) for b in batches]
    if tokens[0].dtype.kind == "f":
        return None
    return int(max(t.max(initial=0) for t in tokens)) + 1


class LinearBaseline(Baseline):
    """Ridge (values) or logistic regression (classes) on ``features(batch)``, the penalty
    chosen on validation; takes no parameters.

    A subclass defines ``features(batch)``, (B, D) per sample or (B, N, D) per token, and may
    learn what it needs from the training batches in ``prepare(train)``. After ``fit``,
    ``model`` is the fitted linear map on the standardized features.
    """

    kind = "linear"

    @property
    def name(self):
        if self.layout is None:
            return f"{self.kind} linear model (unfitted)"
        return f"{self.kind} {'logistic' if self.layout.classes else 'ridge'}"

    def prepare(self, train):
        """Learn what ``features`` needs from the training batches (a vocabulary, a width).

        Parameters
        ----------
        train : list of seqattn.data.Batch
            The training batches (of the target group read, for targets in groups).
        """

    def features(self, batch):
        raise NotImplementedError(f"{type(self).__name__} must define features(batch)")

    def rows(self, batches):
        X, Y, known = [], [], []
        for batch in batches:
            targets, mask, tokens = target_matrix(batch, self.layout)
            features = self.features(batch)
            X.append(features if tokens is None else features[tokens])
            Y.append(targets)
            known.append(mask)
        return np.concatenate(X), np.concatenate(Y), np.concatenate(known)

    def _fit(self, train, validation):
        self.prepare(train)
        X, Y, known = self.rows(train)
        X_valid, Y_valid, known_valid = self.rows(validation)
        if self.layout.classes:
            X, Y = X[known], Y[known]
            self.model, chosen = fit_logistic(X, Y, X_valid[known_valid], Y_valid[known_valid],
                                              self.layout.n_outputs)
        else:
            self.model, chosen = fit_ridge(X, Y, known, X_valid, Y_valid, known_valid)
        return chosen

    def _predict(self, batch):
        features = self.features(batch)
        if not self.layout.per_token:
            return self.model.predict(features).astype(np.float32)
        B, N, D = features.shape
        return self.model.predict(features.reshape(B * N, D)).reshape(B, N, -1).astype(
            np.float32)
