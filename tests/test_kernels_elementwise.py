"""The elementwise kernels: reference, finite differences, float32 accuracy, CUDA against CPU."""
import numpy as np
import pytest

from op_cases import (cases_of, check_backward, check_cuda_matches_cpu, check_float32,
                      check_forward)
from seqattn import ops

CASES = cases_of("elementwise")
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


@pytest.mark.parametrize("b_shape", [(5, 3, 4), (3, 4), (4,)], ids=["same_size", "table", "bias"])
def test_add_over_row_blocks(b_shape):
    """The CPU add runs same-size inputs elementwise and broadcasts by blocks of rows."""
    rng = np.random.default_rng(0)
    a = rng.normal(size=(5, 3, 4)).astype(np.float32)
    b = rng.normal(size=b_shape).astype(np.float32)
    np.testing.assert_array_equal(ops.add(a, b), a + b)
