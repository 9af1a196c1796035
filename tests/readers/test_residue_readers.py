"""Protein and RNA strings and the variants of a wild type as the residue Dataset."""
import numpy as np
import pytest

from seqattn.readers.alphabets import PROTEIN
from seqattn.readers.residues import from_mutations, from_residues


def test_residues_become_codes_padded_past_each_end():
    ds = from_residues({"long": "MKV*", "short": "Wx"})
    np.testing.assert_array_equal(ds["sequence"].values,
                                  [PROTEIN.codes("MKV*"), [18, PROTEIN.unknown, 255, 255]])
    assert ds["length"].values.tolist() == [4, 2] and ds.attrs["alphabet"] == "protein"
    assert from_residues(["AC", "GU"], alphabet="RNA")["record"].values.tolist() == ["seq0",
                                                                                     "seq1"]


@pytest.mark.parametrize("sequences,match", [
    (["MK", ""], "record 'seq1' is an empty sequence"),
    ({"a": "MK", "b": "M1"}, r"record 'b', position 1 \(0-based\): '1' is not a protein"),
    ([], "no sequences given")])
def test_bad_sequences_are_named(sequences, match):
    with pytest.raises(ValueError, match=match):
        from_residues(sequences)


def test_a_repeated_variant_and_an_unknown_alphabet_are_named():
    with pytest.raises(ValueError, match="'T2A' appears twice"):
        from_mutations("MTK", ["T2A", "T2A"])
    with pytest.raises(ValueError, match="alphabet='amino'; expected one of"):
        from_residues(["MK"], alphabet="amino")


def test_variants_of_a_wild_type_carry_their_mutations():
    ds = from_mutations("MTYK", ["WT", "p.Thr2Ala", "T2A:K4*"], first_position=1)
    assert ds["record"].values.tolist() == ["WT", "p.Thr2Ala", "T2A:K4*"]
    assert ds["mutations"].values.tolist() == ["", "T2A", "T2A:K4*"]
    assert ds["n_mutations"].values.tolist() == [0, 1, 2]
    np.testing.assert_array_equal(ds["sequence"].values[2], PROTEIN.codes("MAY*"))
    with pytest.raises(ValueError, match="Y2A expects 'Y' at position 2, but the wild type "
                                         "holds 'T'"):
        from_mutations("MTYK", ["Y2A"])
