"""The CUDA simulator as the tests run it (``conftest.py``): what its kernels rely on.

Every thread of a block must get the same shared array, even when a thread is preempted while
the simulator creates it (``simulator_shared_arrays``): here np.empty sleeps, which gives the
other threads the time a loaded machine gives them.

``syncthreads`` is a barrier of the block's live threads (``simulator_barrier``, which waits
where the simulator polled): a thread that has returned no longer holds the others, no thread
passes a barrier before every live one has reached it, and an error in one thread stops the
block and reaches the launch.
"""
import threading
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


@cuda.jit
def tree_sum(values, out, rounds):
    """out[r] = the sum of values, by a tree reduction in shared memory, ``rounds`` times over:
    a thread that passed a barrier early would read a partial sum."""
    shared = cuda.shared.array(THREADS, np.float64)
    t = cuda.threadIdx.x
    for r in range(rounds):
        shared[t] = values[t] * (r + 1)
        cuda.syncthreads()
        stride = THREADS // 2
        while stride:
            if t < stride:
                shared[t] += shared[t + stride]
            cuda.syncthreads()
            stride //= 2
        if t == 0:
            out[r] = shared[0]
        cuda.syncthreads()


def test_no_thread_passes_a_barrier_before_every_thread_reaches_it():
    values = np.arange(THREADS, dtype=np.float64) ** 2
    out = np.zeros(6)
    tree_sum[1, THREADS](values, out, out.size)
    assert np.array_equal(out, values.sum() * np.arange(1, out.size + 1))


@cuda.jit
def half_the_block_returns(out):
    """The upper half returns at once; the lower half passes two barriers without it."""
    shared = cuda.shared.array(THREADS, np.float64)
    t = cuda.threadIdx.x
    if t >= THREADS // 2:
        return
    shared[t] = t
    cuda.syncthreads()
    out[t] = shared[THREADS // 2 - 1 - t]
    cuda.syncthreads()


def test_a_thread_that_returned_holds_no_barrier():
    out = np.full(THREADS, -1.0)
    # In a thread of its own, so that a barrier waiting for the returned threads fails the
    # test instead of hanging it.
    launch = threading.Thread(target=half_the_block_returns[2, THREADS], args=(out,),
                              daemon=True)
    launch.start()
    launch.join(timeout=60)
    assert not launch.is_alive(), "the block waited at a barrier for threads that returned"
    half = THREADS // 2
    assert np.array_equal(out[:half], np.arange(half)[::-1])
    assert np.all(out[half:] == -1.0)


@cuda.jit
def one_thread_reads_out_of_bounds(values, out):
    t = cuda.threadIdx.x
    cuda.syncthreads()
    out[t] = values[t + 1000 * (t == 5)]
    cuda.syncthreads()


def test_an_error_in_one_thread_stops_the_block_and_names_the_thread():
    values, out = np.ones(THREADS), np.zeros(THREADS)
    with pytest.raises(IndexError, match=r"tid=\[5, 0, 0\] ctaid=\[0, 0, 0\]"):
        one_thread_reads_out_of_bounds[1, THREADS](values, out)


@cuda.jit
def count_the_odd_threads(out):
    t = cuda.threadIdx.x
    out[t] = cuda.syncthreads_count(t % 2)


def test_syncthreads_count_counts_every_thread():
    out = np.zeros(THREADS, np.int64)
    count_the_odd_threads[1, THREADS](out)
    assert np.all(out == THREADS // 2)
