"""The device memory pool: size classes, reuse, and the numba-cuda plugin interface.

The pool's bookkeeping is plain Python with the driver calls passed in, tested here with a
recording stand-in for the driver; the plugin's driver calls need a GPU (benchmarks/gpu_check.py
checks that a training step allocates nothing there)."""
import os
import subprocess
import sys

import pytest

from seqattn.kernels.cuda.block_pool import SMALLEST_BLOCK, BlockPool, size_class


class RecordingDriver:
    """Hands out increasing fake addresses, and runs out of memory past ``capacity`` bytes."""

    def __init__(self, capacity=1 << 40):
        self.capacity = capacity
        self.live = {}
        self.next_address = 1

    def allocate(self, nbytes):
        if sum(self.live.values()) + nbytes > self.capacity:
            raise MemoryError
        address, self.next_address = self.next_address, self.next_address + nbytes
        self.live[address] = nbytes
        return address

    def free(self, address):
        del self.live[address]


@pytest.mark.parametrize("nbytes", [0, 1, 512, 513, 1000, 4096, 4097, 10 ** 6, 3 * 2 ** 30 + 7])
def test_size_class_covers_the_request_and_wastes_at_most_a_quarter(nbytes):
    size = size_class(nbytes)
    assert size >= nbytes
    assert size == SMALLEST_BLOCK or size <= 1.25 * nbytes
    assert size_class(size) == size  # a class serves its own size exactly


def test_a_repeated_step_allocates_nothing_after_the_first():
    driver = RecordingDriver()
    pool = BlockPool(driver.allocate, driver.free)
    step_sizes = [4096, 4096, 123, 10 ** 6, 77777]

    def step():
        blocks = [pool.acquire(n) for n in step_sizes]
        for handle, size in blocks:
            pool.release(handle, size)
        return {handle for handle, _ in blocks}

    first = step()
    assert pool.driver_allocations == len(step_sizes)
    for _ in range(3):
        assert step() == first  # the same device blocks, no new ones
    assert pool.driver_allocations == len(step_sizes)
    assert pool.in_use_bytes == 0 and pool.cached_bytes == sum(driver.live.values())


def test_blocks_in_use_are_never_handed_out_twice():
    driver = RecordingDriver()
    pool = BlockPool(driver.allocate, driver.free)
    held = [pool.acquire(1000) for _ in range(3)]
    assert len({handle for handle, _ in held}) == 3
    pool.release(*held[1])
    again, _ = pool.acquire(900)  # same size class: the released block
    assert again == held[1][0]
    assert pool.acquire(1000)[0] not in {handle for handle, _ in held}


def test_out_of_memory_frees_cached_blocks_and_retries():
    driver = RecordingDriver(capacity=3000)
    pool = BlockPool(driver.allocate, driver.free)
    small = pool.acquire(1000)
    pool.release(*small)  # cached, still allocated on the device
    big, size = pool.acquire(2500)  # fits only once the cached block is given back
    assert driver.live == {big: size}
    assert pool.cached_bytes == 0
    with pytest.raises(MemoryError):
        pool.acquire(2000)  # nothing cached left to give back


def test_numba_accepts_the_plugin_by_environment_variable_and_by_call():
    """numba's EMM entry points take the plugin (checked without a GPU: no context is made)."""
    code = (
        "from numba import cuda\n"
        "from numba.cuda.cudadrv import driver\n"
        "import seqattn.kernels.cuda.memory_pool as m\n"
        "driver._ensure_memory_manager()\n"  # reads NUMBA_CUDA_MEMORY_MANAGER
        "assert driver._memory_manager is m.PooledMemoryManager, driver._memory_manager\n"
        "cuda.set_memory_manager(m.PooledMemoryManager)\n"  # checks the interface version
    )
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="0",
               NUMBA_CUDA_MEMORY_MANAGER="seqattn.kernels.cuda.memory_pool")
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, result.stderr


def test_use_memory_pool_refuses_the_simulator():
    from numba import config

    from seqattn.backend import use_memory_pool

    if not config.ENABLE_CUDASIM:
        pytest.skip("a real GPU: gpu_check.py covers use_memory_pool there")
    with pytest.raises(RuntimeError, match="simulator"):
        use_memory_pool()
