"""DNA: logistic (or ridge) regression on k-mer frequencies, k chosen on validation.

Reads single-base tokens, as the genome adapter makes them with ``k=1``: ids (B, N) with
A, C, G, T = 0-3 (4 is an unknown base; a larger id means k-mer tokens, refused), or one-hot
rows (B, N, 4 or 5), the first four columns A, C, G, T. A k-mer is k consecutive tokens that
are all known bases and not padding; its id is ``sum(base_j * 4 ** (k - 1 - j))``, the
adapter's own numbering. With ``strand_symmetric`` a k-mer and its reverse complement count as
one. The features are each sample's k-mer frequencies (counts over its number of k-mers), kept
sparse.

With ``token_k`` (and ``token_stride``) it reads the k-mer ids of ``GenomeAdapter(k=token_k,
stride=token_stride, tokens="ids")`` instead, the tokens a k-mer model sees: each base is read
back from a known k-mer that holds it. With stride 1 every base of a peak without ambiguous
bases is read back, so the frequencies are those of its single bases; a base whose every
k-mer holds an N (or, with a stride, lies in a partial last k-mer) is unknown.
"""
import numpy as np
from scipy import sparse

from .base import target_matrix
from .estimators import fit_logistic, fit_ridge
from .linear import LinearBaseline

KMER_SIZES = (3, 4, 5, 6)
UNKNOWN = -1


def bases(batch, token_k=1, token_stride=1):
    """(B, N) base codes 0-3, UNKNOWN where the token is not a known base or is padding; of
    k-mer ids (``token_k`` > 1) the bases read back from them."""
    tokens = np.asarray(batch.tokens)
    if token_k > 1:
        return bases_of_kmers(tokens, np.asarray(batch.key_padding_mask), token_k, token_stride)
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


def bases_of_kmers(tokens, key_padding_mask, k, stride):
    """(B, (N - 1) * stride + k) base codes of k-mer ids (B, N) taken every `stride` bases: each
    base from a known, unpadded k-mer that holds it, UNKNOWN where none does."""
    if tokens.dtype.kind not in "iu" or tokens.ndim != 2:
        raise ValueError(f"tokens have shape {tokens.shape} and dtype {tokens.dtype}; k-mer "
                         f"counts with token_k={k} read k-mer ids (B, N) "
                         f"(GenomeAdapter(k={k}, tokens='ids'))")
    if tokens.max(initial=0) > 4 ** k:
        raise ValueError(f"token ids run up to {tokens.max()}; {k}-mer ids run up to {4 ** k} "
                         f"(the unknown k-mer): is token_k={k} the adapter's k?")
    B, N = tokens.shape
    codes = np.full((B, (N - 1) * stride + k if N else 0), UNKNOWN, dtype=np.int64)
    rows, columns = np.nonzero((tokens < 4 ** k) & ~key_padding_mask)
    known = tokens[rows, columns]
    for offset in range(k):
        codes[rows, columns * stride + offset] = (known // 4 ** (k - 1 - offset)) % 4
    return codes


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
    token_k, token_stride : int, default 1
        The k and stride of the k-mer ids it reads (``GenomeAdapter(k=token_k,
        stride=token_stride, tokens="ids")``, a k-mer model's own batches); 1: single bases.
    """

    def __init__(self, kmer_sizes=KMER_SIZES, strand_symmetric=False, token_k=1,
                 token_stride=1):
        self.kmer_sizes = tuple(kmer_sizes)
        self.strand_symmetric = bool(strand_symmetric)
        self.token_k, self.token_stride = int(token_k), int(token_stride)
        if self.token_k < 1 or self.token_stride < 1:
            raise ValueError(f"token_k={token_k!r} and token_stride={token_stride!r}; expected "
                             "positive ints (the adapter's k and stride)")

    @property
    def kind(self):
        return f"{self.k if self.chosen else 'k'}-mer" + \
            " strand-symmetric" * self.strand_symmetric

    def features(self, batch):
        return kmer_frequencies(bases(batch, self.token_k, self.token_stride), self.k,
                                self.strand_symmetric)

    def on_token_frequencies(self):
        """The fitted map as (weight (outputs, 4 ** token_k), bias (outputs,)) on the
        frequencies of the overlapping ``token_k``-mer ids it reads (stride 1): each shorter
        k-mer's weight spread evenly over the k - k' + 1 places it has in a ``token_k``-mer.
        This is the map of a k-mer model's linear path (:func:`seqattn.baselines.warm_start`),
        equal to the baseline's but for the k-mers within ``token_k`` bases of a sequence's
        ends, which a bag of ``token_k``-mers cannot place."""
        if self.chosen is None:
            raise ValueError("KmerCounts is not fitted; fit it before reading its map")
        big, k = self.token_k, self.k
        if self.token_stride != 1 or k > big:
            raise ValueError(f"the {k}-mer map cannot be read on {big}-mer ids every "
                             f"{self.token_stride} bases: the ids must overlap (token_stride=1) "
                             f"and hold the k-mers (k at most token_k={big})")
        every = (np.arange(4 ** big)[:, None] // 4 ** np.arange(big - 1, -1, -1)) % 4
        inside = kmer_ids(every, k, self.strand_symmetric)  # (4 ** big, big - k + 1)
        weight, bias = self.model.raw()
        return weight[:, inside].mean(axis=2), bias

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
