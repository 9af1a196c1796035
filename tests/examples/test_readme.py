"""The README's two walkthroughs run as written: the notebook path (on a small generated grid
standing in for the reader's Dataset) and the model of one's own."""
import re
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

README = (Path(__file__).parent.parent.parent / "README.md").read_text()


def _block(after_heading):
    section = README[README.index(after_heading):]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def _temperature_grid():
    rng = np.random.default_rng(0)
    time = np.datetime64("2020-01-01T00") + np.arange(56) * np.timedelta64(6, "h")
    lat, lon = np.linspace(60, -60, 8), np.arange(8) * 45.0
    t2m = 280 + 10 * np.cos(np.deg2rad(lat))[None, :, None] + rng.normal(size=(56, 8, 8))
    return xr.Dataset({"t2m": (("time", "lat", "lon"), t2m.astype(np.float32), {"units": "K"})},
                      coords={"time": time, "lat": lat, "lon": lon})


def test_the_notebook_path_runs_as_written(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    namespace = {"ds": _temperature_grid()}
    exec(_block("### From a Dataset to predictions"), namespace)
    forecast = namespace["forecast"]
    assert forecast["t2m"].dims == ("lead", "time", "lat", "lon")
    assert forecast["t2m"].attrs["units"] == "K"
    assert float(forecast["t2m"].mean()) == pytest.approx(285, abs=5)
    assert forecast["t2m"].sel(time=namespace["train"]).isnull().all()   # only valid times
    again = namespace["seqattn"].predict(namespace["model"], namespace["ds"],
                                         namespace["windows"], where=namespace["valid"])
    xr.testing.assert_identical(again, forecast)


def test_a_model_of_ones_own_runs_as_written():
    namespace = {}
    exec(_block("### A model of your own"), namespace)
    assert namespace["dx"].shape == (2, 10, 3) and np.abs(namespace["dx"]).sum() > 0
    assert all(np.abs(p.grad).sum() > 0 for p in namespace["model"].parameters())


def test_the_atoms_walkthrough_runs_as_written():
    pytest.importorskip("ase")
    namespace = {}
    exec(_block("### Atoms and graphs"), namespace)
    out, ds = namespace["out"], namespace["ds"]
    assert out["energy"].dims == ("molecule",) and out["forces"].dims == ds["forces"].dims
    assert np.isfinite(out["forces"]).all()


def test_the_graph_walkthrough_runs_as_written():
    pytest.importorskip("networkx")
    block = _block("```python\nimport networkx")  # the second block of that section
    namespace = {}
    exec(block, namespace)
    out = namespace["out"]
    assert out["club"].dims == ("node",) and out["club_probability"].shape == (34, 2)
    assert set(out["club"].values) <= {"Mr. Hi", "Officer"}
