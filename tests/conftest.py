"""Test-session setup shared by every test file."""
import os
import sys
from pathlib import Path

from numba.core import config

# Shared test helpers (references, case tables, data makers) live in tests/helpers/; the test
# folders mirror the package and import them by name.
sys.path.insert(0, str(Path(__file__).resolve().parent / "helpers"))

# Without an NVIDIA GPU, the CUDA kernels run under Numba's CUDA simulator so that a plain
# `pytest` checks them too. numba is already imported here (pytest's warning filters name one of
# its classes), so the setting goes to its config as well as to the environment; both must be
# set before numba.cuda is first imported.
# A session compiles thousands of kernels in each of its workers: a compile helper per worker
# (seqattn.compile) would compete with them for the cores and run on after the session. The tests
# of the helper switch it on for their own subprocesses (tests/kernels/test_first_run.py).
os.environ.setdefault("SEQATTN_COMPILE_HELPER", "0")

if not os.path.exists("/dev/nvidia0") and "NUMBA_ENABLE_CUDASIM" not in os.environ:
    os.environ["NUMBA_ENABLE_CUDASIM"] = "1"
    config.ENABLE_CUDASIM = True

if config.ENABLE_CUDASIM:
    import simulator_setup

    simulator_setup.prepare()


def pytest_configure(config):
    """pytest-xdist's ``--dist loadfile`` hands out the files with the most tests first, which
    leaves the few-test files that take minutes (the CUDA compiler's census, the examples) to
    the end of the session, one worker busy and the other idle: keep the order below instead."""
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False


def pytest_collection_modifyitems(session, config, items):
    """The files with a test marked ``slow`` first, in collection order (each file's tests in
    theirs), then the rest: the workers start on the long files and end on short ones."""
    slow_files = {item.path for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.path not in slow_files)
