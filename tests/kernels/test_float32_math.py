"""The float32 exp, log, sine and cosine and the row primitives of the CPU softmax against
NumPy."""
import numpy as np
import pytest
from numba import njit

from seqattn.kernels.cpu.float32_math import exp_f32, log_f32, sin_cos_f32
from seqattn.kernels.cpu.llvm_vectors import AVX512
from seqattn.kernels.cpu.softmax_rows import (_exp_shifted_bits, _exp_shifted_scalef, exp_shifted,
                                              row_max, softmax_grad_row)

F32_EPS = float(np.finfo(np.float32).eps)


@njit
def _exp_all(x):
    out = np.empty_like(x)
    for i in range(x.shape[0]):
        out[i] = exp_f32(x[i])
    return out


@njit
def _exp_shifted_copy(x, shift):
    y = x.copy()
    total = exp_shifted(y, shift)
    return y, total


@njit
def _row_max(x):
    return row_max(x)


def test_exp_f32_is_within_two_ulps_over_the_softmax_range():
    x = np.linspace(-87.0, 0.0, 200_001, dtype=np.float32)
    want = np.exp(x.astype(np.float64))
    rel = np.abs(_exp_all(x) - want) / want
    assert rel.max() <= 2 * F32_EPS, f"max relative error {rel.max():.3g}"


@njit
def _log_all(x):
    out = np.empty_like(x)
    for i in range(x.shape[0]):
        out[i] = log_f32(x[i])
    return out


@njit
def _sin_cos_all(u):
    sine, cosine = np.empty_like(u), np.empty_like(u)
    for i in range(u.shape[0]):
        sine[i], cosine[i] = sin_cos_f32(u[i])
    return sine, cosine


def test_log_f32_is_within_two_ulps_of_its_result_or_of_one():
    x = np.concatenate([np.geomspace(1e-37, 1e37, 200_001), np.linspace(0.5, 2.0, 100_001)])
    x = x.astype(np.float32)
    want = np.log(x.astype(np.float64))
    # near x = 1 the result is small: its error is measured against the ulps of 1 there
    ulps = np.maximum(np.spacing(np.abs(want).astype(np.float32)), F32_EPS)
    assert np.max(np.abs(_log_all(x) - want) / ulps) <= 2
    assert _log_all(np.array([0.0], np.float32))[0] == -np.inf


def test_sin_cos_f32_keep_sine_relative_near_zero_over_a_quarter_turn():
    u = np.concatenate([np.linspace(0.0, np.pi / 2, 200_001),
                        np.geomspace(1e-30, 1.0, 10_001)]).astype(np.float32)
    sine, cosine = _sin_cos_all(u)
    wide = u.astype(np.float64)
    positive = u > 0
    rel = np.abs(sine[positive] - np.sin(wide[positive])) / np.sin(wide[positive])
    assert rel.max() <= 2 * F32_EPS, f"sine's max relative error {rel.max():.3g}"
    assert np.max(np.abs(cosine - np.cos(wide))) <= 2 * F32_EPS
    assert sine[0] == 0 and cosine[0] == 1


def test_exp_f32_underflows_to_exact_zero():
    x = np.array([-np.inf, -1e30, -88.1, -200.0], np.float32)
    assert np.all(_exp_all(x) == 0.0), "masked (-inf) and tiny scores must weigh exactly 0"


def test_exp_shifted_returns_the_row_sum_in_both_dtypes():
    rng = np.random.default_rng(0)
    for dtype in (np.float32, np.float64):
        x = (rng.standard_normal(1001) * 5).astype(dtype)
        x[::7] = -np.inf
        shift = dtype(x.max() - 1.5)
        y, total = _exp_shifted_copy(x, shift)
        # The subtraction happens in the row's dtype; only the exp itself is under test.
        want = np.exp((x - shift).astype(np.float64))
        np.testing.assert_allclose(y, want, rtol=4 * np.finfo(dtype).eps, atol=0)
        np.testing.assert_allclose(total, want.sum(), rtol=1e-5 if dtype == np.float32 else 1e-12)


def test_row_max_matches_numpy_with_negative_and_masked_values():
    rng = np.random.default_rng(1)
    for dtype in (np.float32, np.float64):
        for n in (1, 7, 64, 1000):
            x = (rng.standard_normal(n) * 100 - 50).astype(dtype)
            x[rng.random(n) < 0.3] = -np.inf
            assert _row_max(x) == x.max(), f"{dtype.__name__} n={n}"
        assert _row_max(np.full(5, -np.inf, dtype)) == -np.inf, "an all-masked row's max is -inf"
        assert _row_max(np.array([-0.0, -3.0], dtype)) == 0.0


