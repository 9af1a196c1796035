"""Mutations as the field writes them (T02A, A23G:K45R, p.Thr2Ala), parsed, applied to a wild
type and recovered from a variant, with errors that name what failed."""
import pytest

from seqattn.readers.alphabets import DNA
from seqattn.readers.mutations import (Mutation, apply_mutations, mutations_between,
                                       parse_mutations)

WILD_TYPE = "MTYKLILNGKTLKGETTTEA"  # GB1's first 20 residues


@pytest.mark.parametrize("text,expected", [
    ("T02A", (Mutation(1, "T", "A"),)),
    ("K45R:A23G", (Mutation(22, "A", "G"), Mutation(44, "K", "R"))),
    ("a23g, k45r", (Mutation(22, "A", "G"), Mutation(44, "K", "R"))),
    ("p.Thr2Ala", (Mutation(1, "T", "A"),)),
    ("p.(Thr2Ala)", (Mutation(1, "T", "A"),)),
    ("p.[Thr2Ala;Lys45Ter]", (Mutation(1, "T", "A"), Mutation(44, "K", "*"))),
    ("p.Thr2=", (Mutation(1, "T", "T"),)),
    ("p.T2A", (Mutation(1, "T", "A"),)),
    ("Y3*", (Mutation(2, "Y", "*"),)),
    ("WT", ()), ("", ()), ("_wt", ())])
def test_notations_parse_to_zero_based_substitutions(text, expected):
    assert parse_mutations(text) == expected


def test_first_position_shifts_the_numbering():
    assert parse_mutations("T2A", first_position=2) == (Mutation(0, "T", "A"),)
    assert parse_mutations("T2A", first_position=0) == (Mutation(2, "T", "A"),)
    with pytest.raises(ValueError, match=r"'T2A': position 2 in 'T2A' comes before the first "
                                         r"position 3"):
        parse_mutations("T2A", first_position=3)


@pytest.mark.parametrize("text,match", [
    ("T2", r"'T2': cannot read 'T2'; expected a residue, a position and a residue"),
    ("T2A:2G", r"cannot read '2G'"),
    ("p.Thx2Ala", r"'Thx' in 'Thx2Ala' is not a three-letter amino-acid name"),
    ("T2A:T2G", r"'T2A:T2G' mutates position 2 twice \(T2A and T2G\)"),
    ("T2O", None), ("T2-", r"cannot read 'T2-'"),
    ("p.", r"holds no mutation"),
    ("B2A", None)])
def test_bad_notations_name_the_text_and_the_part(text, match):
    if match is None:  # letters of the alphabet's ambiguity codes parse; applying decides
        assert parse_mutations(text)
        return
    with pytest.raises(ValueError, match=match):
        parse_mutations(text)


def test_letters_outside_the_alphabet_are_refused():
    with pytest.raises(ValueError, match=r"mutation 'A3U'.*'U' is not a DNA letter"):
        parse_mutations("A3U", alphabet=DNA)
    with pytest.raises(TypeError, match="as a string such as 'T2A'"):
        parse_mutations(["T2A"])


def test_applying_mutations_to_the_wild_type():
    assert apply_mutations(WILD_TYPE, "T2A:K4R") == "MAYRLILNGKTLKGETTTEA"
    assert apply_mutations(WILD_TYPE, "p.[Met1Ter]") == "*" + WILD_TYPE[1:]
    assert apply_mutations(WILD_TYPE, "WT") == WILD_TYPE
    assert apply_mutations(WILD_TYPE, (Mutation(19, "A", "G"),)) == WILD_TYPE[:-1] + "G"
    assert apply_mutations("ACGT", "C2T", alphabet=DNA) == "ATGT"
    assert apply_mutations(WILD_TYPE, "Y2A", first_position=0) == "MTAKLILNGKTLKGETTTEA"


def test_a_wrong_wild_type_residue_or_position_names_both():
    with pytest.raises(ValueError, match=r"'A2G': A2G expects 'A' at position 2, but the wild "
                                         r"type holds 'T' there \(check the numbering"):
        apply_mutations(WILD_TYPE, "A2G")
    with pytest.raises(ValueError, match=r"A21G is at position 21, but the wild type has "
                                         r"positions 1 .. 20"):
        apply_mutations(WILD_TYPE, "A21G")


def test_mutations_between_inverts_applying():
    variant = apply_mutations(WILD_TYPE, "K4R:T2A:E19*")
    assert mutations_between(WILD_TYPE, variant) == "T2A:K4R:E19*"
    assert apply_mutations(WILD_TYPE, mutations_between(WILD_TYPE, variant)) == variant
    assert mutations_between(WILD_TYPE, WILD_TYPE) == ""
    with pytest.raises(ValueError, match="the variant has 3 residues and the wild type 20"):
        mutations_between(WILD_TYPE, "MTY")
