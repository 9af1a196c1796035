"""Numba's CUDA simulator without its busy wait.

The simulator runs each thread of a block as a Python thread and watches them from the thread
that launched the kernel, in a loop that asks each live thread whether it is alive until none
is. The loop never blocks: it keeps the GIL for whole switch intervals while the threads it
watches wait for it, so most of a simulated launch went to the loop rather than to the kernel
(cProfile of ``tests/helpers/cuda_kernel_census.py``: BENCHMARKS.md, "Tests under the CUDA
simulator"). Here each of its questions first lets a thread that wants the GIL take it
(``time.sleep(0)``): the threads, their order at every ``syncthreads`` and what they compute are
unchanged; the loop asks far fewer times while they run.
"""
import threading
import time

_is_alive = threading.Thread.is_alive


def _is_alive_after_yielding(thread):
    time.sleep(0)
    return _is_alive(thread)


def yield_while_polling():
    """Make the simulator's block threads answer ``is_alive`` after a yield of the GIL. Call
    once numba.cuda is the simulator (``NUMBA_ENABLE_CUDASIM=1``)."""
    from numba.cuda.simulator import kernel

    kernel.BlockThread.is_alive = _is_alive_after_yielding
