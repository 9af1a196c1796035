"""The bf16x3 building blocks of the AMX forward (seqattn/kernels/cpu/bf16x3_gemm.py): the exact
three-term split, the tile layouts of k and v, and (where the CPU has AMX) the six-product tile
kernel at float32 accuracy."""
import numpy as np
import pytest
from numba import njit

from seqattn.kernels.cpu.gemm.amx_tiles import (AMX_BF16, has_amx_bf16, tile_config,
                                           tile_configuration, tile_release)
from seqattn.kernels.cpu.gemm.bf16x3_gemm import (aligned_empty, exp_split_probabilities,
                                             keys_as_columns, pairs_as_depth, product_32x32,
                                             rows_as_depth, split_columns, split_probabilities,
                                             split_rows)
from seqattn.kernels.cpu.softmax_rows import exp_shifted

needs_amx = pytest.mark.skipif(not AMX_BF16, reason="the CPU (or the OS) offers no AMX tiles")


def bf16_value(bits):
    """float64 values of bf16 bit patterns (uint16)."""
    return (np.asarray(bits, np.uint32) << 16).view(np.float32).astype(np.float64)


def term_sum(terms):
    return bf16_value(terms[0]) + bf16_value(terms[1]) + bf16_value(terms[2])


def test_amx_features_are_read_from_llvm_feature_strings():
    assert has_amx_bf16("+avx512f,+amx-tile,+amx-bf16,-amx-int8")
    assert not has_amx_bf16("+avx512f,+amx-tile,-amx-bf16")
    assert not has_amx_bf16("+avx512f,-amx-tile,+amx-bf16")


def test_the_three_terms_add_up_to_each_float_exactly():
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.standard_normal(500), rng.standard_normal(200) * 1e30,
                        rng.standard_normal(200) * 1e-30, [0.0, -0.0, 1.0, -3.0]])
    x = x.astype(np.float32)[None, None]
    terms = np.empty((3, 1, 1, x.shape[2] + 5, 1), np.uint16)
    split_rows(terms, x[..., None], np.float32(1))
    got = term_sum(terms[:, 0, 0, :, 0])
    assert np.array_equal(got[:x.shape[2]], x[0, 0].astype(np.float64))
    assert not got[x.shape[2]:].any(), "padding rows must be zero"


def test_split_rows_scales_before_splitting():
    x = np.random.default_rng(1).standard_normal((2, 3, 4, 5)).astype(np.float32)
    terms = np.empty((3, 2, 3, 4, 5), np.uint16)
    split_rows(terms, x, np.float32(0.3))
    assert np.array_equal(term_sum(terms), (np.float32(0.3) * x).astype(np.float64))


def test_probabilities_are_split_inside_their_keys_and_zero_outside():
    x = np.random.default_rng(2).random(64).astype(np.float32)
    terms = np.full((3, 2, 64), 7, np.uint16)
    split_probabilities(terms, 1, x, 5, 50)
    want = np.where((np.arange(64) >= 5) & (np.arange(64) < 50), x, 0).astype(np.float64)
    assert np.array_equal(term_sum(terms[:, 1]), want)
    assert (terms[:, 0] == 7).all(), "another row was written"


@pytest.mark.parametrize("first, stop", [(0, 128), (40, 100), (32, 96), (33, 63), (0, 0)])
def test_split_windows_whole_pairs_and_edges(first, stop):
    # 128 floats are four pairs of vectors: windows whose edges cut a pair, fall on pair
    # boundaries, lie inside one pair, or are empty
    x = np.random.default_rng(6).standard_normal(128).astype(np.float32)
    terms = np.full((3, 1, 128), 7, np.uint16)
    split_probabilities(terms, 0, x, first, stop)
    inside = (np.arange(128) >= first) & (np.arange(128) < stop)
    assert np.array_equal(term_sum(terms[:, 0]), np.where(inside, x, 0).astype(np.float64))


@njit
def _exp_then_split(terms, x, shift, first, stop):
    probabilities = x[first:stop].copy()
    total = exp_shifted(probabilities, shift)
    window = np.zeros_like(x)
    window[first:stop] = probabilities
    split_probabilities(terms, 0, window, first, stop)
    return total


@pytest.mark.parametrize("first, stop", [(0, 128), (40, 100), (33, 63)])
def test_exp_and_split_in_one_pass_match_the_two_passes(first, stop):
    x = (np.random.default_rng(7).standard_normal(128) * 4).astype(np.float32)
    x[50] = -np.inf  # a masked score: probability 0
    x[5] = np.nan  # outside the windows from 33 on; inside (0, 128) its exp is 0, both ways
    shift = np.float32(x[first:stop][np.isfinite(x[first:stop])].max())
    fused, two_passes = np.full((3, 1, 128), 7, np.uint16), np.full((3, 1, 128), 7, np.uint16)
    total = exp_split_probabilities(fused, 0, x, shift, first, stop)
    want_total = _exp_then_split(two_passes, x, shift, first, stop)
    assert np.array_equal(fused, two_passes)
    assert total == pytest.approx(want_total, rel=1e-6)
    assert term_sum(fused[:, 0])[50] == 0


