"""The host buffer pool: buffers come back only when nothing refers to them any more."""
import threading

import numpy as np

from seqattn.host_memory import HostPool


def test_an_idle_buffer_is_reused_and_a_live_one_never():
    pool = HostPool(min_bytes=1024)
    a = pool.empty((64, 64), np.float32)
    a_base = id(a.base)  # an id, not a reference, which would keep the buffer in use
    b = pool.empty((64, 64), np.float32)
    assert id(b.base) != a_base
    a[...] = 1.0
    view = a[::2]
    del a
    c = pool.empty((64, 64), np.float32)
    assert id(c.base) != a_base, "a view of the buffer is still alive"
    del view
    d = pool.empty((4096,), np.float32)  # same size in bytes, another shape
    assert id(d.base) == a_base


def test_small_arrays_and_the_byte_limit_bypass_the_pool():
    pool = HostPool(min_bytes=1024, max_bytes=20000)
    assert pool.empty((8,), np.float64).base is None
    kept = [pool.empty((2048,), np.float64) for _ in range(2)]  # 16384 bytes each
    assert pool._held == 16384
    del kept
    assert pool.empty((2048,), np.float64) is not None


def test_threads_never_share_a_buffer():
    pool = HostPool(min_bytes=1024)
    taken, lock = [], threading.Lock()

    def grab():
        arrays = [pool.empty((512,), np.float32) for _ in range(50)]
        with lock:
            taken.extend(arrays)

    threads = [threading.Thread(target=grab) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    bases = [id(a.base) for a in taken]
    assert len(set(bases)) == len(bases)
