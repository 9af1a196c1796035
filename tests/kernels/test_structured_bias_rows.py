"""The structured biases' tile kernels, both paths (tables in AVX-512 registers, Numba loops),
against NumPy float64: distance biases and their gradients (open case: no cell, types or
envelope), pair codes and theirs, and the relative form's runs for consecutive keys.

Tiles have row lengths around the 16-lane vectors (tails), tables around the 16/32/64 entries
that registers hold (and past them, where the register path falls back to the loops), keys at
d = 0, beyond r_max and beyond the cutoff, and a NaN position."""
import numpy as np
import pytest

from seqattn.kernels.cpu import attention_bias as ab
from seqattn.kernels.cpu.llvm_vectors import has_avx512
from seqattn.kernels.cpu.structured_bias_rows import IN_REGISTERS

needs_avx512 = pytest.mark.skipif(not IN_REGISTERS, reason="the CPU has no AVX-512")
PATHS = [pytest.param("registers", marks=needs_avx512), "loops"]
DISTANCE = {"registers": (ab.add_open_distance_in_registers,
                          ab.open_distance_grads_in_registers),
            "loops": (ab.add_open_distance_loops, ab.open_distance_grads_loops)}
CODES = {"registers": (ab.add_codes_in_registers, ab.code_grads_in_registers),
         "loops": (ab.add_codes_loops, ab.code_grads_loops)}
COLUMNS = [1, 16, 17, 45]
R_MAX = 2.0


def test_the_register_paths_need_avx512f():
    assert has_avx512("+sse4.2,+avx2,+avx512f,+avx512bw,-amx-tile")
    assert not has_avx512("+sse4.2,+avx2,+fma,-avx512f,-avx512bw")
    assert not has_avx512("")


def _distance_tile(rows, cols, seed):
    """x_rows (3, rows), y_cols (3, cols) with key 0 on query 0 (d = 0), key 1 NaN, the rest
    in a box where about half the pairs lie beyond r_max."""
    rng = np.random.default_rng(seed)
    x_rows, y_cols = rng.uniform(0, 3.0, (3, rows)), rng.uniform(0, 3.0, (3, cols))
    y_cols[:, 0] = x_rows[:, 0]
    if cols > 1:
        y_cols[1, 1] = np.nan
    return x_rows, y_cols


def _distance_reference(x_rows, y_cols, tab, g, cutoff):
    """(bias, dtab, dx_rows, dy_cols) in float64 by the formulas of structured_bias_math."""
    C = len(tab)
    r = x_rows[:, :, None] - y_cols[:, None, :]
    d = np.sqrt((r * r).sum(axis=0))
    u = d * (C - 1) / R_MAX
    below = u < C - 1
    u = np.where(below, u, C - 1)
    k = np.minimum(np.floor(u), C - 2).astype(int)
    w = u - k
    visible = d <= cutoff
    bias = np.where(visible, tab[k] + w * (tab[k + 1] - tab[k]), -np.inf)
    g = np.where(visible, g, 0)
    dtab = np.zeros(C)
    np.add.at(dtab, k, g * (1 - w))
    np.add.at(dtab, k + 1, g * w)
    slope = np.where(below, (tab[k + 1] - tab[k]) * (C - 1) / R_MAX, 0)
    with np.errstate(invalid="ignore", divide="ignore"):
        coef = np.where(visible & (d > 0), g * slope / d, 0)
    terms = np.nan_to_num(coef * r)
    return bias, dtab, terms.sum(axis=2), -terms.sum(axis=1)


