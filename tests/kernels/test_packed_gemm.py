"""packed_gemm (the linear layers' products: dW = dout^T x, y = x W^T, dx = dout W) against
NumPy: both paths (register-blocked, and BLAS as dW on CPUs without AVX-512, the encoder's
x W^T and dout W on AVX2 CPUs and float64 take), with each operand stored as is or transposed,
odd shapes around the register blocks and the chunks of the inner dimension, accumulation,
views of wider arrays; and gemm_tn's size rule."""
import numpy as np
import pytest
from numba import njit

from gradcheck import assert_float32_close
from seqattn.kernels.cpu.gemm.packed_gemm import (MC, MIN_WORK, TN_MIN_WORK, driver_address,
                                             gemm_in_registers, gemm_through_blas, gemm_tn,
                                             packed_gemm, strip_block)


@njit
def _dispatched(c, a, b, transpose_a, transpose_b, accumulate):
    packed_gemm(c, a, b, transpose_a, transpose_b, accumulate, True)


@njit
def _dispatched_to_blas(c, a, b, transpose_a, transpose_b, accumulate):
    packed_gemm(c, a, b, transpose_a, transpose_b, accumulate, False)


PATHS = {"registers": gemm_in_registers, "blas": gemm_through_blas, "dispatched": _dispatched,
         "dispatched to blas": _dispatched_to_blas}
# (transpose a, transpose b): dW = dout^T x, y = x W^T, dx = dout W, and the fourth.
LAYOUTS = [(True, False), (False, True), (False, False), (True, True)]

# (K, M, N): rows past 12-row blocks (tails of 6, 3, 1), columns past 32 and 16, inner
# dimensions of one, two and three chunks (KC = 256), more rows than one strip (MC = 96), more
# columns than one chunk of b (NC = 512), and an empty inner dimension.
SHAPES = [(1, 1, 1), (5, 13, 33), (300, 25, 17), (513, 7, 40), (260, 100, 3), (3, 2, 530),
          (0, 4, 6), (257, 203, 77)]


def _views(rng, K, M, N, transpose_a, transpose_b, dtype):
    """a (K, M) or (M, K), b (K, N) or (N, K) and c (M, N) as column blocks of wider arrays,
    as the linear kernels pass a thread's block of dout's columns and of dW's rows."""
    a_shape, b_shape = (K, M) if transpose_a else (M, K), (N, K) if transpose_b else (K, N)
    a = rng.standard_normal((a_shape[0], a_shape[1] + 3)).astype(dtype)[:, 1:1 + a_shape[1]]
    b = rng.standard_normal((b_shape[0], b_shape[1] + 2)).astype(dtype)[:, 2:]
    c_wide = rng.standard_normal((M, N + 5)).astype(dtype)
    return a, b, c_wide


def _op(x, transpose):
    return x.T if transpose else x


@pytest.mark.parametrize("path", sorted(PATHS))
@pytest.mark.parametrize("accumulate", [False, True])
@pytest.mark.parametrize("transpose_a, transpose_b", LAYOUTS)
@pytest.mark.parametrize("K, M, N", SHAPES)
def test_packed_gemm_matches_numpy_in_float32(K, M, N, transpose_a, transpose_b, accumulate,
                                              path):
    rng = np.random.default_rng(K * 10_000 + M * 100 + N)
    a, b, c_wide = _views(rng, K, M, N, transpose_a, transpose_b, np.float32)
    before = c_wide.copy()
    c = c_wide[:, 2:2 + N]
    PATHS[path](c, a, b, transpose_a, transpose_b, accumulate)
    op_a, op_b = _op(a, transpose_a), _op(b, transpose_b)
    start = before[:, 2:2 + N].astype(np.float64) if accumulate else 0
    exact = op_a.astype(np.float64) @ op_b.astype(np.float64) + start
    naive = op_a @ op_b + (before[:, 2:2 + N] if accumulate else 0)
    assert_float32_close(f"{path} {K}x{M}x{N}", c, exact, naive)
    np.testing.assert_array_equal(c_wide[:, :2], before[:, :2], "columns left of c")
    np.testing.assert_array_equal(c_wide[:, 2 + N:], before[:, 2 + N:], "columns right of c")


