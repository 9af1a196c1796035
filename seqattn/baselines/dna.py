"""DNA: logistic (or ridge) regression on k-mer frequencies, k chosen on validation.

Reads single-base tokens, as the genome adapter makes them with ``k=1``: ids (B, N) with
A, C, G, T = 0-3 (4 is an unknown base; a larger id means k-mer tokens, refused), or one-hot
rows (B, N, 4 or 5), the first four columns A, C, G, T. A k-mer is k consecutive tokens that
are all known bases and not padding; its id is ``sum(base_j * 4 ** (k - 1 - j))``, the adapter's own numbering. With
``strand_symmetric`` a k-mer and its reverse complement count as one. The features are each
sample's k-mer frequencies (counts over its number of k-mers), kept sparse.
"""
import numpy as np
from scipy import sparse

from .base import target_matrix
from .estimators import fit_logistic, fit_ridge
from .linear import LinearBaseline

KMER_SIZES = (3, 4, 5, 6)
UNKNOWN = -1


def bases(batch):
    """(B, N) base codes 0-3, UNKNOWN where the token is not a known base or is padding."""
    tokens = np.asarray(batch.tokens)
    if tokens.dtype.kind in "iu" and tokens.ndim == 2:
        if tokens.max(initial=0) > 4:
            raise ValueError(f"token ids run up to {tokens.max()}; k-mer counts read single "
                             "bases (ids 0-4, GenomeAdapter(k=1)). For k-mer ids, "
                             "PooledFeatures counts the ids themselves")
        codes = np.where((tokens >= 0) & (tokens < 4), tokens, UNKNOWN)
    elif tokens.dtype.kind == "f" and tokens.ndim == 3 and tokens.shape[2] in (4, 5):
        one = tokens[..., :4]
        codes = np.where(np.isclose(one.sum(axis=2), 1.0) & (one.max(axis=2) == 1.0),
                         one.argmax(axis=2), UNKNOWN)
    else:
        raise ValueError(f"tokens have shape {tokens.shape} and dtype {tokens.dtype}; k-mer "
                         "counts read single bases: ids (B, N) with A, C, G, T = 0-3 or one-hot "
                         "rows (B, N, 4 or 5) (GenomeAdapter(k=1))")
    return np.where(np.asarray(batch.key_padding_mask), UNKNOWN, codes)


def kmer_ids(codes, k, strand_symmetric):
    """(B, N - k + 1) k-mer ids, UNKNOWN where a k-mer holds an unknown base."""
    B, N = codes.shape
    if N < k:
        return np.full((B, 0), UNKNOWN)
    windows = np.lib.stride_tricks.sliding_window_view(codes, k, axis=1)
    powers = 4 ** np.arange(k - 1, -1, -1)
    ids = windows @ powers
    if strand_symmetric:  # the reverse complement: bases reversed, each b -> 3 - b
        ids = np.minimum(ids, (3 - windows[..., ::-1]) @ powers)
    return np.where((windows == UNKNOWN).any(axis=2), UNKNOWN, ids)


def kmer_frequencies(codes, k, strand_symmetric):
    """(B, 4 ** k) sparse frequencies of each sample's k-mers."""
    ids = kmer_ids(codes, k, strand_symmetric)
    rows, cols = np.nonzero(ids != UNKNOWN)
    counts = sparse.csr_matrix((np.ones(len(rows)), (rows, ids[rows, cols])),
                               shape=(len(codes), 4 ** k))
    total = np.maximum(np.asarray(counts.sum(axis=1)).ravel(), 1.0)
    return sparse.csr_matrix(sparse.diags(1.0 / total) @ counts)


class KmerCounts(LinearBaseline):
    """Logistic (classes) or ridge (values) regression on each sample's k-mer frequencies,
    for targets per sequence (N -> 1); k among ``kmer_sizes`` and the penalty chosen on
    validation. Reads single-base tokens (see the module docstring).

    Parameters
    ----------
    kmer_sizes : tuple of int, default (3, 4, 5, 6)
        The candidate k-mer lengths k (4 ** k features each).
    strand_symmetric : bool, default False
        Count a k-mer and its reverse complement as one (for sequences read on either
        strand).
    """

    def __init__(self, kmer_sizes=KMER_SIZES, strand_symmetric=False):
        self.kmer_sizes = tuple(kmer_sizes)
        self.strand_symmetric = bool(strand_symmetric)

    @property
    def kind(self):
        return f"{self.k if self.chosen else 'k'}-mer"

    def features(self, batch):
        return kmer_frequencies(bases(batch), self.k, self.strand_symmetric)

    def _fit(self, train, validation):
        if self.layout.per_token:
            raise ValueError("KmerCounts predicts one target per sequence; these targets are "
                             "per token")
        train_targets = [target_matrix(b, self.layout)[:2] for b in train]
        valid_targets = [target_matrix(b, self.layout)[:2] for b in validation]
        Y, known = (np.concatenate(x) for x in zip(*train_targets))
        Y_valid, known_valid = (np.concatenate(x) for x in zip(*valid_targets))
        choices = {}
        for k in self.kmer_sizes:
            self.k = k
            X = sparse.vstack([self.features(b) for b in train]).tocsr()
            X_valid = sparse.vstack([self.features(b) for b in validation]).tocsr()
            if self.layout.classes:
                model, chosen = fit_logistic(X[known], Y[known], X_valid[known_valid],
                                             Y_valid[known_valid], self.layout.n_outputs)
                score = min(chosen["validation_log_loss"].values())
            else:
                model, chosen = fit_ridge(X.toarray(), Y, known, X_valid.toarray(), Y_valid,
                                          known_valid)
                score = min(chosen["validation_mse"].values())
            choices[k] = (score, model, chosen)
        self.k = min(choices, key=lambda k: choices[k][0])
        score, self.model, chosen = choices[self.k]
        return {"k": self.k, **chosen}
