"""benchmarks/gpu_check.py, the script prepared for the GPU machine, runs end to end: its
--dry-run takes every section (correctness, attention, GEMM, encoder) at tiny shapes on the CUDA
simulator, and its correctness checks pass there."""
import json
import os
import pathlib
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow  # minutes in all: the file runs first (tests/conftest.py)

SCRIPT = pathlib.Path(__file__).resolve().parent.parent.parent / "benchmarks" / "gpu_check.py"
# Runs the script with the simulator the tests use (its barrier and shared arrays).
SIMULATOR = SCRIPT.parent.parent / "tests" / "helpers" / "simulator_setup.py"


def test_gpu_check_dry_run(tmp_path):
    out = tmp_path / "results.json"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(SCRIPT.parent.parent), os.environ.get("PYTHONPATH", "")]))
    result = subprocess.run([sys.executable, str(SIMULATOR), str(SCRIPT), "--dry-run",
                             "--out", str(out)],
                            env=env, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    results = json.loads(out.read_text())
    assert results["dry_run"] and results["device"] == "CUDA simulator"
    assert results["attention_check"]["ok"] and results["training_step_check"]["ok"]
    check = results["attention_check"]
    for errors in (check["max_relative_error"], check["max_relative_error_atomic"]):
        assert set(errors) == {"out", "dq", "dk", "dv", "dbias"}
    assert all(check["same_bits_when_repeated"]["deterministic"].values())
    assert len(results["attention_bench"]) == 4  # two head dims, causal off and on
    for row in results["attention_bench"]:
        assert row["seqattn_forward_tflops"] > 0 and row["torch_math_backward_tflops"] > 0
        assert row["seqattn_atomic_backward_tflops"] > 0
    assert all(row["max_relative_error"] < 1e-5 for row in results["gemm_bench"])
    assert results["encoder_bench"]["seqattn_tokens_per_s"] > 0
