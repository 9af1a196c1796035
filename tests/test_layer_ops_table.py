"""Every layer op in the table of tests/op_cases.py: reference, finite differences, float32
accuracy, and the CUDA kernels (under the simulator without a GPU) against the CPU ones."""
import pytest

from op_cases import (CASES, check_backward, check_cuda_matches_cpu, check_float32,
                      check_forward)


def _name(case):
    return f"{case.family}-{case.name}"


@pytest.mark.parametrize("case", CASES, ids=_name)
def test_forward_matches_reference(case):
    check_forward(case)


@pytest.mark.parametrize("case", [c for c in CASES if c.backward], ids=_name)
def test_backward_matches_finite_differences(case):
    check_backward(case)


@pytest.mark.parametrize("case", CASES, ids=_name)
def test_float32_accuracy(case):
    check_float32(case)


@pytest.mark.parametrize("case", CASES, ids=_name)
def test_cuda_matches_cpu(case):
    check_cuda_matches_cpu(case)
