"""A cached kernel is recompiled when a file it inlines from changes (seqattn.kernels.cache_stamp).

Numba alone stamps a cached kernel with its own file: the kernel below would keep returning
x * 2 after its inlined helper's factor became 3."""
import os
import subprocess
import sys
import textwrap

from seqattn.kernels.cache_stamp import PACKAGE_ROOT, dependency_files

KERNEL = """
from numba import njit
from .helpers import scale


@njit(cache=True)
def kernel(x):
    return scale(x)
"""

HELPERS = """
from numba import njit

FACTOR = {factor}


@njit(inline="always")
def scale(x):
    return x * FACTOR
"""

RUN = """
import sys
from numba.core.caching import CompileResultCacheImpl
from seqattn.kernels.cache_stamp import install
install(CompileResultCacheImpl, sys.argv[1])
from toy.kernels import kernel
print(kernel(1.0), kernel.stats.cache_hits.get(kernel.signatures[0], 0))
"""


def _write_toy(root, factor):
    package = root / "toy"
    package.mkdir(exist_ok=True)
    (package / "__init__.py").write_text("")
    (package / "kernels.py").write_text(textwrap.dedent(KERNEL))
    (package / "helpers.py").write_text(textwrap.dedent(HELPERS.format(factor=factor)))
    return package


def _run(root, package, cache):
    env = dict(os.environ, NUMBA_CACHE_DIR=str(cache), PYTHONPATH=str(root))
    env.pop("NUMBA_DISABLE_JIT", None)
    out = subprocess.run([sys.executable, "-c", RUN, str(package)], env=env, check=True,
                         capture_output=True, text=True).stdout.split()
    return float(out[0]), int(out[1])


def test_an_edited_inlined_helper_recompiles_its_caller(tmp_path):
    package = _write_toy(tmp_path, 2.0)
    cache = tmp_path / "cache"
    assert _run(tmp_path, package, cache) == (2.0, 0), "first process: compiled, x * 2"
    assert _run(tmp_path, package, cache) == (2.0, 1), "second process: loaded from the cache"
    _write_toy(tmp_path, 3.0)
    value, hits = _run(tmp_path, package, cache)
    assert value == 3.0, "a stale kernel came from the cache after its helper changed"
    assert hits == 0


def test_attention_kernels_are_stamped_with_what_they_inline():
    files = {os.path.relpath(f, PACKAGE_ROOT) for f in dependency_files(
        os.path.join(PACKAGE_ROOT, "kernels", "cpu", "attention.py"), PACKAGE_ROOT)}
    inlined = {"kernels/cpu/float32_math.py", "kernels/cpu/softmax_rows.py",
               "kernels/cpu/gemm/register_gemm.py", "kernels/cpu/llvm_vectors.py",
               "kernels/structured_bias_math.py", "kernels/cpu/attention_bias.py"}
    assert inlined <= files, inlined - files
    assert not any(f.startswith(("nn/", "ops/", "train/")) for f in files)
