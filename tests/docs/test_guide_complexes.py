"""The molecules page's protein-ligand block runs as the page shows it, on a receptor (a small
peptide) and four ligand poses that the test writes with RDKit."""
import numpy as np

from complex_helpers import write_receptor_and_poses
from page_blocks import GUIDE, run_block


def test_the_complex_block_runs_as_written(tmp_path, monkeypatch):
    smiles = ["CCO", "CC(=O)N", "c1ccccc1O", "CCN"]
    write_receptor_and_poses(tmp_path, "GSAKD", [(s, (i, 0, 0)) for i, s in enumerate(smiles)])
    monkeypatch.chdir(tmp_path)
    namespace = {"pk": np.array([6.0, 7.5, 5.2, 6.8], np.float32),
                 "train": np.array([True, True, True, False])}
    run_block(GUIDE / "molecules.md", "## Protein-ligand complexes", namespace)
    out, atoms, ds = namespace["out"], namespace["atoms"], namespace["ds"]
    assert out["affinity"].dims == ("complex",) and out.sizes["complex"] == 4
    assert np.isfinite(out["affinity"]).all()
    assert atoms.dims == ("complex", "ligand_atom")
    mean = namespace["adapter"].target_scale["mean"]
    np.testing.assert_allclose(atoms.sum("ligand_atom") + mean, out["affinity"], rtol=1e-5,
                               atol=1e-5)
