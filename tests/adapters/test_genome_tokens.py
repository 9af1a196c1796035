"""GenomeAdapter tokenizers against plain Python references, and encode -> decode round trips."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from genome_helpers import encoded
from seqattn.adapters import GenomeAdapter
from seqattn.readers import dna_codes, from_sequences, to_strings

BASES = "ACGT"
IUPAC = "ACGTNRYSWKMBDHV"
dna = st.text(alphabet=BASES, min_size=1, max_size=40)
dna_any = st.text(alphabet=IUPAC + IUPAC.lower(), min_size=1, max_size=40)


def kmer_reference(sequence, k, stride):
    """Plain Python: the id of each k-mer (base 4 digits, first base most significant), None for
    one holding a non-ACGT letter or running past the end."""
    out = []
    start = 0
    while True:
        kmer = sequence[start: start + k].upper()
        out.append(None if len(kmer) < k or any(b not in BASES for b in kmer)
                   else sum(BASES.index(b) * 4 ** (k - 1 - j) for j, b in enumerate(kmer)))
        if start + k >= len(sequence):
            return out
        start += stride


def reverse_complement_reference(sequence):
    pairs = {"A": "T", "C": "G", "G": "C", "T": "A", "N": "N", "R": "Y", "Y": "R", "S": "S",
             "W": "W", "K": "M", "M": "K", "B": "V", "V": "B", "D": "H", "H": "D"}
    return "".join(pairs[b.upper()].lower() if b.islower() else pairs[b]
                   for b in reversed(sequence))


@settings(max_examples=40, deadline=None)
@given(sequence=dna_any, k=st.integers(1, 6), data=st.data())
def test_kmer_ids_match_the_python_reference(sequence, k, data):
    stride = data.draw(st.sampled_from(sorted({1, k})))
    batch = encoded(GenomeAdapter(tokens="ids", k=k, stride=stride, ambiguous="token"), sequence)
    expected = [4 ** k if i is None else i for i in kmer_reference(sequence, k, stride)]
    assert batch.tokens[0].tolist() == expected
    assert not batch.key_padding_mask.any()  # with ambiguous="token" nothing is masked


@settings(max_examples=30, deadline=None)
@given(sequence=dna_any, k=st.integers(1, 4))
def test_ambiguous_kmers_are_masked_and_one_hot_rows_empty(sequence, k):
    batch = encoded(GenomeAdapter(tokens="onehot", k=k), sequence)
    reference = kmer_reference(sequence, k, 1)
    unknown = np.array([i is None for i in reference])
    np.testing.assert_array_equal(batch.key_padding_mask[0], unknown)
    hot = batch.tokens[0]
    assert hot.shape == (len(reference), 4 ** k)
    np.testing.assert_array_equal(hot.sum(axis=1), ~unknown)
    known = ~unknown
    np.testing.assert_array_equal(hot[known].argmax(axis=1),
                                  [i for i in reference if i is not None])


def test_ambiguous_token_gets_its_own_one_hot_column():
    batch = encoded(GenomeAdapter(tokens="onehot", ambiguous="token"), "ANRc")
    np.testing.assert_array_equal(batch.tokens[0], np.eye(5)[[0, 4, 4, 1]])


def test_soft_masked_bases_read_as_bases_or_masked():
    upper = encoded(GenomeAdapter(tokens="ids"), "ACgt")
    masked = encoded(GenomeAdapter(tokens="ids", soft_masked="mask"), "ACgt")
    assert upper.tokens[0].tolist() == masked.tokens[0].tolist() == [0, 1, 2, 3]
    assert upper.key_padding_mask[0].tolist() == [False] * 4
    assert masked.key_padding_mask[0].tolist() == [False, False, True, True]


def test_ambiguous_error_names_record_and_position():
    ds = from_sequences({"chr2:10-16": "ACGTAC", "second": "ACRT"})
    with pytest.raises(ValueError, match=r"record 'second', position 2.*'R'"):
        GenomeAdapter(ambiguous="error").fit(ds).encode(ds)


@settings(max_examples=40, deadline=None)
@given(sequence=dna_any)
def test_reverse_complement_matches_the_reference(sequence):
    assert dna_codes.reverse_complement(sequence) == reverse_complement_reference(sequence)


@settings(max_examples=30, deadline=None)
@given(sequences=st.lists(dna_any, min_size=1, max_size=4))
def test_strings_round_trip_through_the_dataset_exactly(sequences):
    ds = from_sequences(sequences)
    assert list(to_strings(ds).values()) == sequences
    assert ds["length"].values.tolist() == [len(s) for s in sequences]


@settings(max_examples=30, deadline=None)
@given(sequences=st.lists(dna, min_size=1, max_size=4), tokens=st.sampled_from(["ids", "onehot"]))
def test_single_base_tokens_decode_to_their_bases_on_the_positions(sequences, tokens):
    ds = from_sequences(sequences)
    adapter = GenomeAdapter(tokens=tokens).fit(ds)
    batch = adapter.encode(ds)
    ids = batch.tokens if tokens == "ids" else batch.tokens.argmax(axis=-1)
    decoded = adapter.decode(batch, ids[..., None].astype(float))["prediction"]
    assert decoded.dims == ("record", "position", "output")
    for i, s in enumerate(sequences):
        row = decoded.isel(record=i, output=0).values
        assert row[: len(s)].tolist() == [BASES.index(b) for b in s]
        assert np.isnan(row[len(s):]).all()  # past the record's end: no value


@settings(max_examples=30, deadline=None)
@given(sequences=st.lists(dna, min_size=1, max_size=3), k=st.integers(1, 5), data=st.data())
def test_kmer_outputs_spread_back_as_the_mean_of_covering_kmers(sequences, k, data):
    stride = data.draw(st.sampled_from(sorted({1, k})))
    adapter = GenomeAdapter(tokens="ids", k=k, stride=stride)
    batch = encoded(adapter, sequences)
    values = np.random.default_rng(0).normal(size=batch.tokens.shape)
    decoded = adapter.decode(batch, values[..., None])["prediction"].isel(output=0)
    for i, s in enumerate(sequences):
        ids = kmer_reference(s, k, stride)  # None: a partial k-mer, masked out
        for p in range(len(s)):
            covering = [values[i, t] for t, kmer in enumerate(ids)
                        if kmer is not None and t * stride <= p < t * stride + k]
            reference = np.mean(covering) if covering else np.nan
            np.testing.assert_allclose(decoded.values[i, p], reference, err_msg=(s, p))


def test_ragged_batches_pad_and_mask_the_shorter_records():
    batch = encoded(GenomeAdapter(tokens="onehot"), ["ACGTA", "GC"])
    assert batch.tokens.shape == (2, 5, 4)
    assert batch.key_padding_mask.tolist() == [[False] * 5, [False, False, True, True, True]]
    assert batch.valid[..., 0].tolist() == (~batch.key_padding_mask).tolist()
    np.testing.assert_array_equal(batch.coords["position"][1], [0, 1, np.nan, np.nan, np.nan])
    assert not batch.tokens[1, 2:].any()


@pytest.mark.parametrize("tokens,k", [("ids", 1), ("onehot", 1), ("ids", 3), ("onehot", 2)])
def test_reverse_complement_of_a_batch_is_the_batch_of_the_reverse_complement(tokens, k):
    sequences = ["ACGTTGCA", "GGATC", "CAT"]
    adapter = GenomeAdapter(tokens=tokens, k=k)
    flipped = adapter.reverse_complement(encoded(adapter, sequences))
    expected = encoded(adapter, [dna_codes.reverse_complement(s) for s in sequences])
    np.testing.assert_array_equal(flipped.tokens, expected.tokens)
    np.testing.assert_array_equal(flipped.key_padding_mask, expected.key_padding_mask)


def test_complement_maps_kmers_to_their_reverse_complements():
    adapter = GenomeAdapter(tokens="ids", k=3)
    for kmer in ("AAC", "GAT", "CCG", "TTT"):
        rc = dna_codes.reverse_complement(kmer)
        ids = kmer_reference(kmer, 3, 1)[0], kmer_reference(rc, 3, 1)[0]
        assert adapter.complement[ids[0]] == ids[1]
    assert adapter.complement[adapter.unknown_id] == adapter.unknown_id


@pytest.mark.parametrize("options,match", [
    (dict(tokens="bits"), "tokens="), (dict(k=0), "k=0"), (dict(k=3, stride=4), "stride=4"),
    (dict(ambiguous="drop"), "ambiguous="), (dict(soft_masked="lower"), "soft_masked=")])
def test_bad_options_are_named(options, match):
    with pytest.raises(ValueError, match=match):
        GenomeAdapter(**options)
