"""register_gemm (the attention tiles' matrix product) and transpose against NumPy."""
import numpy as np
import pytest
from numba import njit

from seqattn.kernels.cpu.llvm_vectors import LANES
from seqattn.kernels.cpu.gemm.register_gemm import (WIDE, blas_product, register_gemm,
                                               register_gemm_exp, register_gemm_lane_max,
                                               register_gemm_softmax_grad,
                                               tile_products_in_registers, transpose)


@njit
def _product(c, a, b, alpha, accumulate):
    register_gemm(c, a, b, alpha, accumulate)


@njit
def _product_of_transposed(c, a_t, b, alpha, accumulate):
    register_gemm(c, a_t.T, b, alpha, accumulate)


@njit
def _blas_product(c, a, b, alpha, accumulate):
    blas_product(c, a, b, alpha, accumulate)


@njit
def _blas_product_of_transposed(c, a_t, b, alpha, accumulate):
    blas_product(c, a_t.T, b, alpha, accumulate)


# the register kernel, and BLAS (which CPUs without AVX-512 take for float32 too)
PRODUCTS = {"registers": (_product, _product_of_transposed),
            "blas": (_blas_product, _blas_product_of_transposed)}


# Rows and columns around the register blocks (12 rows x 32 columns, tails of 6, 3, 1 rows and
# 16 or fewer columns), an empty inner dimension, and single rows and columns; then products
# whose loops cut a's rows into chunks (130 x 64) and b's rows into slices (depth 700), with
# partial chunks and slices at the end.
# Column tails of 0-15 past the last 16-column block: on AVX2 the narrow blocks run 8 columns
# unmasked (tails 8, 24) and masked ones below (1, 6) or after them (12, 13).
SHAPES = [(1, 1, 1), (2, 1, 1), (1, 7, 2), (12, 32, 5), (13, 33, 64), (25, 17, 3), (30, 70, 0),
          (40, 48, 19), (7, 16, 9), (130, 40, 64), (30, 40, 700), (19, 8, 33), (14, 12, 7),
          (9, 29, 40)]


@pytest.mark.parametrize("path", sorted(PRODUCTS))
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=lambda d: d.__name__)
@pytest.mark.parametrize("transposed", [False, True], ids=["a", "a.T"])
@pytest.mark.parametrize("M, N, K", SHAPES)
def test_register_gemm_matches_numpy(M, N, K, transposed, dtype, path):
    product, product_of_transposed = PRODUCTS[path]
    rng = np.random.default_rng(M * 100 + N * 10 + K)
    a = rng.standard_normal((M, K))
    b = rng.standard_normal((K, N))
    # c is a column block of a wider array, as the kernels pass tiles of their buffers
    c_wide = rng.standard_normal((M, N + 5)).astype(dtype)
    before = c_wide.copy()
    for accumulate in (True, False):
        c_wide[...] = before
        c = c_wide[:, 2:2 + N]
        if transposed:
            product_of_transposed(c, np.ascontiguousarray(a.T).astype(dtype), b.astype(dtype),
                                  0.5, accumulate)
        else:
            product(c, a.astype(dtype), b.astype(dtype), 0.5, accumulate)
        want = 0.5 * a @ b + (before[:, 2:2 + N] if accumulate else 0)
        tol = 8 * np.finfo(dtype).eps * (1 + np.abs(a) @ np.abs(b) + np.abs(before[:, 2:2 + N]))
        assert np.all(np.abs(c - want) <= tol), f"accumulate={accumulate}"
        np.testing.assert_array_equal(c_wide[:, :2], before[:, :2], "columns left of c")
        np.testing.assert_array_equal(c_wide[:, 2 + N:], before[:, 2 + N:], "columns right of c")


@njit
def _product_lane_max(c, a, b, alpha, lane_max):
    register_gemm_lane_max(c, a, b, alpha, lane_max)


@njit
def _product_lane_max_of_transposed(c, a_t, b, alpha, lane_max):
    register_gemm_lane_max(c, a_t.T, b, alpha, lane_max)


