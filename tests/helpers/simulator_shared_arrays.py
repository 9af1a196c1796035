"""One shared array per block and declaring line under Numba's CUDA simulator, whatever the
thread scheduling.

The simulator runs each thread of a block as a Python thread and hands out shared arrays from a
dict keyed by the line that declares them: look the line up, and if it has no array yet, make
one and store it. Two threads that both look the line up before either stores (one preempted
between the two steps, which a loaded machine does) get two different arrays; each then sees
only its own writes, and the other threads' part of every tile is whatever np.empty left there.
That made rare, unreproducible wrong gradients in the attention backward (a full suite on a
machine loaded to 13: dk of fully padded keys 0.04 instead of 0). Here the look-up and the store
happen under one lock. ``tests/kernels/test_cuda_simulator.py`` pins it.
"""
import sys
import threading

import numpy as np
from numba.core import types
from numba.np import numpy_support

_creation = threading.Lock()


def serialise_shared_array_creation():
    """Replace the simulator's ``cuda.shared.array`` by one whose look-up-or-create is atomic
    (static shared arrays; dynamic ones, shape 0, are one buffer per launch already)."""
    from numba.cuda.simulator import kernelapi

    shipped = kernelapi.FakeCUDAShared.array

    def array(self, shape, dtype, alignment=None):
        if shape == 0:
            return shipped(self, shape, dtype, alignment)
        if alignment is not None:
            raise RuntimeError("Array alignment is not supported in cudasim")
        declared_at = sys._getframe(1)
        line = (declared_at.f_code.co_filename, declared_at.f_lineno)
        with _creation:
            shared = self._allocations.get(line)
            if shared is None:
                if isinstance(dtype, types.Type):
                    dtype = numpy_support.as_dtype(dtype)
                shared = self._allocations[line] = np.empty(shape, dtype)
        return shared

    kernelapi.FakeCUDAShared.array = array
