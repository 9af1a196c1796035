"""A caching device-memory pool for numba-cuda, as an External Memory Management (EMM) plugin.

Numba's own manager asks the driver for every device array (cuMemAlloc) and frees it later
(cuMemFree); both are slow and synchronise the device. A training step allocates the same sizes
every time (activations, gradients, scratch), so this manager keeps freed blocks by size class
(:mod:`.block_pool`) and hands them out again: from the second step on, a step makes no driver
allocation at all.

A block freed by Python is handed out again at once. That is safe because seqattn queues all its
kernels and copies on the default stream: work that gets the block is queued after the work that
used it. Code that uses the same arrays on other, non-blocking streams must synchronise first.

Enable it before the process's first CUDA call, by :func:`seqattn.backend.use_memory_pool` or by
``NUMBA_CUDA_MEMORY_MANAGER=seqattn.kernels.cuda.memory_pool``. Needs the real CUDA driver (not
the simulator, which has no device memory).
"""
import functools
import weakref

from numba.cuda.cudadrv import driver

from .block_pool import BlockPool


def _allocate(nbytes):
    try:
        return driver.driver.cuMemAlloc(nbytes)
    except driver.CudaAPIError as error:
        if error.code == driver.binding.CUresult.CUDA_ERROR_OUT_OF_MEMORY:
            raise MemoryError(f"the GPU has no {nbytes} bytes free") from error
        raise


def _free(handle):
    driver.driver.cuMemFree(handle)


class PooledMemoryManager(driver.GetIpcHandleMixin, driver.HostOnlyCUDAMemoryManager):
    """numba-cuda EMM plugin: device allocations come from a :class:`BlockPool`."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.pool = BlockPool(_allocate, _free)

    def initialize(self):
        pass  # the pool grows on demand

    def memalloc(self, size):
        handle, block = self.pool.acquire(size)
        return driver.MemoryPointer(weakref.proxy(self.context), handle, size,
                                    finalizer=functools.partial(self.pool.release, handle, block))

    def get_memory_info(self):
        free, total = driver.driver.cuMemGetInfo()
        return driver.MemoryInfo(free=free, total=total)

    def reset(self):
        super().reset()
        self.pool.free_cached()

    @property
    def interface_version(self):
        return 1


# The name numba looks for in the module named by NUMBA_CUDA_MEMORY_MANAGER.
_numba_memory_manager = PooledMemoryManager