# float32 takes the register kernel's epilogue (on AVX-512 CPUs), float64 BLAS and a loop
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=lambda d: d.__name__)
@pytest.mark.parametrize("transposed", [False, True], ids=["a", "a.T"])
@pytest.mark.parametrize("M, N, K", SHAPES)
def test_lane_maxima_are_those_of_the_product(M, N, K, transposed, dtype):
    rng = np.random.default_rng(M * 100 + N * 10 + K + 1)
    a = rng.standard_normal((M, K)).astype(dtype)
    b = rng.standard_normal((K, N)).astype(dtype)
    c_wide = np.full((M, N + 5), 9.0, dtype)
    c = c_wide[:, 2:2 + N]
    # maxima from an earlier product (each lane only grows), and rows past M that must stay
    before = np.where(rng.random((M + 2, LANES)) < 0.5, -np.inf, 0.1).astype(dtype)
    before[M:] = 1e30
    lane_max = before.copy()
    if transposed:
        _product_lane_max_of_transposed(c, np.ascontiguousarray(a.T), b, -0.5, lane_max)
    else:
        _product_lane_max(c, a, b, -0.5, lane_max)
    want = -0.5 * a.astype(np.float64) @ b
    tol = 8 * np.finfo(dtype).eps * (1 + np.abs(a) @ np.abs(b))
    assert np.all(np.abs(c - want) <= tol)
    np.testing.assert_array_equal(c_wide[:, :2], 9.0, "columns left of c")
    np.testing.assert_array_equal(c_wide[:, 2 + N:], 9.0, "columns right of c")
    want_lanes = before[:M].astype(np.float64)
    for j in range(N):
        want_lanes[:, j % LANES] = np.maximum(want_lanes[:, j % LANES], c[:, j])
    np.testing.assert_array_equal(lane_max[:M], want_lanes)
    assert np.all(lane_max[M:] == 1e30), "rows past the product's must not be written"


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=lambda d: d.__name__)
@pytest.mark.parametrize("M, N, K", [(25, 70, 9), (12, 32, 64), (7, 5, 3), (13, 96, 16),
                                     (9, 29, 40), (11, 8, 5)])
