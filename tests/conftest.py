"""Test-session setup shared by every test file."""
import os

import pytest
from numba.core import config

# Without an NVIDIA GPU, the CUDA kernels run under Numba's CUDA simulator so that a plain
# `pytest` checks them too. numba is already imported here (pytest's warning filters name one of
# its classes), so the setting goes to its config as well as to the environment; both must be
# set before numba.cuda is first imported.
if not os.path.exists("/dev/nvidia0") and "NUMBA_ENABLE_CUDASIM" not in os.environ:
    os.environ["NUMBA_ENABLE_CUDASIM"] = "1"
    config.ENABLE_CUDASIM = True


@pytest.fixture(autouse=True)
def machine_to_ourselves(monkeypatch):
    """CPU launches take the threads their work pays for, whatever else the test machine runs
    (kernels/cpu/threads.py otherwise leaves the cores other processes hold): a test covers
    the same serial and parallel paths on a busy machine as on an idle one."""
    from seqattn.kernels.cpu import threads

    monkeypatch.setattr(threads, "cores_in_use_elsewhere", lambda: 0.0)
