"""The graphs page's whole path (the karate club, half of its members labelled) runs as the
page shows it."""
import pytest

from page_blocks import GUIDE, run_block


def test_the_graph_walkthrough_runs_as_written():
    pytest.importorskip("networkx")
    out = run_block(GUIDE / "graphs.md", "## The whole path")["out"]
    assert out["club"].dims == ("node",) and out["club_probability"].shape == (34, 2)
    assert set(out["club"].values) <= {"Mr. Hi", "Officer"}
