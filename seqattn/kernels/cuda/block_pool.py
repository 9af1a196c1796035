"""Reuse of freed device memory blocks by size class: the bookkeeping of the memory pool.

Plain Python with the driver calls passed in, so that it is tested without a GPU; the numba-cuda
plugin around it is :mod:`.memory_pool`.
"""
from collections import defaultdict

SMALLEST_BLOCK = 512  # bytes; cudaMalloc aligns to 256 B anyway
CLASSES_PER_DOUBLING = 4  # size classes 1, 1.25, 1.5, 1.75 x a power of two: <= 25 % waste


def size_class(nbytes):
    """The block size (bytes) that serves a request of ``nbytes``: the smallest class >= it."""
    if nbytes <= SMALLEST_BLOCK:
        return SMALLEST_BLOCK
    power = 1 << (nbytes - 1).bit_length() - 1  # largest power of two < nbytes
    step = power // CLASSES_PER_DOUBLING
    return -(-nbytes // step) * step


class BlockPool:
    """Blocks of device memory kept for reuse once freed.

    ``allocate(nbytes) -> handle`` asks the driver for memory and raises MemoryError when it has
    none; ``free(handle)`` returns memory to the driver. :meth:`acquire` serves a request from a
    cached block of its size class when there is one, so a workload that repeats its allocation
    sizes (a training step) reaches a state where it makes no driver allocation.
    """

    def __init__(self, allocate, free):
        self._allocate = allocate
        self._free = free
        self._cached = defaultdict(list)  # size class -> handles ready for reuse
        self.driver_allocations = 0
        self.cached_bytes = 0
        self.in_use_bytes = 0

    def acquire(self, nbytes):
        """(handle, block size) of a block of at least ``nbytes`` bytes."""
        size = size_class(nbytes)
        blocks = self._cached.get(size)
        if blocks:
            handle = blocks.pop()
            self.cached_bytes -= size
        else:
            handle = self._allocate_from_driver(size)
        self.in_use_bytes += size
        return handle, size

    def release(self, handle, size):
        """Give a block back to the pool (it stays allocated on the device for reuse)."""
        self._cached[size].append(handle)
        self.cached_bytes += size
        self.in_use_bytes -= size

    def free_cached(self):
        """Return every cached block to the driver."""
        for blocks in self._cached.values():
            for handle in blocks:
                self._free(handle)
        self._cached.clear()
        self.cached_bytes = 0

    def _allocate_from_driver(self, size):
        try:
            handle = self._allocate(size)
        except MemoryError:
            # Cached blocks of other sizes may be what the device lacks: give them back, retry.
            self.free_cached()
            handle = self._allocate(size)
        self.driver_allocations += 1
        return handle
