"""Which device an array lives on, and the one place where ops pick CPU or CUDA kernels.

A NumPy array runs on the CPU; a numba.cuda device array (or anything with
``__cuda_array_interface__``) runs on the GPU. Layers never branch on the device themselves:
they call ``seqattn.ops``, which asks :func:`backend_of` for the kernel module.
"""
import functools
import importlib

import numpy as np

from .host_memory import HOST_POOL

CPU = "cpu"
CUDA = "cuda"


def is_device_array(x):
    """True for GPU arrays (numba.cuda device arrays, the CUDA simulator's, cupy, torch.cuda)."""
    # The simulator's FakeCUDAArray has no __cuda_array_interface__, only the __cuda_ndarray__ flag.
    return hasattr(x, "__cuda_array_interface__") or getattr(x, "__cuda_ndarray__", False)


def device_of(x):
    """"cuda" for a GPU array, "cpu" for anything NumPy can hold."""
    return CUDA if is_device_array(x) else CPU


def backend_of(**arrays):
    """The device shared by all named arrays (None values are skipped).

    Raises a ValueError naming the arrays when host and device arrays are mixed, because a silent
    copy would hide a slow path from the user.
    """
    devices = {name: device_of(a) for name, a in arrays.items() if a is not None}
    found = set(devices.values())
    if len(found) > 1:
        on_gpu = sorted(n for n, d in devices.items() if d == CUDA)
        on_cpu = sorted(n for n, d in devices.items() if d == CPU)
        raise ValueError(
            f"arrays are on different devices: {', '.join(on_gpu)} on the GPU but "
            f"{', '.join(on_cpu)} on the CPU; move them together first "
            "(numba.cuda.to_device(x) or x.copy_to_host())"
        )
    return found.pop() if found else CPU


# (device, family) -> kernel module: every op launch asks, so the answer is kept
_KERNEL_MODULES = {}


def kernels_for(device, family):
    """The kernel module ``seqattn.kernels.<device>.<family>``, imported on first use.

    Importing lazily keeps ``import seqattn`` free of CUDA initialisation on machines without a GPU.
    """
    if device == CUDA:  # numba-cuda announces its compilations through its own events
        from numba.cuda.core import event

        from .first_run import watch_compilation

        watch_compilation(event)
    module = _KERNEL_MODULES.get((device, family))
    if module is None:
        module = importlib.import_module(f"seqattn.kernels.{device}.{family}")
        _KERNEL_MODULES[device, family] = module
    return module


def empty_like_on(device, shape, dtype):
    """An uninitialised array on ``device``.

    On the GPU it comes from numba's memory manager: seqattn's caching pool once
    :func:`use_memory_pool` is on, so that repeated shapes (a training step) reuse device memory.
    """
    if device == CUDA:
        from numba import cuda

        return cuda.device_array(shape, dtype=dtype)
    return HOST_POOL.empty(shape, dtype)


@functools.lru_cache(maxsize=None)
def placeholder_on(device, shape, dtype):
    """A small array on ``device`` that stands in for an absent optional input (a kernel argument
    it never reads), allocated once per (device, shape, dtype) and shared by every call.

    Callers must never write to it.
    """
    return empty_like_on(device, shape, np.dtype(dtype))


def use_memory_pool():
    """Serve every numba.cuda device allocation in this process from seqattn's caching pool
    (:mod:`seqattn.kernels.cuda.memory_pool`): after the first training step, a step makes no
    driver allocation. The same as setting
    ``NUMBA_CUDA_MEMORY_MANAGER=seqattn.kernels.cuda.memory_pool`` in the environment.

    Call it before the process's first CUDA call: numba fixes a context's memory manager when it
    creates the context. Raises a RuntimeError if a context already uses another manager, and
    under the CUDA simulator, which has no device memory to pool.
    """
    from numba import config, cuda

    if config.ENABLE_CUDASIM:
        raise RuntimeError("the CUDA simulator (NUMBA_ENABLE_CUDASIM=1) has no device memory "
                           "to pool; use_memory_pool() needs a GPU")
    from .kernels.cuda.memory_pool import PooledMemoryManager

    cuda.set_memory_manager(PooledMemoryManager)
    manager = cuda.current_context().memory_manager
    if not isinstance(manager, PooledMemoryManager):
        raise RuntimeError(
            f"the CUDA context already exists with {type(manager).__name__}; call "
            "seqattn.backend.use_memory_pool() before any other CUDA call in the process, or set "
            "NUMBA_CUDA_MEMORY_MANAGER=seqattn.kernels.cuda.memory_pool")
    return manager.pool
