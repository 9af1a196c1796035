"""The model-of-your-own block runs as the page shows it: a layer used twice, arithmetic
between layers, and every parameter receives a gradient."""
import numpy as np

from page_blocks import GUIDE, run_block


def test_a_model_of_ones_own_runs_as_written():
    namespace = run_block(GUIDE / "own_model.md", "# A model of your own")
    assert namespace["dx"].shape == (2, 10, 3) and np.abs(namespace["dx"]).sum() > 0
    assert all(np.abs(p.grad).sum() > 0 for p in namespace["model"].parameters())
