"""Two processes compiling one cached function for different signatures at the same moment keep
both entries in Numba's disk cache (seqattn.cache_lock), and each entry loads its own code.

Each child imports seqattn (which installs the lock), waits until both children are ready, then
compiles; its index save is slowed down so that, without the lock, both children read the empty
index before either writes it back, and the second write drops the first one's entry."""
import os
import subprocess
import sys
import textwrap

import seqattn  # noqa: F401  (installs the lock in this process too)
from numba.core import caching

from seqattn import cache_lock

FUNCTION = """
from numba import njit


@njit(cache=True)
def doubled_sum(x):
    total = x[0] * 0
    for i in range(x.shape[0]):
        total += 2 * x[i]
    return total
"""

CHILD = """
import os, sys, time
import numpy as np
import seqattn
from numba.core import caching

sys.path.insert(0, {folder!r})
import racing

write_index = caching.IndexDataCacheFile._save_index


def slow_write_index(self, overloads):
    time.sleep(1.0)
    write_index(self, overloads)


caching.IndexDataCacheFile._save_index = slow_write_index
dtype = sys.argv[1]
open(os.path.join({folder!r}, "ready-" + dtype), "w").close()
while not all(os.path.exists(os.path.join({folder!r}, "ready-" + d)) for d in ("float32", "int64")):
    time.sleep(0.01)
racing.doubled_sum(np.arange(4, dtype=dtype))
"""

CHECK = """
import sys
import numpy as np
sys.path.insert(0, {folder!r})
import racing

print(racing.doubled_sum(np.array([0.25, 0.5], dtype=np.float32)),
      racing.doubled_sum(np.array([3, 4], dtype=np.int64)),
      len(racing.doubled_sum.stats.cache_hits), len(racing.doubled_sum.stats.cache_misses))
"""


def test_concurrent_saves_keep_every_signature(tmp_path):
    folder = str(tmp_path)
    (tmp_path / "racing.py").write_text(FUNCTION)
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "cache"))
    child = textwrap.dedent(CHILD.format(folder=folder))
    children = [subprocess.Popen([sys.executable, "-c", child, dtype], env=env)
                for dtype in ("float32", "int64")]
    assert [c.wait(timeout=300) for c in children] == [0, 0]

    check = subprocess.run([sys.executable, "-c", CHECK.format(folder=folder)], env=env,
                           capture_output=True, text=True, timeout=300, check=True)
    float_sum, int_sum, hits, misses = check.stdout.split()
    # each signature loads its own code from the cache: no recompilation, no swapped entries
    assert (float(float_sum), int(int_sum), int(hits), int(misses)) == (1.5, 14, 2, 0)


def test_install_is_idempotent():
    locked = caching.IndexDataCacheFile.save
    assert hasattr(locked, "unlocked")
    cache_lock.install()
    assert caching.IndexDataCacheFile.save is locked