def _assert_close(name, got, want, scale):
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5 * scale, err_msg=name)


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("cols", COLUMNS)
@pytest.mark.parametrize("C", [2, 7, 33, 64, 65])
@pytest.mark.parametrize("cutoff", [np.inf, 1.5])
def test_open_distance_tile_matches_numpy(path, cols, C, cutoff):
    add, grads = DISTANCE[path]
    rows = 5
    rng = np.random.default_rng(C * 100 + cols)
    x_rows, y_cols = _distance_tile(rows, cols, C + cols)
    tab = rng.standard_normal(C)
    s0 = rng.standard_normal((rows, cols))
    g = rng.standard_normal((rows, cols))
    bias, dtab, dx, dy = _distance_reference(x_rows, y_cols, tab, g, cutoff)
    f = np.float32
    args = (x_rows.astype(f), y_cols.astype(f), tab.astype(f), f((C - 1) / R_MAX), f(C - 1),
            f(1))
    s = s0.astype(f)
    add(s, *args, f(cutoff))
    _assert_close("scores", s, s0 + bias, 1)
    ds = np.where(np.isfinite(bias), g, 0).astype(f)  # hidden pairs have dS = 0
    got_dtab = np.zeros((ab.LANES, C), f)
    dx_wide, dy_wide = np.ones((3, rows + 2), f), np.ones((3, cols + 2), f)
    grads(ds, *args, f(0), f(cutoff), got_dtab, dx_wide[:, 1:-1], dy_wide[:, 1:-1])
    _assert_close("table", got_dtab.sum(axis=0), dtab, np.abs(g).sum())
    _assert_close("x", dx_wide[:, 1:-1] - 1, dx, np.abs(dx).max() + 1)
    _assert_close("y", dy_wide[:, 1:-1] - 1, dy, np.abs(dy).max() + 1)
    assert np.all(dx_wide[:, [0, -1]] == 1) and np.all(dy_wide[:, [0, -1]] == 1), \
        "positions outside the tile changed"


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("cols", COLUMNS)
@pytest.mark.parametrize("C", [3, 8, 9, 16, 17, 64, 65])
@pytest.mark.parametrize("code_dtype", [np.int8, np.int16, np.int32],
                         ids=lambda d: np.dtype(d).name)
def test_code_tile_matches_numpy(path, cols, C, code_dtype):
    add, grads = CODES[path]
    rows = 4
    rng = np.random.default_rng(C * 100 + cols)
    codes_wide = rng.integers(-1, C, (rows, cols + 3)).astype(code_dtype)  # -1: not connected
    codes = codes_wide[:, 1:1 + cols]  # a block of a wider array, as the kernels pass tiles
    tab = rng.standard_normal(C).astype(np.float32)
    s0 = rng.standard_normal((rows, cols)).astype(np.float32)
    s = s0.copy()
    add(s, codes, tab)
    want = np.where(codes >= 0, s0 + tab[np.maximum(codes, 0)], -np.inf)
    _assert_close("scores", s, want, 1)
    g = rng.standard_normal((rows, cols)).astype(np.float32)
    ds = np.where(codes >= 0, g, 0).astype(np.float32)
    dtab = np.zeros((ab.LANES, C), np.float32)
    grads(ds, codes, dtab)
    want_dtab = np.bincount(codes[codes >= 0], weights=g[codes >= 0].astype(np.float64),
                            minlength=C)
    _assert_close("table", dtab.sum(axis=0), want_dtab, np.abs(g).sum())


@pytest.mark.parametrize("first_key, cols", [(0, 9), (-20, 9), (20, 9), (3, 1), (-4, 30)])
def test_relative_runs_match_explicit_codes(first_key, cols):
    R = 3
    query_positions = np.array([0, 2, 5, -6, 12, 1], np.int32)
    rng = np.random.default_rng(cols)
    tab = rng.standard_normal(2 * R + 1)
    s0 = rng.standard_normal((len(query_positions), cols))
    codes = np.clip(first_key + np.arange(cols)[None, :] - query_positions[:, None], -R, R) + R
    s = s0.copy()
    ab._add_relative_runs(s, query_positions, np.int32(first_key), tab, R)
    np.testing.assert_allclose(s, s0 + tab[codes], atol=1e-14)
    g = rng.standard_normal(s.shape)
    dtab = np.zeros((ab.LANES, 2 * R + 1))
    ab._relative_runs_grads(g, query_positions, np.int32(first_key), R, dtab)
    np.testing.assert_allclose(dtab.sum(axis=0), np.bincount(codes.ravel(), g.ravel(),
                                                             minlength=2 * R + 1), atol=1e-13)
