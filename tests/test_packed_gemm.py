"""packed_gemm.gemm_tn (the linear layers' weight-gradient product) against NumPy: both paths
(register-blocked, and BLAS as CPUs without AVX-512 and float64 take), odd shapes around the
register blocks and the chunks of the inner dimension, accumulation, views of wider arrays."""
import numpy as np
import pytest
from numba import njit

from gradcheck import assert_float32_close
from seqattn.kernels.cpu.packed_gemm import (MIN_WORK, blas_gemm_tn, gemm_tn,
                                             register_gemm_tn)


@njit
def _dispatched(c, a, b, accumulate):
    gemm_tn(c, a, b, accumulate, True)


@njit
def _dispatched_to_blas(c, a, b, accumulate):
    gemm_tn(c, a, b, accumulate, False)


PATHS = {"registers": register_gemm_tn, "blas": blas_gemm_tn, "dispatched": _dispatched,
         "dispatched to blas": _dispatched_to_blas}

# (K, M, N): rows past 12-row blocks (tails of 6, 3, 1), columns past 32 and 16, inner
# dimensions of one, two and three chunks (KC = 256), more rows than one strip (MC = 96), more
# columns than one chunk of b (NC = 512), and an empty inner dimension.
SHAPES = [(1, 1, 1), (5, 13, 33), (300, 25, 17), (513, 7, 40), (260, 100, 3), (3, 2, 530),
          (0, 4, 6)]


def _views(rng, K, M, N, dtype):
    """a (K, M), b (K, N) and c (M, N) as column blocks of wider arrays, as the linear kernels
    pass a thread's block of dout's columns and of dW's rows."""
    a = rng.standard_normal((K, M + 3)).astype(dtype)[:, 1:1 + M]
    b = rng.standard_normal((K, N + 2)).astype(dtype)[:, 2:]
    c_wide = rng.standard_normal((M, N + 5)).astype(dtype)
    return a, b, c_wide


@pytest.mark.parametrize("path", sorted(PATHS))
@pytest.mark.parametrize("accumulate", [False, True])
@pytest.mark.parametrize("K, M, N", SHAPES)
def test_gemm_tn_matches_numpy_in_float32(K, M, N, accumulate, path):
    rng = np.random.default_rng(K * 10_000 + M * 100 + N)
    a, b, c_wide = _views(rng, K, M, N, np.float32)
    before = c_wide.copy()
    c = c_wide[:, 2:2 + N]
    PATHS[path](c, a, b, accumulate)
    start = before[:, 2:2 + N].astype(np.float64) if accumulate else 0
    exact = a.T.astype(np.float64) @ b.astype(np.float64) + start
    naive = a.T @ b + (before[:, 2:2 + N] if accumulate else 0)
    assert_float32_close(f"{path} {K}x{M}x{N}", c, exact, naive)
    np.testing.assert_array_equal(c_wide[:, :2], before[:, :2], "columns left of c")
    np.testing.assert_array_equal(c_wide[:, 2 + N:], before[:, 2 + N:], "columns right of c")


@pytest.mark.parametrize("path", ["blas", "dispatched"])
def test_gemm_tn_in_float64(path):
    rng = np.random.default_rng(7)
    a, b, c_wide = _views(rng, 300, 13, 33, np.float64)
    before = c_wide.copy()
    PATHS[path](c_wide[:, 2:35], a, b, True)
    np.testing.assert_allclose(c_wide[:, 2:35], before[:, 2:35] + a.T @ b, rtol=1e-12)


def test_inputs_are_left_unchanged():
    rng = np.random.default_rng(3)
    a, b, c_wide = _views(rng, 300, 25, 40, np.float32)
    a_before, b_before = a.copy(), b.copy()
    register_gemm_tn(c_wide[:, :40], a, b, False)
    np.testing.assert_array_equal(a, a_before)
    np.testing.assert_array_equal(b, b_before)



@pytest.mark.parametrize("K", [MIN_WORK // (64 * 64) // 4, MIN_WORK // (64 * 64)])
def test_dispatch_takes_the_path_the_size_and_flag_ask_for(K):
    """Bit for bit the result of the path asked for (the two round apart): registers from
    MIN_WORK multiply-adds when ``in_registers``, BLAS below it or without the flag."""
    rng = np.random.default_rng(K)
    a, b = (rng.standard_normal((K, 64), dtype=np.float32) for _ in range(2))
    results = {}
    for path in PATHS:
        results[path] = np.zeros((64, 64), np.float32)
        PATHS[path](results[path], a, b, False)
    assert not np.array_equal(results["registers"], results["blas"]), "paths should round apart"
    wanted = "registers" if K * 64 * 64 >= MIN_WORK else "blas"
    np.testing.assert_array_equal(results["dispatched"], results[wanted])
    np.testing.assert_array_equal(results["dispatched to blas"], results["blas"])