def test_keys_as_columns_layout():
    B, H, M, D = 2, 1, 40, 64  # 40 keys: three 16-key columns, the last padded
    x = np.random.default_rng(3).standard_normal((B, H, M, D)).astype(np.float32)
    tiles = np.empty((3, B, H, 3, D // 32, 16, 32), np.uint16)
    keys_as_columns(tiles, x)
    values = term_sum(tiles)
    padded = np.zeros((B, H, 48, D))
    padded[:, :, :M] = x
    for b in range(B):
        for c in range(3):
            for s in range(2):
                for pair in range(16):
                    for col in range(16):
                        for e in range(2):
                            assert values[b, 0, c, s, pair, 2 * col + e] == \
                                padded[b, 0, 16 * c + col, 32 * s + 2 * pair + e]


def test_rows_as_depth_layout():
    B, H, M, D = 1, 2, 40, 32  # 40 rows: two 32-row depth steps, the last padded
    x = np.random.default_rng(4).standard_normal((B, H, M, D)).astype(np.float32)
    tiles = np.empty((3, B, H, D // 16, 2, 16, 32), np.uint16)
    rows_as_depth(tiles, x)
    values = term_sum(tiles)
    padded = np.zeros((B, H, 64, D))
    padded[:, :, :M] = x
    for c in range(2):
        for s in range(2):
            for pair in range(16):
                for col in range(16):
                    for e in range(2):
                        assert values[0, 1, c, s, pair, 2 * col + e] == \
                            padded[0, 1, 32 * s + 2 * pair + e, 16 * c + col]


def test_pairs_as_depth_takes_a_window_of_rows_and_columns_of_a_padded_tile():
    """Rows [first, first + count) of x, columns [column, column + 32), from a 2-D view with
    padded rows (as the score tiles are): rows past count are zero."""
    padded = np.random.default_rng(5).standard_normal((50, 80)).astype(np.float32)
    x = padded[:, :64]
    tiles = np.full((3, 2, 2, 16, 32), 7, np.uint16)
    pairs_as_depth(tiles, x, 3, 40, 16)
    values = term_sum(tiles)
    want = np.zeros((64, 32))
    want[:40] = x[3:43, 16:48]
    for c in range(2):
        for s in range(2):
            for pair in range(16):
                for col in range(16):
                    for e in range(2):
                        assert values[c, s, pair, 2 * col + e] == \
                            want[32 * s + 2 * pair + e, 16 * c + col]


def test_split_columns_is_the_scaled_transpose_padded_with_zero_columns():
    x = np.random.default_rng(6).standard_normal((2, 3, 50, 64)).astype(np.float32)
    terms = np.full((3, 2, 3, 64, 96), 7, np.uint16)
    split_columns(terms, x, np.float32(0.5))
    values = term_sum(terms)
    assert np.array_equal(values[..., :50], 0.5 * x.transpose(0, 1, 3, 2).astype(np.float64))
    assert not values[..., 50:].any()


def test_aligned_empty_starts_on_a_cache_line():
    for size in (1, 17, 1000):
        for dtype in (np.uint16, np.float32):
            assert aligned_empty(size, dtype).ctypes.data % 64 == 0


@njit
def _products(c, a, b, config, accumulate):
    """c (32, n) (+)= a's rows @ b over all of b's depth, block by block."""
    tile_config(config)
    depth_steps = b.shape[2]
    column_step = depth_steps * 512
    for j in range(0, c.shape[1], 32):
        product_32x32(c, j, c.shape[1] * 4, accumulate, a, 0, a.shape[2] * 2,
                      b, j // 16 * column_step, column_step, depth_steps)
    tile_release()


@needs_amx
@pytest.mark.parametrize("accumulate", [False, True])
def test_six_tile_products_keep_float32_accuracy(accumulate):
    rng = np.random.default_rng(5)
    K, n = 96, 64
    a = rng.standard_normal((32, K)).astype(np.float32)
    b = rng.standard_normal((n, K)).astype(np.float32)
    a_terms = np.empty((3, 1, 1, 32, K), np.uint16)
    split_rows(a_terms, a[None, None], np.float32(1))
    b_tiles = aligned_empty(3 * (n // 16) * (K // 32) * 512, np.uint16).reshape(
        (3, n // 16, K // 32, 16, 32))
    keys_as_columns(b_tiles.reshape((3, 1, 1) + b_tiles.shape[1:]), b[None, None])
    c = aligned_empty(32 * n, np.float32).reshape((32, n))
    c[:] = 1.5
    _products(c, a_terms.reshape((3, 32, K)), b_tiles, tile_configuration(), accumulate)
    want = a.astype(np.float64) @ b.T.astype(np.float64) + (1.5 if accumulate else 0)
    float32_error = np.abs((a @ b.T + (1.5 if accumulate else 0)) - want).max()
    assert np.abs(c - want).max() <= 2 * float32_error
