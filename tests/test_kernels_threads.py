"""Small CPU launches run serial, large ones parallel (seqattn/kernels/cpu/threads.py): the
thread count by size, the two compiled versions kept apart in Numba's disk cache, and every op
correct on both sides of its kernels' grains (the shared op table runs its tiny shapes serial;
here every kernel is made to run parallel on the same inputs)."""
import importlib
import pkgutil

import numba
import numpy as np
import pytest
from numba import prange

import seqattn.kernels.cpu
from op_cases import CASES
from ops_checks import check_backward, check_forward
from seqattn.kernels.cpu.threads import SizedKernel, sized_kernel

GRAIN = 8


@sized_kernel(GRAIN)
def _double(out, x):
    for i in prange(x.size):
        out[i] = 2 * x[i]


def _sized_kernels():
    kernels = []
    for info in pkgutil.iter_modules(seqattn.kernels.cpu.__path__):
        module = importlib.import_module(f"seqattn.kernels.cpu.{info.name}")
        kernels += [k for k in vars(module).values() if isinstance(k, SizedKernel)]
    return kernels


@pytest.fixture
def parallel_everywhere(monkeypatch):
    """Every CPU kernel takes all threads for any launch of two or more units of work."""
    if numba.get_num_threads() < 2:
        pytest.skip("needs two Numba threads")
    for kernel in _sized_kernels():
        monkeypatch.setattr(kernel, "grain", 1)


def test_threads_follow_the_work():
    threads = numba.get_num_threads()
    assert _double.threads(0) == 1
    assert _double.threads(2 * GRAIN - 1) == 1
    assert _double.threads(2 * GRAIN) == min(2, threads)
    assert _double.threads(10**12) == threads


def test_launch_runs_serial_below_two_grains_and_parallel_from_there():
    if numba.get_num_threads() < 2:
        pytest.skip("needs two Numba threads")
    # A fresh kernel, so that no earlier test compiled either version.
    kernel = SizedKernel(_double.parallel.py_func, GRAIN, _double.work, {})
    small = np.arange(2 * GRAIN - 1, dtype=np.float64)
    out = np.empty_like(small)
    kernel(out, small)
    np.testing.assert_array_equal(out, 2 * small)
    assert kernel.serial.signatures and not kernel.parallel.signatures
    large = np.arange(2 * GRAIN, dtype=np.float64)
    out = np.empty_like(large)
    kernel(out, large)
    np.testing.assert_array_equal(out, 2 * large)
    assert kernel.parallel.signatures
    assert numba.get_num_threads() >= 2, "the launch must leave Numba's thread count as it was"


def test_serial_and_parallel_versions_have_their_own_cache_files():
    """Numba keys its disk cache by function name and bytecode, not by the parallel flag: with
    one name, a process would load the other version's machine code."""
    kernels = _sized_kernels()
    assert len(kernels) > 30
    for kernel in kernels:
        serial = kernel.serial._cache._cache_file._index_name
        parallel = kernel.parallel._cache._cache_file._index_name
        assert serial != parallel, kernel.parallel.py_func.__qualname__


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c.family}-{c.name}")
def test_op_table_in_parallel(case, parallel_everywhere):
    check_forward(case)
    if case.backward:
        check_backward(case)
