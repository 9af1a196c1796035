"""The CUDA simulator as the tests run it (``conftest.py``): what its kernels rely on.

Every thread of a block must get the same shared array, even when a thread is preempted while
the simulator creates it (``simulator_shared_arrays``): here np.empty sleeps, which gives the
other threads the time a loaded machine gives them. A launch waits for its threads without
asking after them thousands of times (``simulator_polling``).
"""
import threading
import time

import numpy as np
import pytest
from numba.core import config

if not config.ENABLE_CUDASIM:
    pytest.skip("about Numba's CUDA simulator (NUMBA_ENABLE_CUDASIM=1)", allow_module_level=True)

from numba import cuda  # noqa: E402
from numba.cuda.simulator import kernel as simulator_kernel  # noqa: E402

import simulator_polling  # noqa: E402

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


@cuda.jit
def one_thread_works(out):
    """Thread 0 sums 0..WORK-1 while the others wait for it at syncthreads; all write it."""
    shared = cuda.shared.array(1, np.float64)
    t = cuda.threadIdx.x
    if t == 0:
        total = 0.0
        for i in range(WORK):
            total += i
        shared[0] = total
    cuda.syncthreads()
    out[t] = shared[0]


WORK = 1_000_000
FEW_QUESTIONS = 16 * THREADS


def _questions_asked(monkeypatch, is_alive):
    """How many times a launch of one_thread_works asks a thread whether it is alive, with the
    question answered by ``is_alive``, and whether every thread wrote the sum."""
    asked = [0]

    def counted(thread):
        asked[0] += 1
        return threading.Thread.is_alive(thread)

    monkeypatch.setattr(simulator_polling, "_is_alive", counted)
    monkeypatch.setattr(simulator_kernel.BlockThread, "is_alive", is_alive)
    out = np.zeros(THREADS)
    one_thread_works[1, THREADS](out)
    return asked[0], bool(np.all(out == WORK * (WORK - 1) / 2))


def test_a_launch_waits_for_its_threads_without_busy_polling(monkeypatch):
    assert simulator_kernel.BlockThread.is_alive is simulator_polling._is_alive_after_yielding
    asked, right = _questions_asked(monkeypatch, simulator_polling._is_alive_after_yielding)
    assert right
    assert asked <= FEW_QUESTIONS, f"{asked} questions while one thread worked"
    # The control: the same count through the simulator's own polling (no yield) is far larger,
    # so the bound above can fail.
    busy, right = _questions_asked(monkeypatch, lambda thread: simulator_polling._is_alive(thread))
    assert right and busy > FEW_QUESTIONS
