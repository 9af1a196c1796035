"""Base codes -> tokens, and per-token values -> per-base values: the genome adapter's two
directions between bases and tokens.

``k`` consecutive bases every ``stride`` bases make a token (a last k-mer running past the end is
partial). Token ids are ``sum(base_j * 4 ** (k - 1 - j))`` (A, C, G, T = 0-3); id ``4 ** k`` is
the *unknown* k-mer (one holding an N or another IUPAC code, or a partial one).
"""
from dataclasses import dataclass

import numpy as np

from ..readers.dna_codes import LETTERS, N_CODE, PAD, SOFT


def n_tokens(lengths, k, stride):
    """Tokens of sequences of `lengths` bases (a last k-mer may be partial)."""
    return 1 + -(-np.maximum(np.asarray(lengths) - k, 0) // stride)


@dataclass(frozen=True)
class Tokenized:
    """``tokens`` (B, N) ids or (B, N, F) one-hot, ``key_padding_mask`` (B, N), ``valid``
    (B, N, k): which of a token's k bases exist, ``first`` (N,) each token's first base offset."""

    tokens: np.ndarray
    key_padding_mask: np.ndarray
    valid: np.ndarray
    first: np.ndarray


def tokenize(codes, adapter, where):
    """Tokens of base codes (B, L) uint8 by `adapter`'s options (tokens, k, stride, ambiguous,
    soft_masked, dtype); `where(b, offset)` names a base for the error of ambiguous='error'."""
    k, stride = adapter.k, adapter.stride
    B, L = codes.shape
    pad = codes == PAD
    base = np.where(pad, 0, codes % SOFT)
    ambiguous = ~pad & (base >= N_CODE)
    soft = ~pad & (codes >= SOFT)
    if adapter.ambiguous == "error" and ambiguous.any():
        b, offset = np.argwhere(ambiguous)[0]
        raise ValueError(f"{where(b, offset)}: ambiguous base {LETTERS[base[b, offset]]!r} with "
                         "ambiguous='error'; choose ambiguous='mask' or 'token' to keep such "
                         "sequences")
    n = int(n_tokens(L, k, stride))
    first = np.arange(n) * stride
    index = first[:, None] + np.arange(k)  # (n, k) base offsets of each token
    beyond = index >= L
    index = np.minimum(index, L - 1)
    # the tokens a record has alone, wherever padding puts it: a token starts on one of its
    # bases and ends inside it, or is its first or its partial last one
    real = ~pad
    begin = np.where(real.any(axis=1), real.argmax(axis=1), L)[:, None]
    end = np.where(real.any(axis=1), L - real[:, ::-1].argmax(axis=1), 0)[:, None]
    own = (first >= begin) & (first < end) & (
        (first + k <= end) | (first - stride + k < end) | (first == begin))
    padding = ~own
    exists = ~(pad[:, index] | beyond) & ~padding[..., None]  # (B, n, k)
    unknown = (~exists | ambiguous[:, index]).any(axis=-1)
    powers = 4 ** np.arange(k - 1, -1, -1)
    ids = (np.where(exists, np.minimum(base[:, index], 3), 0) * powers).sum(axis=-1)
    ids = np.where(unknown, adapter.unknown_id, ids).astype(np.int64)
    masked = padding.copy()
    if adapter.ambiguous == "mask":
        masked |= unknown
    if adapter.soft_masked == "mask":
        masked |= soft[:, index].any(axis=-1)
    if adapter.tokens == "ids":
        tokens = ids
    else:
        tokens = np.zeros((B, n, adapter.in_features), adapter.dtype)
        hot = ~masked & (ids < adapter.in_features)
        rows, cols = np.nonzero(hot)
        tokens[rows, cols, ids[hot]] = 1
    return Tokenized(tokens, masked, exists, first)


def spread_to_bases(values, key_padding_mask, valid, k, stride, length):
    """Per-token `values` (B, N, F) as per-base values (B, L, F): a base gets the mean of the
    unmasked tokens covering it (an overlapping k-mer model's outputs are spread over its k
    bases); NaN where no unmasked token covers it (past a record's end, masked bases)."""
    B, n = key_padding_mask.shape
    total = np.zeros((B, length, values.shape[-1]))
    count = np.zeros((B, length))
    first = np.arange(n) * stride
    use = ~key_padding_mask
    for j in range(k):
        at = first + j
        inside = at < length
        keep = use[:, inside] & valid[:, inside, j]
        total[:, at[inside]] += np.where(keep[..., None], values[:, inside], 0)
        count[:, at[inside]] += keep
    return np.where(count[..., None] > 0, total / np.maximum(count, 1)[..., None], np.nan)