def test_lane_maxima_with_b_in_panels(M, N, K, dtype):
    """b given as panels (P, K, WIDE), column j in panel j // WIDE (the attention's k^T)."""
    rng = np.random.default_rng(M + N + K)
    a = rng.standard_normal((M, K)).astype(dtype)
    b = rng.standard_normal((K, N)).astype(dtype)
    panels_count = -(-N // WIDE)
    padded = np.full((K, panels_count * WIDE), np.nan, dtype)  # past N: never read
    padded[:, :N] = b
    panels = np.ascontiguousarray(padded.reshape(K, panels_count, WIDE).transpose(1, 0, 2))
    c = np.empty((M, N), dtype)
    lane_max = np.full((M, LANES), -np.inf, dtype)
    _product_lane_max(c, a, panels, 2.0, lane_max)
    want = 2.0 * a.astype(np.float64) @ b
    assert np.all(np.abs(c - want) <= 8 * np.finfo(dtype).eps * (1 + 2 * np.abs(a) @ np.abs(b)))
    np.testing.assert_array_equal(lane_max.max(axis=1), c.max(axis=1))


def _as_panels(b):
    """b (K, N) as panels (P, K, WIDE), column j in panel j // WIDE; NaN past N (never read)."""
    K, N = b.shape
    count = -(-N // WIDE)
    padded = np.full((K, count * WIDE), np.nan, b.dtype)
    padded[:, :N] = b
    return np.ascontiguousarray(padded.reshape(K, count, WIDE).transpose(1, 0, 2))


@njit
def _product_exp(c, a, b, alpha, shift):
    register_gemm_exp(c, a, b, alpha, shift)


@njit
def _product_softmax_grad(c, a, b, alpha, p, delta):
    register_gemm_softmax_grad(c, a, b, alpha, p, delta)


EPILOGUE_SHAPES = [(1, 1, 1), (12, 32, 5), (13, 33, 64), (25, 17, 3), (40, 48, 19),
                   (130, 40, 64), (30, 70, 0), (30, 40, 700), (19, 8, 33), (9, 29, 40)]


# float32 takes the epilogues in the register kernel (AVX-512 CPUs), float64 BLAS and loops
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=lambda d: d.__name__)
@pytest.mark.parametrize("panels", [False, True], ids=["rows", "panels"])
@pytest.mark.parametrize("M, N, K", EPILOGUE_SHAPES)
def test_exp_epilogue_gives_exp_of_the_shifted_product(M, N, K, panels, dtype):
    rng = np.random.default_rng(M * 7 + N * 3 + K)
    a = (rng.standard_normal((M, K)) / np.sqrt(max(K, 1))).astype(dtype)
    b = rng.standard_normal((K, N)).astype(dtype)
    # a padded tile's rows, as the backward passes them; rows that see no key shift by +inf
    c_wide = np.full((M, N + 16), 9.0, dtype)
    c = c_wide[:, :N]
    shift = rng.uniform(-1, 2, M).astype(dtype)
    shift[::5] = np.inf
    _product_exp(c, a, _as_panels(b) if panels else b, 0.75, shift)
    s = 0.75 * a.astype(np.float64) @ b
    want = np.exp(s - shift[:, None].astype(np.float64))
    # the product's rounding (relative to |a| |b|) times exp's slope, plus exp's 2 ulps
    tol = want * (8 * np.finfo(dtype).eps * (1 + 0.75 * np.abs(a) @ np.abs(b))
                  + 2 * np.finfo(dtype).eps)
    assert np.all(np.abs(c - want) <= tol)
    assert np.all(c[::5] == 0), "a row shifted by +inf is zeros"
    np.testing.assert_array_equal(c_wide[:, N:], 9.0, "the padding after each row")


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=lambda d: d.__name__)
@pytest.mark.parametrize("panels", [False, True], ids=["rows", "panels"])
@pytest.mark.parametrize("M, N, K", EPILOGUE_SHAPES)
def test_softmax_grad_epilogue_gives_p_times_the_shifted_product(M, N, K, panels, dtype):
    rng = np.random.default_rng(M * 5 + N * 11 + K)
    a = rng.standard_normal((M, K)).astype(dtype)
    b = rng.standard_normal((K, N)).astype(dtype)
    p_wide = rng.random((M, N + 16)).astype(dtype)
    c_wide = np.full((M, N + 16), 9.0, dtype)
    p, c = p_wide[:, :N], c_wide[:, :N]
    delta = rng.standard_normal(M).astype(dtype)
    _product_softmax_grad(c, a, _as_panels(b) if panels else b, 0.5, p, delta)
    want = p * (0.5 * a.astype(np.float64) @ b - delta[:, None])
    tol = 8 * np.finfo(dtype).eps * p * (1 + 0.5 * np.abs(a) @ np.abs(b) + np.abs(delta)[:, None])
    assert np.all(np.abs(c - want) <= tol)
    np.testing.assert_array_equal(c_wide[:, N:], 9.0, "the padding after each row")


def test_softmax_grad_epilogue_rejects_p_of_another_layout():
    a, b = np.ones((4, 3), np.float32), np.ones((3, 8), np.float32)
    with pytest.raises(ValueError, match="p must be laid out as c"):
        _product_softmax_grad(np.empty((4, 8), np.float32), a, b, 1.0,
                              np.ones((4, 9), np.float32)[:, :8], np.zeros(4, np.float32))


def test_avx512_and_avx2_fma_cpus_take_the_register_kernel():
    assert tile_products_in_registers("+sse4.2,+avx2,+avx512f,+avx512bw,-amx-tile")
    assert tile_products_in_registers("+sse4.2,+avx2,+fma,-avx512f,-avx512bw")
    assert not tile_products_in_registers("+sse4.2,+avx2,-fma,-avx512f")
    assert not tile_products_in_registers("+sse4.2,+avx,-avx2,+fma")
    assert not tile_products_in_registers("")


@njit
def _transpose(dst, src):
    transpose(dst, src)


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=lambda d: d.__name__)
@pytest.mark.parametrize("rows, cols", [(1, 1), (16, 16), (17, 5), (3, 40), (33, 31)])
def test_transpose_matches_numpy(rows, cols, dtype):
    src_wide = np.random.default_rng(rows * cols).standard_normal((rows, cols + 3)).astype(dtype)
    src = src_wide[:, 1:1 + cols]
    dst_wide = np.full((cols, rows + 4), 7.0, dtype)
    _transpose(dst_wide[:, 2:2 + rows], src)
    np.testing.assert_array_equal(dst_wide[:, 2:2 + rows], src.T)
    assert np.all(dst_wide[:, :2] == 7) and np.all(dst_wide[:, 2 + rows:] == 7), \
        "transpose wrote outside its destination"
