"""A training run killed at every point where a crash changes what is on disk (inside each
file write of a checkpoint, between its renames, before each optimizer step), then resumed,
ends with files bit for bit those of a run never interrupted: a checkpoint is committed whole
or not at all, and resuming starts from the last one committed. The run and its kill points
are in checkpoint_crash_run.py; each kill is a subprocess that dies with ``os._exit``."""
import os
import subprocess
import sys
from pathlib import Path

from checkpoint_crash_run import KILLED

SCRIPT = Path(__file__).with_name("checkpoint_crash_run.py")


def _run(folder, kill_at=None):
    """The labels the run passed, and its exit status."""
    command = [sys.executable, str(SCRIPT), str(folder)] + ([kill_at] if kill_at else [])
    env = {**os.environ, "NUMBA_NUM_THREADS": "1"}
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode in (0, KILLED), done.stderr[-3000:]
    return done.stdout.split(), done.returncode


def _files(folder):
    return {p.relative_to(folder): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file()}


def test_a_run_killed_at_every_write_and_step_ends_as_an_uninterrupted_one(tmp_path):
    labels, status = _run(tmp_path / "reference")
    assert status == 0
    kinds = {label.split(":")[1] for label in labels}
    assert kinds == {"write", "rename", "rmtree", "step"}, labels
    crashed = tmp_path / "crashed"
    for label in labels:
        passed, status = _run(crashed, label)
        assert status == KILLED and passed[-1] == label, (label, passed)
    _, status = _run(crashed)
    assert status == 0
    reference = _files(tmp_path / "reference")
    assert _files(crashed) == reference and len(reference) == 5
    assert sorted(p.name for p in tmp_path.iterdir()) == ["crashed", "reference"]
