"""The GEMMs. CPU: the in-place BLAS GEMM the layer kernels call from @njit code, the linear
kernels' split of rows and features over threads (blocks that are empty when a dim is below the
thread count, no bias, no input gradient) and their weight gradient through packed_gemm. CUDA:
the register-blocked numba kernel at odd shapes (the simulator without a GPU), and the cuBLAS
path's argument mapping and dispatch."""
import numpy as np
import pytest
from numba import njit

from seqattn import ops
from seqattn.kernels.cpu.gemm.blas_gemm import gemm


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


# --- The CUDA GEMM (the simulator without a GPU) ------------------------------------------

def _operands(rng, M, N, K, transpose_a, transpose_b, dtype):
    """op(a) (M, K) and op(b) (K, N) as stored, each a column block of a wider matrix."""
    a = rng.normal(size=(K, M + 2) if transpose_a else (M, K + 2)).astype(dtype)[:, 1:-1]
    b = rng.normal(size=(N, K + 3) if transpose_b else (K, N + 3)).astype(dtype)[:, 2:-1]
    return a, b


def _product(a, b, transpose_a, transpose_b):
    return (a.T if transpose_a else a).astype(np.float64) @ (b.T if transpose_b else b)


@pytest.mark.parametrize("transpose_a, transpose_b", [(False, False), (False, True),
                                                     (True, False), (True, True)])
@pytest.mark.parametrize("M, N, K", [(1, 1, 1), (67, 5, 17), (3, 70, 33)])
def test_cuda_gemm_at_odd_shapes(M, N, K, transpose_a, transpose_b):
    """Shapes off the 64 x 64 x 16 tiles in every dim (partial tiles, one thread's 4 x 4 block
    cut at the edge), every transposition, strided views, accumulate and overwrite."""
    from numba import cuda

    from seqattn.kernels.cuda.gemm import NUMBA, gemm, gemm_backend

    rng = np.random.default_rng(M + N + K)
    a, b = _operands(rng, M, N, K, transpose_a, transpose_b, np.float32)
    start = rng.normal(size=(M, N)).astype(np.float32)
    c = cuda.to_device(start)
    d_a, d_b = cuda.to_device(np.ascontiguousarray(a)), cuda.to_device(np.ascontiguousarray(b))
    assert gemm_backend(c, d_a, d_b) == NUMBA  # no cuBLAS on the simulator
    gemm(c, d_a, d_b, transpose_a, transpose_b, True)
    want = start + _product(a, b, transpose_a, transpose_b)
    bound = 4 * K * np.finfo(np.float32).eps * (np.abs(want).max() + 1)
    np.testing.assert_allclose(c.copy_to_host(), want, rtol=0, atol=bound)
    gemm(c, d_a, d_b, transpose_a, transpose_b, False)
    np.testing.assert_allclose(c.copy_to_host(), want - start, rtol=0, atol=bound)


def test_cuda_gemm_float64_on_strided_device_views():
    from numba import cuda

    from seqattn.kernels.cuda.gemm import gemm

    rng = np.random.default_rng(3)
    a, b = _operands(rng, 9, 7, 20, False, True, np.float64)
    d_a = cuda.to_device(np.ascontiguousarray(a.base))[:, 1:-1]  # a device view, row stride 22
    d_b = cuda.to_device(np.ascontiguousarray(b.base))[:, 2:-1]
    c = cuda.to_device(np.zeros((9, 7)))
    gemm(c, d_a, d_b, False, True, False)
    np.testing.assert_allclose(c.copy_to_host(), _product(a, b, False, True), rtol=1e-13)


# --- cuBLAS dispatch: the binding is not installed in CI, so its call is tested on a GPU only --

def _column_major_gemm(call, operands, c_flat, M, N):
    """What cuBLAS computes for ``call``, over flat row-major buffers read column-major."""
    def matrix(flat, rows, cols, ld):  # column-major (rows, cols) with leading dim ld
        return np.lib.stride_tricks.as_strided(flat, (rows, cols),
                                               (flat.itemsize, ld * flat.itemsize))

    first_rows, first_cols = (call.k, call.m) if call.first_transposed else (call.m, call.k)
    second_rows, second_cols = (call.n, call.k) if call.second_transposed else (call.k, call.n)
    first = matrix(operands[call.first], first_rows, first_cols, call.ldf)
    second = matrix(operands[call.second], second_rows, second_cols, call.lds)
    product = (first.T if call.first_transposed else first) @ \
        (second.T if call.second_transposed else second)
    out = matrix(c_flat, call.m, call.n, call.ldc)
    out[...] = product
    return c_flat.reshape(M, -1)[:, :N]


@pytest.mark.parametrize("transpose_a, transpose_b", [(False, False), (False, True),
                                                     (True, False), (True, True)])
def test_row_major_gemm_maps_to_column_major_call(transpose_a, transpose_b):
    """Row-major c = op(a) op(b) is column-major c^T = op(b)^T op(a)^T, strides kept."""
    from seqattn.kernels.cuda.cublas_gemm import column_major_call, row_stride

    rng = np.random.default_rng(4)
    M, N, K = 5, 3, 4
    a, b = _operands(rng, M, N, K, transpose_a, transpose_b, np.float64)
    c_wide = np.zeros((M, N + 2))  # c's rows are 5 elements apart
    lds = [row_stride(x.shape, x.strides, 8) for x in (a, b, c_wide)]
    call = column_major_call(M, N, K, transpose_a, transpose_b, *lds)
    flat = {"a": a.base.reshape(-1)[1:], "b": b.base.reshape(-1)[2:]}  # views start at [0, 0]
    got = _column_major_gemm(call, flat, c_wide.reshape(-1), M, N)
    np.testing.assert_allclose(got, _product(a, b, transpose_a, transpose_b), rtol=1e-13)


