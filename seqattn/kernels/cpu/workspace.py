"""Scratch arrays that the CPU kernels keep from one call to the next, one set per Python thread.

Memory fresh from the operating system costs a page fault per page at its first touch, where
Linux zeroes the page: on an Intel Xeon (Sapphire Rapids class) that took longer than the whole
split of an array into bf16 terms once its memory had been touched. The AMX attention path
splits q, k, v (and dout) into new bf16x3 arrays on every call, so its forward ran markedly
faster with reused arrays than with fresh ones (``benchmarks/attention.py``; BENCHMARKS.md,
"Scratch buffers"). NumPy's own allocations do not help: five such
arrays alive together are given back to the system when they are freed, and faulted in again
by the next call.

:func:`scratch` hands out the same memory to each call that asks for a buffer of the same name
and at most the size held: a thread keeps the largest buffer it has needed under each name
until :func:`release_scratch`. Callers must not keep a scratch array past their own call, nor
ask for one name twice while the first array is in use. Separate Python threads get separate
buffers, so concurrent calls from threads are safe.

What stays held is the largest size each name has needed: on an AMX CPU, after a float32
attention forward and backward at B 1 H 8 N 16384 D 128, the bf16x3 operands of q and dout as
rows and transposed, and the workers' key blocks, 6 times the memory of q (387 MiB).
``seqattn.release_scratch()`` gives it back.
"""
import threading

import numpy as np

from .gemm.bf16x3_gemm import aligned_empty

_held = threading.local()


def scratch(name, shape, dtype):
    """An uninitialised C-contiguous array of ``shape`` and ``dtype`` on a 64-byte boundary,
    the held buffer ``name`` of this thread when it is large enough."""
    dtype = np.dtype(dtype)
    size = int(np.prod(shape))
    buffers = _buffers()
    held = buffers.get(name)
    if held is None or held.dtype != dtype or held.size < size:
        held = aligned_empty(size, dtype)
        buffers[name] = held
    return held[:size].reshape(shape)


def release_scratch():
    """Free the scratch buffers that this thread holds (the next call allocates them again)."""
    _buffers().clear()


def held_bytes():
    """Bytes of scratch memory that this thread holds."""
    return sum(buffer.nbytes for buffer in _buffers().values())


def _buffers():
    if not hasattr(_held, "buffers"):
        _held.buffers = {}
    return _held.buffers
