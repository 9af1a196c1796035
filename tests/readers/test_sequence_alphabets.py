"""DNA, RNA and protein alphabets: codes of every letter, the ambiguity and stop policies, and
errors that name the record and position."""
import numpy as np
import pytest

from seqattn.readers.alphabets import DNA, PROTEIN, RNA


def test_residues_are_codes_in_order_and_lower_case_reads_as_upper():
    np.testing.assert_array_equal(PROTEIN.codes("ACDEFGHIKLMNPQRSTVWY"), np.arange(20))
    np.testing.assert_array_equal(PROTEIN.codes("mkv"), PROTEIN.codes("MKV"))
    np.testing.assert_array_equal(RNA.codes("ACGUn"), [0, 1, 2, 3, RNA.unknown])
    assert PROTEIN.letters(PROTEIN.codes("MKX*V")) == "MKX*V"


@pytest.mark.parametrize("alphabet,text,match", [
    (RNA, "ACGT", r"record 'r', position 3 \(0-based\): 'T' is not a RNA letter"),
    (DNA, "ACGU", r"position 3 \(0-based\): 'U' is not a DNA letter"),
    (PROTEIN, "MK-V", r"position 2 \(0-based\): '-' is not a protein letter .*stop \*"),
    (PROTEIN, "MKé", r"position 2 \(0-based\): 'é'")])
def test_letters_outside_the_alphabet_name_record_and_position(alphabet, text, match):
    with pytest.raises(ValueError, match=match):
        alphabet.codes(text, record="r")


def test_ambiguity_codes_and_stops_follow_their_policies():
    codes = PROTEIN.codes("MXB*K")  # X, B ambiguous; * a stop
    ids, masked = PROTEIN.tokens(codes)  # defaults: ambiguous masked, stop a token
    np.testing.assert_array_equal(ids, [10, 20, 20, 21, 8])
    np.testing.assert_array_equal(masked, [False, True, True, False, False])
    _, masked = PROTEIN.tokens(codes, ambiguous="token", stop="mask")
    np.testing.assert_array_equal(masked, [False, False, False, True, False])
    with pytest.raises(ValueError, match=r"seq 1, position 3: a stop with stop='error'"):
        PROTEIN.tokens(codes[None], stop="error", where=lambda i: f"seq {i[0] + 1}, "
                                                              f"position {i[1]}")
    with pytest.raises(ValueError, match="position 1: an ambiguity code with ambiguous='error'"):
        PROTEIN.tokens(codes, ambiguous="error")
    with pytest.raises(ValueError, match=r"stop='drop'; expected one of \('mask', 'token'"):
        PROTEIN.tokens(codes, stop="drop")


def test_one_hot_columns_exist_only_for_token_policies():
    codes = RNA.codes("AUN")
    np.testing.assert_array_equal(RNA.one_hot(codes), [[1, 0, 0, 0], [0, 0, 0, 1], [0, 0, 0, 0]])
    np.testing.assert_array_equal(RNA.one_hot(codes, ambiguous="token"),
                                  [[1, 0, 0, 0, 0], [0, 0, 0, 1, 0], [0, 0, 0, 0, 1]])
    hot = PROTEIN.one_hot(PROTEIN.codes("W*"))  # the stop's column comes after the 20 residues
    assert hot.shape == (2, 21) and hot[0, 18] == 1 and hot[1, 20] == 1