def test_row_stride_refuses_views_cublas_cannot_read():
    from seqattn.kernels.cuda.cublas_gemm import row_stride

    x = np.zeros((4, 6), np.float32)
    assert row_stride(x.shape, x.strides, 4) == 6
    assert row_stride(x[:, ::2].shape, x[:, ::2].strides, 4) is None  # strided columns
    assert row_stride(x.T.shape, x.T.strides, 4) is None  # a transposed view
    broadcast = np.broadcast_to(np.zeros(6, np.float32), (4, 6))
    assert row_stride(broadcast.shape, broadcast.strides, 4) is None  # rows overlap
    assert row_stride((1, 6), (0, 4), 4) == 6  # one row: any row stride


def test_gemm_dispatch_takes_cublas_only_for_operands_it_supports():
    from numba import cuda

    from seqattn.kernels.cuda.gemm import CUBLAS, NUMBA, gemm_backend

    c, a, b = (cuda.to_device(np.zeros((4, 4), np.float32)) for _ in range(3))
    assert gemm_backend(c, a, b, cublas_available=True) == CUBLAS
    assert gemm_backend(c, a, b, cublas_available=False) == NUMBA
    assert gemm_backend(c, a[:, ::2], b[:, :2], cublas_available=True) == NUMBA
    mixed = cuda.to_device(np.zeros((4, 4), np.float64))
    assert gemm_backend(c, mixed, b, cublas_available=True) == NUMBA


def test_cublas_gemm_matches_numba_kernel_on_a_gpu():
    """Runs only where nvmath-python and a GPU are present (never in CI)."""
    from numba import cuda

    from seqattn.kernels.cuda import cublas_gemm
    from seqattn.kernels.cuda.compile_target import ON_SIMULATOR
    from seqattn.kernels.cuda.sgemm import sgemm

    if ON_SIMULATOR or not cublas_gemm.available():
        pytest.skip("needs a GPU and nvmath-python (pip install seqattn[cuda])")
    rng = np.random.default_rng(5)
    for transpose_a, transpose_b in [(False, False), (False, True), (True, False), (True, True)]:
        a, b = (cuda.to_device(np.ascontiguousarray(x))
                for x in _operands(rng, 67, 45, 33, transpose_a, transpose_b, np.float32))
        c1, c2 = (cuda.to_device(np.ones((67, 45), np.float32)) for _ in range(2))
        cublas_gemm.cublas_gemm(c1, a, b, transpose_a, transpose_b, True)
        sgemm(c2, a, b, transpose_a, transpose_b, True)
        np.testing.assert_allclose(c1.copy_to_host(), c2.copy_to_host(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("K", [64, 128])
def test_linear_weight_gradient_takes_the_packed_product_at_its_size(K):
    """Large enough for packed_gemm's register path (each thread's block of dW at least
    MIN_WORK multiply-adds; with more inputs than outputs, K > O, the threads split dW's
    columns instead of its rows), or on a CPU with AMX tiles for theirs where dW takes them:
    the layer's float32 dW is the path's result bit for bit (its rounding does not depend on
    how the features are split over threads) and as accurate as NumPy's float32 product; the
    bias gradient beside it as accurate as NumPy's float32 sum, with or without the input
    gradient."""
    from gradcheck import assert_float32_close
    from seqattn.kernels.cpu import linear
    from seqattn.kernels.cpu.gemm import tile_linear
    from seqattn.kernels.cpu.gemm.packed_gemm import (MIN_WORK, gemm_in_registers,
                                                 gemm_through_blas)

    rng = np.random.default_rng(5)
    R, O = 2 * MIN_WORK // (64 * 64), 64
    x, dout = (rng.standard_normal((R, n), dtype=np.float32) for n in (K, O))
    weight = rng.standard_normal((O, K), dtype=np.float32)
    weight_grad = np.zeros((O, K), np.float32)
    ops.linear_backward(dout, x, weight, weight_grad=weight_grad, need_input_grad=False)
    want = np.zeros_like(weight_grad)
    if tile_linear.weight_gradient_on_tiles(x, weight):
        tile_linear.weight_gradient(want, dout, x)
    else:
        # the register path where the layer takes it (AVX-512 at this size, AVX2 for small
        # weights: linear._dweight_in_registers)
        in_registers = linear._dweight_in_registers(x, weight)
        (gemm_in_registers if in_registers else gemm_through_blas)(want, dout, x, True, False,
                                                                   True)
    np.testing.assert_array_equal(weight_grad, want)
    assert_float32_close("dW", weight_grad, dout.T.astype(np.float64) @ x, dout.T @ x)
    for need_input_grad in (False, True):
        weight_grad[...] = 0
        bias_grad = np.ones(O, np.float32)
        ops.linear_backward(dout, x, weight, weight_grad=weight_grad, bias_grad=bias_grad,
                            need_input_grad=need_input_grad)
        np.testing.assert_array_equal(weight_grad, want)
        assert_float32_close("db", bias_grad, 1 + dout.astype(np.float64).sum(axis=0),
                             1 + dout.sum(axis=0))
