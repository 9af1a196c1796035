"""k-mer counts from single-base tokens: ids pinned by hand, strand symmetry, unknown bases
skipped, and k chosen on validation."""
import numpy as np
import pytest

from baseline_batches import batch
from seqattn.baselines import KmerCounts
from seqattn.baselines.dna import UNKNOWN, bases, kmer_frequencies, kmer_ids

A, C, G, T = range(4)
RNG = np.random.default_rng(4)


def test_kmer_ids_follow_the_adapters_numbering():
    codes = np.array([[A, C, G, T]])
    assert kmer_ids(codes, 3, False).tolist() == [[0 * 16 + 1 * 4 + 2, 1 * 16 + 2 * 4 + 3]]
    # ACG and its reverse complement CGT count as one (the smaller id)
    symmetric = kmer_ids(np.array([[A, C, G], [C, G, T]]), 3, True)
    assert symmetric[0, 0] == symmetric[1, 0] == 6


def test_unknown_bases_and_padding_leave_kmers_out():
    tokens = np.array([[A, C, 4, G, T, A]])  # id 4: an N
    padding = np.array([[False, False, False, False, False, True]])
    codes = bases(batch(tokens, [0], key_padding_mask=padding))
    assert codes.tolist() == [[A, C, UNKNOWN, G, T, UNKNOWN]]
    frequencies = kmer_frequencies(codes, 2, False).toarray()
    assert frequencies[0, A * 4 + C] == frequencies[0, G * 4 + T] == 0.5
    assert frequencies.sum() == 1.0
    onehot = np.eye(5)[tokens]
    assert bases(batch(onehot.astype(np.float32), [0], key_padding_mask=padding)).tolist() \
        == codes.tolist()


def motif_task(samples, motif=(G, A, T, T, A, C)):
    """Class 1 sequences hold a 6-base motif somewhere; shorter k-mers are common in both."""
    tokens = RNG.integers(0, 4, size=(samples, 40))
    labels = RNG.integers(0, 2, samples)
    for i in np.flatnonzero(labels):
        start = RNG.integers(0, 34)
        tokens[i, start:start + 6] = motif
    return batch(tokens, labels)


def accuracy(fitted, test):
    return (fitted.predict(test).argmax(-1) == test.targets).mean()


def test_kmer_size_is_chosen_on_validation():
    train, validation, test = motif_task(300), motif_task(150), motif_task(300)
    fitted = KmerCounts(kmer_sizes=(2, 4)).fit([train], [validation])
    assert fitted.chosen["k"] == 4
    assert fitted.name == "4-mer logistic"
    assert accuracy(fitted, test) > 0.9
    assert accuracy(KmerCounts(kmer_sizes=(2,)).fit([train], [validation]), test) < 0.8


def test_kmer_ids_are_not_read_as_bases():
    kmers = batch(np.array([[0, 4000, 17]]), [0])
    with pytest.raises(ValueError, match="token ids run up to 4000"):
        bases(kmers)


def test_kmer_ids_are_read_back_to_their_bases():
    """2-mer ids every base: ACGT -> AC, CG, GT; padding and the unknown 2-mer (id 16) hold no
    base, but a base held by a known neighbour is still read."""
    ids = np.array([[A * 4 + C, C * 4 + G, G * 4 + T, 16], [16, C * 4 + A, A * 4 + A, 0]])
    padding = np.array([[False, False, False, False], [False, False, False, True]])
    codes = bases(batch(ids, [0, 1], key_padding_mask=padding), token_k=2)
    assert codes.tolist() == [[A, C, G, T, UNKNOWN], [UNKNOWN, C, A, A, UNKNOWN]]
    strided = bases(batch(np.array([[A * 4 + C, G * 4 + T]]), [0]), token_k=2, token_stride=2)
    assert strided.tolist() == [[A, C, G, T]]
    with pytest.raises(ValueError, match="is token_k=2 the adapter's k"):
        bases(batch(np.array([[0, 4000]]), [0]), token_k=2)
    with pytest.raises(ValueError, match="token_k=0"):
        KmerCounts(token_k=0)
