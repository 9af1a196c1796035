"""Single-mutant maps of measured or predicted variant values, and the scan that fills them."""
import numpy as np
import pytest
import xarray as xr

from seqattn.adapters.residue_maps import single_mutant_map
from seqattn.readers.alphabets import RNA
from seqattn.readers.mutations import single_mutants
from seqattn.readers.residues import from_mutations


def test_single_mutants_cover_every_other_residue_and_the_stop():
    scan = single_mutants("MK")
    assert len(scan) == 2 * 20 and scan[:2] == ["M1A", "M1C"] and scan[19] == "M1*"
    assert "M1M" not in scan and "K2*" in scan
    assert single_mutants("AC", alphabet=RNA, first_position=5) == [
        "A5C", "A5G", "A5U", "C6A", "C6G", "C6U"]


def test_the_map_places_each_single_mutant_and_the_wild_type():
    ds = from_mutations("MKV", ["WT", "K2A", "V3*", "K2A:V3L", "p.Met1Leu", "p.Lys2Ala"],
                        first_position=1)  # K2A measured twice, written two ways
    values = xr.DataArray([0.5, -1.0, -3.0, 9.0, 2.0, -2.0], dims="record",
                          coords={"mutations": ds["mutations"]}, name="score",
                          attrs={"units": "log enrichment"})
    out = single_mutant_map(values, "MKV")
    assert out.dims == ("position", "residue") and out.shape == (3, 21)
    assert out["position"].values.tolist() == [1, 2, 3]
    assert out["wild_type"].values.tolist() == list("MKV")
    assert out.sel(position=2, residue="A") == -1.5  # K2A measured twice: the mean
    assert out.sel(position=3, residue="*") == -3.0 and out.sel(position=1, residue="L") == 2.0
    assert [float(out.sel(position=p, residue=r)) for p, r in ((1, "M"), (2, "K"), (3, "V"))] \
        == [0.5] * 3  # the wild type's own value in its cells
    assert int(np.isfinite(out.values).sum()) == 6  # the double mutant is left out
    assert out.attrs["units"] == "log enrichment"


def test_a_variant_that_does_not_fit_the_map_is_named():
    values = xr.DataArray([1.0], dims="record", coords={"mutations": ("record", ["K2A"])})
    with pytest.raises(ValueError, match=r"variant 'K2A' has no cell in the map: the wild type "
                                         r"holds 'V' at position 2"):
        single_mutant_map(values, "MVK")
    with pytest.raises(ValueError, match="no coordinate 'mutations'"):
        single_mutant_map(values.drop_vars("mutations"), "MVK")
