"""The CUDA simulator as the tests run it (``conftest.py``): what its kernels rely on.

Every thread of a block must get the same shared array, even when a thread is preempted while
the simulator creates it (``simulator_shared_arrays``): here np.empty sleeps, which gives the
other threads the time a loaded machine gives them.
"""
import time

import numpy as np
import pytest
from numba.core import config

if not config.ENABLE_CUDASIM:
    pytest.skip("about Numba's CUDA simulator (NUMBA_ENABLE_CUDASIM=1)", allow_module_level=True)

from numba import cuda  # noqa: E402

THREADS = 32


@cuda.jit
def rotate_through_shared(out):
    """out[t] = t + 1 (mod THREADS), read from the element thread t + 1 wrote."""
    shared = cuda.shared.array(THREADS, np.float64)
    t = cuda.threadIdx.x
    shared[t] = t
    cuda.syncthreads()
    out[t] = shared[(t + 1) % THREADS]


def test_threads_of_a_block_share_one_array_when_creation_is_preempted(monkeypatch):
    allocate = np.empty

    def preempted_empty(*args, **kwargs):
        time.sleep(0.002)  # releases the GIL: the other threads run on
        return allocate(*args, **kwargs)

    monkeypatch.setattr(np, "empty", preempted_empty)
    out = np.full(THREADS, -1.0)
    rotate_through_shared[1, THREADS](out)
    expected = (np.arange(THREADS) + 1) % THREADS
    apart = np.flatnonzero(out != expected)
    assert apart.size == 0, f"threads {apart.tolist()} read a shared array of their own"
