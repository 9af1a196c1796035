"""The molecules page's whole path (copper clusters with EMT energies and forces) runs as the
page shows it."""
import numpy as np
import pytest

from page_blocks import GUIDE, run_block


def test_the_atoms_walkthrough_runs_as_written():
    pytest.importorskip("ase")
    namespace = run_block(GUIDE / "molecules.md", "## The whole path: copper clusters")
    out, ds = namespace["out"], namespace["ds"]
    assert out["energy"].dims == ("molecule",) and out["forces"].dims == ds["forces"].dims
    assert np.isfinite(out["forces"]).all()
