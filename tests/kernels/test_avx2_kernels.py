"""The CPU kernels compiled for a CPU with AVX2 and FMA but not AVX-512 (Zen 3, Haswell to
Ice Lake clients), whatever CPU runs the tests: the register kernel's 6 x 16 blocks, its unmasked
full blocks and AVX2 max, and the exp without scalef are then the code that runs.

Numba compiles for the features that NUMBA_CPU_FEATURES names, and seqattn chooses its kernels
from the same features (``llvm_vectors.target_features``). The host's own features with AVX-512
(and what needs it) switched off name a CPU that this host can run. The register kernel's and
the attention's test files then run in a process compiled so; their own checks (products with
every tail and epilogue against NumPy, forward and backward against the float64 reference and
finite differences) decide; the short-sequence attention is among them, as it runs on the
register kernel.
"""
import os
import subprocess
import sys

import pytest
from llvmlite import binding

from seqattn.kernels.cpu.llvm_vectors import has_avx2_fma

TESTS = os.path.dirname(os.path.abspath(__file__))
AVX512_FAMILIES = ("+avx512", "+amx", "+avx10", "+evex512")


def without_avx512(features):
    """LLVM's feature string with every AVX-512 (and AMX, AVX10) feature switched off."""
    return ",".join("-" + f[1:] if f.startswith(AVX512_FAMILIES) else f
                    for f in features.split(","))


def avx2_environment():
    features = without_avx512(binding.get_host_cpu_features().flatten())
    return dict(os.environ, NUMBA_CPU_FEATURES=features, NUMBA_ENABLE_CUDASIM="1")


def test_features_without_avx512_keep_avx2_and_fma():
    features = without_avx512("+avx2,+fma,+avx512f,+avx512bw,+amx-tile,+avx10.1,-sha,+sse4.2")
    assert features == "+avx2,+fma,-avx512f,-avx512bw,-amx-tile,-avx10.1,-sha,+sse4.2"


@pytest.mark.slow
@pytest.mark.skipif(not has_avx2_fma(binding.get_host_cpu_features().flatten()),
                    reason="the CPU running the tests has no AVX2 and FMA")
def test_register_kernel_and_attention_compiled_for_avx2():
    env = avx2_environment()
    probe = subprocess.run(
        [sys.executable, "-c", "from seqattn.kernels.cpu import llvm_vectors; "
         "from seqattn.kernels.cpu.gemm import register_gemm; "
         "print(llvm_vectors.AVX512, register_gemm.IN_REGISTERS, register_gemm.WIDE)"],
        env=env, capture_output=True, text=True, check=True)
    assert probe.stdout.split() == ["False", "True", "16"], \
        f"not the AVX2 register kernel: {probe.stdout} {probe.stderr}"
    files = [os.path.join(TESTS, name) for name in
             ("test_register_gemm.py", "test_float32_math.py", "test_attention_cpu.py",
              "test_attention_small.py")]
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          "-p", "no:xdist", *files], env=env, cwd=TESTS, capture_output=True,
                         text=True)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    assert " passed" in run.stdout.splitlines()[-1]
