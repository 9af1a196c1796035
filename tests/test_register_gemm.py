"""register_gemm (the attention tiles' matrix product) and transpose against NumPy."""
import numpy as np
import pytest
from numba import njit

from seqattn.kernels.cpu.llvm_vectors import LANES
from seqattn.kernels.cpu.register_gemm import (WIDE, blas_product, register_gemm,
                                               register_gemm_lane_max,
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
SHAPES = [(1, 1, 1), (2, 1, 1), (1, 7, 2), (12, 32, 5), (13, 33, 64), (25, 17, 3), (30, 70, 0),
          (40, 48, 19), (7, 16, 9), (130, 40, 64), (30, 40, 700)]


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
@pytest.mark.parametrize("M, N, K", [(25, 70, 9), (12, 32, 64), (7, 5, 3), (13, 96, 16)])
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


def test_only_avx512_cpus_take_the_register_kernel():
    assert tile_products_in_registers("+sse4.2,+avx2,+avx512f,+avx512bw,-amx-tile")
    assert not tile_products_in_registers("+sse4.2,+avx2,+fma,-avx512f,-avx512bw")
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
