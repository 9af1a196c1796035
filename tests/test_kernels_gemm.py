"""The in-place BLAS GEMM the CPU layer kernels call from @njit code, and the linear kernels'
split of rows and features over threads (blocks that are empty when a dim is below the thread
count, no bias, no input gradient)."""
import numpy as np
import pytest
from numba import njit

from seqattn import ops
from seqattn.kernels.cpu.blas_gemm import gemm


@njit
def _gemm(c, a, b, transpose_a, transpose_b, alpha, beta):
    gemm(c, a, b, transpose_a, transpose_b, alpha, beta)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("transpose_a", [False, True])
@pytest.mark.parametrize("transpose_b", [False, True])
def test_gemm_into_strided_views(dtype, transpose_a, transpose_b):
    rng = np.random.default_rng(0)
    M, N, K = 7, 5, 3
    # Every operand is a column block of a wider row-major matrix: row stride != width.
    a = rng.normal(size=(K, M + 2) if transpose_a else (M, K + 2)).astype(dtype)[:, 1:-1]
    b = rng.normal(size=(N, K + 3) if transpose_b else (K, N + 3)).astype(dtype)[:, 2:-1]
    wide = rng.normal(size=(M, N + 4)).astype(dtype)
    c = wide[:, 2:2 + N]
    want = 0.5 * ((a.T if transpose_a else a) @ (b.T if transpose_b else b)) + 2.0 * c
    untouched = wide[:, :2].copy()
    _gemm(c, a, b, transpose_a, transpose_b, 0.5, 2.0)
    np.testing.assert_allclose(c, want, rtol=10 * np.finfo(dtype).eps, atol=0)
    np.testing.assert_array_equal(wide[:, :2], untouched)


@pytest.mark.parametrize("rows, features", [(1, 1), (3, 1), (1, 3), (9, 6)])
def test_linear_blocks_without_bias_or_input_grad(rows, features):
    rng = np.random.default_rng(1)
    x, weight = rng.normal(size=(rows, 4)), rng.normal(size=(features, 4))
    dout = rng.normal(size=(rows, features))
    np.testing.assert_allclose(ops.linear(x, weight), x @ weight.T, rtol=1e-12)
    weight_grad = np.ones_like(weight)
    dx = ops.linear_backward(dout, x, weight, weight_grad=weight_grad, need_input_grad=False)
    assert dx is None
    np.testing.assert_allclose(weight_grad, 1 + dout.T @ x, rtol=1e-12)
    bias, bias_grad = rng.normal(size=features), np.ones(features)
    np.testing.assert_allclose(ops.linear(x, weight, bias), x @ weight.T + bias, rtol=1e-12)
    dx = ops.linear_backward(dout, x, weight, weight_grad=weight_grad, bias_grad=bias_grad)
    np.testing.assert_allclose(dx, dout @ weight, rtol=1e-12)
    np.testing.assert_allclose(bias_grad, 1 + dout.sum(axis=0), rtol=1e-12)
