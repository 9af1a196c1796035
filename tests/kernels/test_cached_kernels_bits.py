"""A kernel loaded from Numba's disk cache gives the same bits as the same kernel compiled now.

The process that compiles a kernel also holds each callee's own compiled copy, and Numba's JIT
links the kernel's calls to those copies; a process that loads the kernel from the cache runs
the copies inside the kernel's object, which LLVM optimised once more with the kernel. Where a
callee was inlined in one copy and not in the other, fast-math arithmetic across the call could
round differently (the float32 forward's row sums did, by up to 1.2e-7).
"""
import os
import subprocess
import sys

import numpy as np

# Over 512 keys: several key blocks per row, so the online softmax rescales its running sums.
SCRIPT = """
import hashlib
import numpy as np
import seqattn
rng = np.random.default_rng(5)
q = rng.standard_normal((1, 2, 40, 32)).astype(np.float32)
k, v = (rng.standard_normal((1, 2, 1100, 32)).astype(np.float32) for _ in range(2))
for causal in (False, True):
    out, lse = seqattn.attention(q, k, v, causal=causal, return_lse=True)
    print(hashlib.sha256(out.tobytes() + lse.tobytes()).hexdigest())
"""


def _run(cache_dir):
    env = {**os.environ, "NUMBA_CACHE_DIR": str(cache_dir), "NUMBA_NUM_THREADS": "1"}
    result = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True,
                            text=True, check=True)
    return result.stdout.split()


def test_float32_forward_has_the_same_bits_compiled_and_cached(tmp_path):
    compiled = _run(tmp_path)
    assert any(tmp_path.rglob("*.nbc")), "the first process wrote no cache"
    cached = _run(tmp_path)
    assert len(compiled) == 2
    np.testing.assert_array_equal(cached, compiled)
