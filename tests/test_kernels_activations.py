"""The activations kernels: reference, finite differences, float32 accuracy, CUDA against CPU."""
import numpy as np
import pytest
from scipy.special import erf, ndtr

import reference_layers as ref
from gradcheck import assert_float32_close
from op_cases import (cases_of, check_backward, check_cuda_matches_cpu, check_float32,
                      check_forward)
from seqattn import ops

CASES = cases_of("activations")
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


def _gelu_grad(x):
    """d/dx [x Phi(x)] = Phi(x) + x phi(x), computed in x's dtype."""
    return 0.5 * (1 + erf(x / np.sqrt(2))) + x * np.exp(-0.5 * x * x) / np.sqrt(2 * np.pi)


def test_gelu_float32_fast_path():
    """Exact GELU on float32 runs the vectorised exp and Gaussian tail of kernels/float32_math;
    over the whole float32 range of interest (both tails included) it must be as accurate as a
    naive float32 computation with libm's erf, forward and backward."""
    x = np.linspace(-30, 30, 600_001).astype(np.float32)
    x64 = x.astype(np.float64)
    assert_float32_close("gelu float32", ops.gelu(x), ref.gelu(x64), ref.gelu(x))
    dout = np.ones_like(x)
    assert_float32_close("gelu_backward float32", ops.gelu_backward(dout, x), _gelu_grad(x64),
                         _gelu_grad(x))
    # Deep in the negative tail the result keeps its relative accuracy (1 + erf(x) would cancel).
    tail = np.array([-5.0, -8.0, -12.0], np.float32)
    np.testing.assert_allclose(ops.gelu(tail), tail * ndtr(tail.astype(np.float64)), rtol=1e-5)