# The softmax's vector exp: with scalef (AVX-512 CPUs) and with the exponent bits (the others).
# The bits path is plain IR any CPU runs; the scalef one only where the host has AVX-512.
EXP_PATHS = {"bits": _exp_shifted_bits}
if AVX512:
    EXP_PATHS["scalef"] = _exp_shifted_scalef


@pytest.mark.parametrize("path", sorted(EXP_PATHS))
def test_softmax_exp_is_within_two_ulps_and_zero_where_exp_f32_is(path):
    exp_row = _exp_row(EXP_PATHS[path])
    # every float32 step over the softmax's range near 0 and a dense grid down to underflow,
    # plus a length that leaves a masked tail
    x = np.concatenate([np.linspace(-87.0, 0.0, 400_003, dtype=np.float32),
                        -np.arange(1, 20001, dtype=np.float32) * F32_EPS])
    y, total = exp_row(x, np.float32(0))
    want = np.exp(x.astype(np.float64))
    rel = np.abs(y - want) / want
    assert rel.max() <= 2 * F32_EPS, f"max relative error {rel.max() / F32_EPS:.2f} ulps"
    np.testing.assert_allclose(total, want.sum(), rtol=1e-5)
    assert exp_row(np.zeros(3, np.float32), np.float32(0))[0].tolist() == [1, 1, 1], "exp(0) = 1"
    # zero exactly where exp_f32 gives zero: masked (-inf) scores and underflow
    low = np.array([-np.inf, -1e30, -88.1, -200.0, -87.7, -87.3], np.float32)
    got, low_total = exp_row(low, np.float32(0))
    np.testing.assert_array_equal(got == 0, _exp_all(low) == 0)
    assert np.all(got[:5] == 0) and got[5] > 0 and low_total == got[5]


def _exp_row(intrinsic_fn):
    @njit
    def exp_row(x, shift):
        y = x.copy()
        total = intrinsic_fn(y, shift)
        return y, total
    return exp_row


@njit
def _tile_rows(tile, ds, shift):
    """row_max, exp_shifted and softmax_grad_row on the rows of 2-D views (layout "A" when
    padded), as the attention kernels call them on their padded score tiles."""
    maxima = np.empty(tile.shape[0], tile.dtype)
    sums = np.empty(tile.shape[0], tile.dtype)
    for r in range(tile.shape[0]):
        maxima[r] = row_max(tile[r])
        sums[r] = exp_shifted(tile[r], shift)
        softmax_grad_row(ds[r], tile[r], shift)
    return maxima, sums


def _tile_view(wide, cols, layout):
    return {"contiguous": np.ascontiguousarray(wide[:, :cols]), "padded rows": wide[:, :cols],
            "strided columns": wide[:, :2 * cols:2]}[layout]


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=lambda d: d.__name__)
@pytest.mark.parametrize("layout", ["contiguous", "padded rows", "strided columns"])
def test_row_primitives_on_the_rows_of_a_tile(layout, dtype):
    """Rows of a padded tile (unit stride, layout "A") take the vector paths, rows of a column
    slice with stride 2 the loops; lengths around the 16 lanes leave masked tails."""
    rng = np.random.default_rng(2)
    for cols in (1, 15, 16, 37):
        wide = (rng.standard_normal((3, 2 * cols + 16)) * 4).astype(dtype)
        wide[:, ::5] = -np.inf
        wide_ds = rng.standard_normal(wide.shape).astype(dtype)
        tile, ds = _tile_view(wide, cols, layout), _tile_view(wide_ds, cols, layout)
        before, ds_before = tile.copy(), ds.copy()
        padding, ds_padding = wide[:, 2 * cols:].copy(), wide_ds[:, 2 * cols:].copy()
        shift = dtype(1.5)
        maxima, sums = _tile_rows(tile, ds, shift)
        np.testing.assert_array_equal(maxima, before.max(axis=1))
        # the subtraction happens in the row's dtype, as in the kernels
        want = np.exp((before - shift).astype(np.float64))
        np.testing.assert_allclose(tile, want, rtol=4 * np.finfo(dtype).eps, atol=0)
        np.testing.assert_allclose(sums, want.sum(axis=1), rtol=1e-5)
        # dS = P * (dP - delta), P the exponentials just computed
        want_ds = tile.astype(np.float64) * (ds_before.astype(np.float64) - shift)
        np.testing.assert_allclose(ds, want_ds, rtol=4 * np.finfo(dtype).eps, atol=1e-30)
        np.testing.assert_array_equal(wide[:, 2 * cols:], padding, "wrote past the rows")
        np.testing.assert_array_equal(wide_ds[:, 2 * cols:], ds_padding, "wrote past the rows")
