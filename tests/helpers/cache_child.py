"""A Python snippet run in a new process on a given Numba cache folder: how the tests check that
kernels load from the cache (and still run) in a process that did not compile them."""
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = str(Path(__file__).resolve().parents[2])


def run_on_cache(code, cache):
    """Run ``code`` (which prints one JSON line last) with ``NUMBA_CACHE_DIR=cache``, everything
    compiled in that process (no helper, no notice); returns the parsed line."""
    env = dict(os.environ, NUMBA_CACHE_DIR=str(cache), SEQATTN_COMPILE_HELPER="0",
               SEQATTN_COMPILE_NOTICE="0",
               PYTHONPATH=os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")]))
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                            text=True, timeout=600)
    assert result.returncode == 0, f"rc {result.returncode}:\n{result.stderr[-3000:]}"
    return json.loads(result.stdout.strip().splitlines()[-1])
