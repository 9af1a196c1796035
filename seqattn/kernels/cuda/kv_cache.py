"""Writing new keys and values into a key/value cache on the GPU; same launcher and semantics as
``kernels/cpu/kv_cache``. Shapes: cache (B, H, M, D), new (B, H, n, D)."""
from numba import cuda

from .grid import THREADS, blocks_for


@cuda.jit(cache=True)
def write_positions_kernel(cache, new, start):
    B, H, n, D = new.shape
    i = cuda.grid(1)
    if i >= B * H * n * D:
        return
    d = i % D
    p = (i // D) % n
    h = (i // (D * n)) % H
    b = i // (D * n * H)
    cache[b, h, start + p, d] = new[b, h, p, d]


def write_positions(cache, new, start):
    write_positions_kernel[blocks_for(new.size), THREADS](cache, new, start)
