"""A barrier for Numba's CUDA simulator that waits instead of polling.

The simulator runs each thread of a block as a Python thread. Its ``syncthreads`` lets a thread
wait on an event of its own, and the launching thread spins in a loop over every thread of the
block until all the live ones wait, then sets their events. That loop competes for the GIL with
the threads it waits for, and the attention kernels (whose warp shuffles are two barriers each
on the simulator, kernels/cuda/compile_target.py) spend most of a test there.

:func:`install` replaces the two methods with a condition variable: the last live thread to
reach a barrier releases the others, a thread that ends counts as having left the block (as the
simulator counts only live threads), and the launching thread joins the block's threads. What a
kernel computes is unchanged: the same threads run the same code between the same barriers, and
an exception in any thread stops the block and reaches the launch, as in the simulator.
"""
import threading

import numpy as np
from numba.cuda.simulator import kernel as simulator

# What a thread stopped by another thread's error raises (the simulator's words).
_ABORTED_AT_CALL = "abort flag set on syncthreads call"
_ABORTED_WHILE_WAITING = "abort flag set on syncthreads clear"


class _Block:
    """The barrier state shared by the threads of one block."""

    def __init__(self, threads):
        self.condition = threading.Condition()
        self.live = threads
        self.waiting = 0
        self.generation = 0
        self.aborted = False

    def release_if_complete(self):
        """Open the barrier when every live thread waits at it (holding the condition)."""
        if self.waiting and self.waiting == self.live:
            self.waiting = 0
            self.generation += 1
            self.condition.notify_all()


def _syncthreads(thread):
    block = thread.block
    with block.condition:
        if block.aborted:
            raise RuntimeError(_ABORTED_AT_CALL)
        block.waiting += 1
        generation = block.generation
        block.release_if_complete()
        while block.generation == generation and not block.aborted:
            block.condition.wait()
        if block.aborted:
            raise RuntimeError(_ABORTED_WHILE_WAITING)


def _run_thread(thread):
    block = thread.block
    try:
        threading.Thread.run(thread)
    except Exception as error:
        where = f"tid={list(thread.threadIdx)} ctaid={list(thread.blockIdx)}"
        thread.exception = (type(error)(f"{where}: {error}" if str(error) else where),
                            error.__traceback__)
        with block.condition:
            block.aborted = True
            block.condition.notify_all()
    finally:
        with block.condition:
            block.live -= 1
            block.release_if_complete()


def _run_block(manager, grid_point, *args):
    shape = manager._block_dim
    block = _Block(int(np.prod(shape)))
    threads = []
    for block_point in np.ndindex(*shape):
        thread = simulator.BlockThread(lambda: manager._f(*args), manager, grid_point,
                                       block_point, manager._debug)
        thread.block = block
        threads.append(thread)
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    # The first thread that failed, not a thread stopped by its abort.
    errors = [t.exception for t in threads if t.exception]
    failed = [e for e in errors if not str(e[0]).endswith(
        (_ABORTED_AT_CALL, _ABORTED_WHILE_WAITING))] or errors
    if failed:
        raise failed[0][0].with_traceback(failed[0][1])


def install():
    """Use the waiting barrier in this process's simulator."""
    simulator.BlockThread.run = _run_thread
    simulator.BlockThread.syncthreads = _syncthreads
    simulator.BlockManager.run = _run_block
