"""Variant windows (alleles at the centre base), their scores, and in-silico mutagenesis, with
models whose scores are known functions of the sequence."""
import numpy as np
import pytest

from seqattn.adapters import GenomeAdapter
from seqattn.adapters.genome_variants import mutagenesis, variant_effects, variant_windows
from seqattn.readers import from_sequences
from seqattn.readers.dna_codes import letters_of

#                 0123456789012345678
REFERENCE = {"chr7:1000-1019": "ACGTTGCAACGGATCCTAG"}


def window_strings(windows):
    """allele -> list of window strings ('.' for padding)."""
    codes = windows["sequence"].values
    return {allele: ["".join(letters_of([c]) or "." for c in row)
                     for row in codes[:, a]] for a, allele in enumerate(("ref", "alt"))}


@pytest.mark.parametrize("variant,ref,alt", [
    (("chr7", 1006, "C", "T"), "TTGCAAC", "TTGTAAC"),  # SNV
    (("chr7", 1006, "C", "CGG"), "TTGCAAC", "TTGCGGA"),  # insertion: right flank shifts
    (("chr7", 1006, "CAA", "C"), "TTGCAAC", "TTGCCGG"),  # deletion
    (("chr7", 1001, "C", "A"), "..ACGTT", "..AAGTT"),  # near the start: padded
])
def test_alleles_start_at_the_centre_base(variant, ref, alt):
    windows = variant_windows(REFERENCE, [variant], window=7)
    assert windows.attrs["centre"] == 3
    got = window_strings(windows)
    assert (got["ref"][0], got["alt"][0]) == (ref, alt)
    assert windows["offset"].values.tolist() == [variant[1] - 1000]


def test_variants_by_record_name_and_offset():
    windows = variant_windows({"locus": "ACGTAC"}, [("locus", 2, "G", "A")], window=4)
    assert window_strings(windows) == {"ref": ["ACGT"], "alt": ["ACAT"]}


def test_mismatched_reference_allele_names_variant_record_and_position():
    with pytest.raises(ValueError, match=r"chr7:1006:G>T.*record 'chr7:1000-1019' at position "
                                         r"6.*holds 'C'"):
        variant_windows(REFERENCE, [("chr7", 1006, "G", "T")], window=7)
    with pytest.raises(ValueError, match="no record covers chr7 position 5000"):
        variant_windows(REFERENCE, [("chr7", 5000, "A", "T")], window=7)


def count_of(base, adapter):
    """An N -> 1 'model': the number of `base` letters among the unmasked single-base tokens."""
    def model(tokens, key_padding_mask):
        ids = tokens if adapter.tokens == "ids" else tokens.argmax(axis=-1)
        return ((ids == "ACGT".index(base)) & ~key_padding_mask).sum(axis=1, keepdims=True) \
            .astype(np.float64)
    return model


def test_variant_effects_are_alt_minus_ref_scores():
    adapter = GenomeAdapter(tokens="ids")
    variants = [("chr7", 1006, "C", "G"), ("chr7", 1002, "G", "C"), ("chr7", 1009, "C", "CGG")]
    effects = variant_effects(count_of("G", adapter), REFERENCE, variants, adapter, window=9)
    windows = window_strings(variant_windows(REFERENCE, variants, window=9))
    np.testing.assert_array_equal(effects["ref_score"], [w.count("G") for w in windows["ref"]])
    np.testing.assert_array_equal(effects["alt_score"], [w.count("G") for w in windows["alt"]])
    np.testing.assert_array_equal(effects["difference"], [1, -1, 2])
    assert effects["variant"].values.tolist() == ["chr7:1006:C>G", "chr7:1002:G>C",
                                                  "chr7:1009:C>CGG"]


@pytest.mark.parametrize("tokens", ["ids", "onehot"])
def test_mutagenesis_is_a_position_by_base_map_of_score_changes(tokens):
    adapter = GenomeAdapter(tokens=tokens)
    sequence = {"chr3:50-56": "GANCTG"}
    effect = mutagenesis(count_of("G", adapter), sequence, adapter, batch_size=7)
    assert effect.dims == ("position", "base")
    assert effect["base"].values.tolist() == list("ACGT")
    np.testing.assert_array_equal(effect["genomic_position"], np.arange(50, 56))
    # reference score 2 (the N is masked); a G gained +1, a G lost -1, the reference itself 0
    expected = np.array([[-1, -1, 0, -1], [0, 0, 1, 0], [0, 0, 1, 0], [0, 0, 1, 0],
                         [0, 0, 1, 0], [-1, -1, 0, -1]], float)
    np.testing.assert_array_equal(effect.values, expected)
    assert effect.attrs["reference_score"] == 2 and effect.attrs["record"] == "chr3:50-56"


def test_mutagenesis_takes_one_sequence():
    with pytest.raises(ValueError, match="mutagenesis takes one sequence; got 2 records"):
        mutagenesis(lambda t, m: t, ["AC", "GT"], GenomeAdapter())


def test_mutagenesis_of_a_class_is_its_log_odds():
    ds = from_sequences({"r0": "GAT", "r1": "CCA"})
    ds["label"] = ("record", np.array(["bound", "free"], object))
    adapter = GenomeAdapter(tokens="ids").fit(ds, targets="label")

    def model(tokens, key_padding_mask):  # logits (G count, 0, 1) for classes bound, free, ...
        g = (tokens == 2).sum(axis=1).astype(np.float64)
        return np.stack([g, np.zeros_like(g)], axis=1)

    effect = mutagenesis(model, ds.isel(record=[0]), adapter, output="free")
    # log-odds of "free" = -(G count): losing the G at position 0 raises it by 1
    np.testing.assert_allclose(effect.values[0], [1, 1, 0, 1])
    np.testing.assert_allclose(effect.values[1], [0, 0, -1, 0])
    assert effect.attrs["reference_score"] == -1
    with pytest.raises(ValueError, match=r"output='maybe'; expected an output index \(0 .. 1\) "
                                         r"or one of the fitted classes \['bound', 'free'\]"):
        mutagenesis(model, ds.isel(record=[0]), adapter, output="maybe")
