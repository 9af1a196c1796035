"""A training run killed at every point where a crash changes what is on disk (inside each
file write of a checkpoint, between its renames, before each optimizer step) and at random
moments (SIGKILL), then resumed, ends with files bit for bit those of a run never interrupted:
a checkpoint is committed whole or not at all, and resuming starts from the last one committed.
The run and its kill points are in checkpoint_crash_run.py; each planned kill is a subprocess
that dies with ``os._exit`` there."""
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from checkpoint_crash_run import KILLED

SCRIPT = Path(__file__).with_name("checkpoint_crash_run.py")


def _command(folder, kill_at=None):
    return [sys.executable, str(SCRIPT), str(folder)] + ([kill_at] if kill_at else [])


ENV = {**os.environ, "NUMBA_NUM_THREADS": "1"}


def _run(folder, kill_at=None):
    """The labels the run passed, and its exit status."""
    done = subprocess.run(_command(folder, kill_at), capture_output=True, text=True, env=ENV,
                          timeout=600)
    assert done.returncode in (0, KILLED), done.stderr[-3000:]
    return done.stdout.split(), done.returncode


def _kill_after_a_label(folder, rng):
    """Start the run and SIGKILL it a random moment after it passed its first label, wherever
    it is then (a step, a write, a rename); or let it end."""
    run = subprocess.Popen(_command(folder), stdout=subprocess.PIPE, text=True, env=ENV)
    run.stdout.readline()
    time.sleep(rng.uniform(0.0, 0.3))
    run.kill()
    run.communicate()
    assert run.returncode in (0, -signal.SIGKILL)


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
    rng = np.random.default_rng(0)
    for _ in range(3):
        _kill_after_a_label(tmp_path / "killed", rng)
    assert _run(tmp_path / "killed")[1] == 0
    assert _files(tmp_path / "killed") == reference
    assert sorted(p.name for p in tmp_path.iterdir()) == ["crashed", "killed", "reference"]
