"""Every CUDA kernel seqattn launches compiles with the real numba-cuda compiler, for compute
capability 9.0 (H100, H200) with every signature it is launched with, and for 8.0 (A100) with one
signature per kernel, on a machine without a GPU.

The CUDA simulator that runs the other CUDA tests executes kernels as Python and never types them
as the compiler does: a GEMM whose shared array had the shape (TILE, TILE + 1) passed every
simulator test and compiled for no GPU. ``tests/helpers/cuda_kernel_census.py`` records every launch of a
workload over all op families (simulator on, in one process), then compiles each kernel for each
signature it was launched with and reads registers and spills from ptxas (simulator off, in
another). The census itself fails when a ``@cuda.jit`` kernel in ``seqattn/kernels/cuda`` is never
launched, or is launched in only one of float32 and float64.

Needs NVRTC, NVVM and ptxas from pip (``.ci/run`` installs them); skipped, saying so, without.
With ``CUDA_KERNEL_REPORT=path`` the table of registers and spills per kernel is written there.
"""
import json
import os
import pathlib
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow  # minutes in all: the file runs first (tests/conftest.py)

CENSUS = pathlib.Path(__file__).resolve().parents[1] / "helpers" / "cuda_kernel_census.py"
ROOT = CENSUS.parents[2]
EVERY_SIGNATURE_CC = "9.0"
REPRESENTATIVE_CC = "8.0"  # one signature per kernel: the same bodies, NVVM and ptxas once more


def _toolchain_missing():
    """Why the real compiler cannot run here, or None."""
    from cuda import pathfinder

    try:
        for library in ("nvrtc", "nvvm"):
            pathfinder.load_nvidia_dynamic_lib(library)
    except Exception as error:
        return f"{library} not found ({type(error).__name__})"
    if pathfinder.find_nvidia_binary_utility("ptxas") is None:
        return "ptxas not found"
    return None


def _run(args, simulator):
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1" if simulator else "0",
               PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    result = subprocess.run([sys.executable, str(CENSUS), *args], env=env, cwd=ROOT,
                            capture_output=True, text=True, timeout=1800)
    return result


@pytest.fixture(scope="module")
def compile_reports(tmp_path_factory):
    missing = _toolchain_missing()
    if missing:
        pytest.skip(f"the CUDA compiler toolchain is incomplete: {missing}; pip install "
                    "nvidia-cuda-nvrtc nvidia-nvvm nvidia-cuda-nvcc")
    folder = tmp_path_factory.mktemp("cuda_compile")
    launches, report = folder / "launches.pkl", folder / "report.json"
    census = _run(["census", str(launches)], simulator=True)
    assert census.returncode == 0, f"kernel census failed:\n{census.stderr[-6000:]}"
    compiled = _run(["compile", str(launches), str(report), "--cc", EVERY_SIGNATURE_CC,
                     "--representative-cc", REPRESENTATIVE_CC,
                     "--workers", str(min(4, os.cpu_count() or 1))], simulator=False)
    if os.environ.get("CUDA_KERNEL_REPORT"):
        pathlib.Path(os.environ["CUDA_KERNEL_REPORT"]).write_text(compiled.stdout)
    assert report.exists(), f"the compile step stopped:\n{compiled.stderr[-6000:]}"
    return json.loads(report.read_text())


def test_every_launched_kernel_compiles(compile_reports):
    failed = [f"{r['kernel']} (cc {r['cc']}) [{r['signature']}]: {r['error']}"
              for r in compile_reports if "error" in r]
    assert not failed, "kernels that do not compile:\n" + "\n".join(failed)


def test_each_kernel_is_compiled_for_every_compute_capability(compile_reports):
    ccs_by_signature, ccs_by_kernel = {}, {}
    for r in compile_reports:
        ccs_by_signature.setdefault((r["kernel"], r["signature"]), set()).add(r["cc"])
        ccs_by_kernel.setdefault(r["kernel"], set()).add(r["cc"])
    assert all(EVERY_SIGNATURE_CC in ccs for ccs in ccs_by_signature.values())
    assert all(ccs == {EVERY_SIGNATURE_CC, REPRESENTATIVE_CC} for ccs in ccs_by_kernel.values())
    # ptxas reported on every kernel it assembled (a kernel uses at least one register).
    assert all(r["registers"] > 0 for r in compile_reports if "error" not in r)


def test_float32_gemm_stays_in_float32_without_spills(compile_reports):
    gemm = [r for r in compile_reports if r["kernel"].endswith("sgemm.sgemm_kernel")
            and "float32" in r["signature"]]
    assert gemm
    for r in gemm:
        assert not r["float64_in_float32"], f"float64 instructions in the float32 GEMM ({r})"
        assert r["spill_stores"] == r["spill_loads"] == 0, r


def test_float32_attention_stays_in_float32(compile_reports):
    """No float64 instruction in any float32 attention kernel: a float literal or a mixed
    operation promoted to float64 runs at half the float32 rate on an H200 (1/64 on most other
    GPUs) and takes two registers per value."""
    attention = [r for r in compile_reports if ".attention" in r["kernel"]
                 and "float64" not in r["signature"] and "error" not in r]
    assert attention
    promoted = sorted({f"{r['kernel']} [{r['signature'][:100]}]" for r in attention
                       if r["float64_in_float32"]})
    assert not promoted, "float64 instructions in float32 attention kernels:\n" + \
        "\n".join(promoted)


def _is_deterministic_backward(report):
    """The kernels of attention_backward(deterministic=True): the query-tile dq pass, and the
    key-tile pass built without dq (its factory's last argument, with_dq, False)."""
    kernel = report["kernel"]
    return (kernel.endswith("attention_backward_dq.attention_backward_dq_kernel")
            or (kernel.endswith("attention_backward.attention_backward_kernel")
                and report["factory_args"][-1] is False))


def test_deterministic_attention_backward_has_no_float_atomics(compile_reports):
    """dq, dk, dv and the structured biases' gradients of the deterministic backward have one
    writer per element, or are summed as integers (the tables): no floating-point atomic add,
    whose sum would depend on the order the blocks run in. The backward with atomics is the
    check's control: its PTX has them."""
    backward = [r for r in compile_reports if "error" not in r
                and ".attention_backward" in r["kernel"]]
    deterministic = [r for r in backward if _is_deterministic_backward(r)]
    atomic = [r for r in backward if not _is_deterministic_backward(r)]
    assert deterministic and atomic
    assert {r["kernel"].rsplit(".", 1)[-1] for r in deterministic} == {
        "attention_backward_kernel", "attention_backward_dq_kernel"}
    offending = sorted({f"{r['kernel']} {r['factory_args']}" for r in deterministic
                        if r["float_atomics"]})
    assert not offending, "float atomics in the deterministic backward:\n" + "\n".join(offending)
    assert all(r["float_atomics"] > 0 for r in atomic), "the atomic backward adds dq atomically"


def test_float32_attention_bias_gradient_does_not_spill(compile_reports):
    """The bias-gradient kernel at every head tile it is compiled for, within the 168 registers
    of three resident blocks per SM and without spills (it used 250-255 registers and spilled
    324 bytes at a 96-wide head tile while its loops over batch and head were nested)."""
    bias_grad = [r for r in compile_reports if "error" not in r
                 and r["kernel"].endswith("attention_bias_grad.attention_bias_grad_kernel")
                 and "float64" not in r["signature"]]
    assert {r["factory_args"][1] for r in bias_grad} >= {32, 64, 96, 128}
    for r in bias_grad:
        assert r["spill_stores"] == r["spill_loads"] == 0, r
        assert r["registers"] <= 168, r