@pytest.mark.parametrize("path", ["blas", "dispatched"])
@pytest.mark.parametrize("transpose_a, transpose_b", LAYOUTS)
def test_packed_gemm_in_float64(path, transpose_a, transpose_b):
    rng = np.random.default_rng(7)
    a, b, c_wide = _views(rng, 300, 13, 33, transpose_a, transpose_b, np.float64)
    before = c_wide.copy()
    PATHS[path](c_wide[:, 2:35], a, b, transpose_a, transpose_b, True)
    want = before[:, 2:35] + _op(a, transpose_a) @ _op(b, transpose_b)
    np.testing.assert_allclose(c_wide[:, 2:35], want, rtol=1e-12)


@pytest.mark.parametrize("transpose_a, transpose_b", LAYOUTS)
def test_inputs_are_left_unchanged(transpose_a, transpose_b):
    rng = np.random.default_rng(3)
    a, b, c_wide = _views(rng, 300, 25, 40, transpose_a, transpose_b, np.float32)
    a_before, b_before = a.copy(), b.copy()
    gemm_in_registers(c_wide[:, :40], a, b, transpose_a, transpose_b, False)
    np.testing.assert_array_equal(a, a_before)
    np.testing.assert_array_equal(b, b_before)


@njit
def _strip_blocks(tasks, M):
    return [strip_block(t, tasks, M) for t in range(tasks)]


@pytest.mark.parametrize("transpose_a, transpose_b", LAYOUTS)
def test_rows_in_whole_strips_get_the_bits_of_the_whole_product(transpose_a, transpose_b):
    """The linear layers split c's rows over threads in whole strips of MC rows
    (``strip_block``): the blocks cover the rows, and each block's product has the bits of the
    same rows of a product of all of them, whatever the number of blocks. 2 * MC + 11 rows:
    the last strip has fewer than 25 (where the kernel's rounding differs, see strip_block)."""
    M = 2 * MC + 11
    rng = np.random.default_rng(11)
    a, b, _ = _views(rng, 300, M, 77, transpose_a, transpose_b, np.float32)
    whole = np.empty((M, 77), np.float32)
    gemm_in_registers(whole, a, b, transpose_a, transpose_b, False)
    for tasks in (1, 2, 3, 4):
        blocks = _strip_blocks(tasks, M)
        assert blocks[0][0] == 0 and blocks[-1][1] == M
        assert all(r1 == next_r0 for (_, r1), (next_r0, _) in zip(blocks, blocks[1:]))
        for r0, r1 in blocks:
            part = np.empty((r1 - r0, 77), np.float32)
            gemm_in_registers(part, a[:, r0:r1] if transpose_a else a[r0:r1], b, transpose_a,
                              transpose_b, False)
            np.testing.assert_array_equal(part, whole[r0:r1], f"{tasks} tasks, rows {r0}:{r1}")


@njit
def _tn(c, a, b, accumulate, driver):
    gemm_tn(c, a, b, accumulate, driver)


@pytest.mark.parametrize("K", [MIN_WORK // (64 * 64) // 4, MIN_WORK // (64 * 64)])
def test_gemm_tn_takes_the_path_the_size_and_driver_ask_for(K):
    """Bit for bit the result of the path asked for (the two round apart): registers from
    TN_MIN_WORK multiply-adds (MIN_WORK on AVX-512, any on AVX2) when given the driver's
    address, BLAS below it or given 0."""
    rng = np.random.default_rng(K)
    a, b = (rng.standard_normal((K, 64), dtype=np.float32) for _ in range(2))
    results = {}
    for name, call in [("registers", gemm_in_registers), ("blas", gemm_through_blas)]:
        results[name] = np.zeros((64, 64), np.float32)
        call(results[name], a, b, True, False, False)
    assert not np.array_equal(results["registers"], results["blas"]), "paths should round apart"
    for driver in (driver_address(), 0):
        got = np.zeros((64, 64), np.float32)
        _tn(got, a, b, False, driver)
        wanted = "registers" if driver and K * 64 * 64 >= TN_MIN_WORK else "blas"
        np.testing.assert_array_equal(got, results[wanted], f"driver={driver}")
