"""The reductions kernels: reference, finite differences, float32 accuracy, CUDA against CPU."""
import pytest

from op_cases import (cases_of, check_backward, check_cuda_matches_cpu, check_float32,
                      check_forward)

CASES = cases_of("reductions")
ids = [c.name for c in CASES]


@pytest.mark.parametrize("case", CASES, ids=ids)
def test_forward_matches_reference(case):
    check_forward(case)


@pytest.mark.parametrize("case", [c for c in CASES if c.backward], ids=lambda c: c.name)
def test_backward_matches_finite_differences(case):
    check_backward(case)


@pytest.mark.parametrize("case", CASES, ids=ids)
def test_float32_accuracy(case):
    check_float32(case)


@pytest.mark.parametrize("case", CASES, ids=ids)
def test_cuda_matches_cpu(case):
    check_cuda_matches_cpu(case)
