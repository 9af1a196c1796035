"""The DNA readers (seqattn.readers): FASTA (plain, gzip, Windows line ends, empty records),
region headers as coordinates, DataArrays of letters or codes, pyfaidx, and the errors bad input
gets."""
import gzip

import numpy as np
import pytest
import xarray as xr

from seqattn import readers
from seqattn.adapters import GenomeAdapter, genome
from seqattn.readers import (from_dataarray, from_faidx, from_sequences, open_fasta, read_fasta,
                             to_strings)

FASTA = ">chr1:100-108 first peak\nACGT\nacgN\n\n>plain\r\nGGCC\r\nTA\r\n"


def write(tmp_path, text, name="x.fa", compress=False):
    path = tmp_path / name
    if compress:
        with gzip.open(path, "wt", newline="") as f:
            f.write(text)
    else:
        path.write_bytes(text.encode())
    return path


@pytest.mark.parametrize("compress", [False, True])
def test_fasta_records_with_windows_line_ends_and_gzip(tmp_path, compress):
    path = write(tmp_path, FASTA, "x.fa.gz" if compress else "x.fa", compress)
    records = list(read_fasta(path))
    assert [(r.name, r.description, r.sequence) for r in records] == [
        ("chr1:100-108", "chr1:100-108 first peak", "ACGTacgN"), ("plain", "plain", "GGCCTA")]
    ds = open_fasta(path)
    assert to_strings(ds) == {"chr1:100-108": "ACGTacgN", "plain": "GGCCTA"}


def test_region_headers_become_coordinates(tmp_path):
    ds = open_fasta(write(tmp_path, FASTA))
    assert ds["chrom"].values.tolist() == ["chr1", ""]
    np.testing.assert_array_equal(ds["start"].values, [100, np.nan])
    np.testing.assert_array_equal(ds["genomic_position"].values[0], np.arange(100, 108))
    assert np.isnan(ds["genomic_position"].values[1]).all()


@pytest.mark.parametrize("name,start,strand", [("chr2:11-20", 10, "."),  # 1-based inclusive
                                               ("chr2:10-20(-)", 10, "-"),  # 0-based, strand
                                               ("chr2:1,000-1,010", 1000, ".")])
def test_region_conventions_told_apart_by_length(name, start, strand):
    ds = from_sequences({name: "A" * 10})
    assert (ds["chrom"].values[0], ds["start"].values[0], ds["strand"].values[0]) == (
        "chr2", start, strand)


def test_region_of_the_wrong_length_is_an_error_naming_the_record():
    with pytest.raises(ValueError, match=r"record 'chr1:0-50'.*holds 10 bases"):
        from_sequences({"chr1:0-50": "A" * 10})


def test_empty_record_is_an_error_naming_it_or_skipped(tmp_path):
    path = write(tmp_path, ">a\nACGT\n>empty one\n>c\nGG\n")
    with pytest.raises(ValueError, match=r"record 'empty' is an empty sequence"):
        open_fasta(path)
    assert list(to_strings(open_fasta(path, empty="skip"))) == ["a", "c"]


def test_sequence_before_a_header_is_an_error(tmp_path):
    with pytest.raises(ValueError, match="line 1 holds sequence before the first '>'"):
        open_fasta(write(tmp_path, "ACGT\n>a\nAC\n"))


@pytest.mark.parametrize("text,match", [(">a\nACGT\n>b\nACXT\n", r"record 'b', position 2.*'X'"),
                                        (">a\nAC-T\n", r"record 'a', position 2.*'-'"),
                                        (">a\nACGé\n", r"record 'a', position 3")])
def test_invalid_characters_name_record_and_position(tmp_path, text, match):
    with pytest.raises(ValueError, match=match):
        open_fasta(write(tmp_path, text))


def test_empty_string_and_repeated_names_are_errors():
    with pytest.raises(ValueError, match=r"record 'seq1' is an empty sequence"):
        from_sequences(["ACGT", ""])
    with pytest.raises(ValueError, match=r"'x' appears twice"):
        from_sequences([("x", "AC"), ("x", "GT")])


def test_dataarray_of_letters_and_of_codes_give_the_same_tokens():
    letters = xr.DataArray(list("ACGTNa"), dims="position", name="read",
                           coords={"position": np.arange(6) + 500})
    codes = xr.DataArray(np.array([0, 1, 2, 3, 4, 16], np.uint8), dims="position", name="read")
    adapter = GenomeAdapter(tokens="ids")
    a = adapter.fit(from_dataarray(letters)).encode(from_dataarray(letters))
    b = adapter.encode(from_dataarray(codes))
    np.testing.assert_array_equal(a.tokens, b.tokens)
    assert a.tokens[0].tolist() == [0, 1, 2, 3, 4, 0]
    np.testing.assert_array_equal(a.coords["position"][0], np.arange(6) + 500)
    assert to_strings(from_dataarray(letters)) == {"read": "ACGTNa"}


def test_dataarray_with_an_invalid_element_names_record_and_position():
    da = xr.DataArray([list("ACGT"), list("AZGT")], dims=("sample", "position"),
                      coords={"sample": ["s1", "s2"]})
    with pytest.raises(ValueError, match=r"sample 's2', position 1: 'Z'"):
        from_dataarray(da)
    bad_codes = xr.DataArray(np.array([[0, 1, 99]], np.uint8), dims=("record", "position"))
    with pytest.raises(ValueError, match=r"position 2: 99"):
        from_dataarray(bad_codes)


def test_pyfaidx_regions(tmp_path):
    pytest.importorskip("pyfaidx")
    path = write(tmp_path, ">chr1\nACGTACGTAC\nGGGGCCCC\n")
    ds = from_faidx(path, [("chr1", 2, 6), ("chr1", 8, 14)])
    assert to_strings(ds) == {"chr1:2-6": "GTAC", "chr1:8-14": "ACGGGG"}
    assert ds["start"].values.tolist() == [2, 8]


def test_the_old_genome_paths_still_read():
    assert genome.open_fasta is readers.open_fasta and genome.from_sequences is from_sequences
    assert genome.read_fasta is readers.read_fasta and genome.to_strings is to_strings
