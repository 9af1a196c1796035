"""The linear layers' products on AMX tiles (kernels/cpu/tile_linear.py): x W^T (+ b), dout W
and dW += dout^T x against float64 products, as accurate as float32 BLAS, with bits that do not
depend on the number of tasks, and the layer's own launchers (linear.py) taking them."""
import numpy as np
import pytest

from seqattn.kernels.cpu import linear
from seqattn.kernels.cpu.gemm import tile_linear
from seqattn.kernels.cpu.gemm.amx_tiles import AMX_BF16, tile_configuration

needs_amx = pytest.mark.skipif(not AMX_BF16, reason="the CPU (or the OS) offers no AMX tiles")

# (token rows, K inputs, O outputs): rows past the last whole strip, one tile's depth, the
# encoder's shapes
SHAPES = [(300, 96, 64), (257, 32, 32), (512, 256, 768), (1024, 1024, 256)]


def _inputs(R, K, O, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((R, K)).astype(np.float32)
    weight = (rng.standard_normal((O, K)) / np.sqrt(K)).astype(np.float32)
    bias = rng.standard_normal(O).astype(np.float32)
    dout = rng.standard_normal((R, O)).astype(np.float32)
    return x, weight, bias, dout


def _assert_as_accurate_as_float32_blas(got, float32_product, want):
    """Within 1.5 times the error of NumPy's float32 product (the bf16x3 split keeps float32
    accuracy; a product that dropped its smallest terms would be 2^8 times worse)."""
    blas_error = np.abs(float32_product - want).max()
    assert np.abs(got - want).max() <= 1.5 * blas_error


def test_only_float32_with_whole_tiles_and_enough_work_goes_to_the_tiles(monkeypatch):
    monkeypatch.setattr(tile_linear, "AMX_BF16", True)
    x, weight = np.zeros((4096, 64), np.float32), np.zeros((64, 64), np.float32)
    assert tile_linear.forward_on_tiles(x, weight)  # 2^24 multiply-adds
    assert not tile_linear.forward_on_tiles(x[:4095], weight)
    assert not tile_linear.forward_on_tiles(np.zeros((8192, 32), np.float32), weight[:, :32])
    assert not tile_linear.backward_on_tiles(x, weight)
    big_x, big_weight = np.zeros((4096, 256), np.float32), np.zeros((256, 256), np.float32)
    assert tile_linear.backward_on_tiles(big_x, big_weight)  # 2^28
    assert not tile_linear.backward_on_tiles(big_x[:4095], big_weight)
    for on_tiles in (tile_linear.forward_on_tiles, tile_linear.backward_on_tiles):
        assert not on_tiles(big_x[:, :240], big_weight[:, :240])
        assert not on_tiles(big_x, big_weight[:240])
        assert not on_tiles(big_x.astype(np.float64), big_weight.astype(np.float64))
    monkeypatch.setattr(tile_linear, "AMX_BF16", False)
    assert not tile_linear.forward_on_tiles(big_x, big_weight)
    assert not tile_linear.backward_on_tiles(big_x, big_weight)


def test_dw_goes_to_the_tiles_from_its_work_with_64_features_a_side(monkeypatch):
    monkeypatch.setattr(tile_linear, "AMX_BF16", True)
    x, weight = np.zeros((1024, 256), np.float32), np.zeros((256, 256), np.float32)
    assert tile_linear.weight_gradient_on_tiles(x, weight)  # 2^26 multiply-adds
    assert not tile_linear.weight_gradient_on_tiles(x[:1023], weight)
    narrow = np.zeros((1 << 16, 32), np.float32)
    assert not tile_linear.weight_gradient_on_tiles(narrow, np.zeros((64, 32), np.float32))
    assert not tile_linear.weight_gradient_on_tiles(x[:, :64].repeat(4, 0),
                                                    np.zeros((32, 64), np.float32))
    assert not tile_linear.weight_gradient_on_tiles(x.astype(np.float64),
                                                    weight.astype(np.float64))
    assert not tile_linear.weight_gradient_on_tiles(x[:, :240], weight[:, :240])
    monkeypatch.setattr(tile_linear, "AMX_BF16", False)
    assert not tile_linear.weight_gradient_on_tiles(x, weight)


@needs_amx
@pytest.mark.parametrize("R,K,O", SHAPES)
@pytest.mark.parametrize("has_bias", [True, False])
def test_rows_times_weight_transposed_matches_float64(R, K, O, has_bias):
    x, weight, bias, _ = _inputs(R, K, O)
    out = np.full((R, O), np.nan, np.float32)
    tile_linear.rows_times_weight(out, x, tile_linear.weight_over_inputs(weight), bias, has_bias)
    want = x.astype(np.float64) @ weight.T.astype(np.float64)
    blas = x @ weight.T
    if has_bias:
        want, blas = want + bias, blas + bias
    _assert_as_accurate_as_float32_blas(out, blas, want)


@needs_amx
@pytest.mark.parametrize("R,K,O", SHAPES)
def test_rows_times_weight_matches_float64(R, K, O):
    _, weight, bias, dout = _inputs(R, K, O)
    dx = np.full((R, K), np.nan, np.float32)
    tile_linear.rows_times_weight(dx, dout, tile_linear.weight_over_outputs(weight), bias, False)
    _assert_as_accurate_as_float32_blas(dx, dout @ weight,
                                        dout.astype(np.float64) @ weight.astype(np.float64))


# (token rows, K inputs, O outputs) for dW: rows past the last whole tile and past the last
# chunk, fewer outputs than inputs (dout is transposed) and more (x is), one tile's features
GRADIENT_SHAPES = [(300, 96, 64), (1100, 64, 256), (1057, 256, 96), (33, 32, 32)]


@needs_amx
@pytest.mark.parametrize("R,K,O", GRADIENT_SHAPES)
def test_weight_gradient_adds_dout_t_x_to_dweight(R, K, O):
    x, weight, _, dout = _inputs(R, K, O)
    dweight = weight.copy()  # it accumulates: what is there stays
    tile_linear.weight_gradient(dweight, dout, x)
    _assert_as_accurate_as_float32_blas(dweight - weight, dout.T @ x,
                                        dout.T.astype(np.float64) @ x.astype(np.float64))


@needs_amx
def test_weight_gradient_over_many_chunks_is_as_accurate_as_blas():
    """A float32 sum over all 8192 tokens was 4 times less accurate than BLAS; chunk sums
    added apart are not."""
    x, _, _, dout = _inputs(8192, 64, 96, seed=1)
    dweight = np.zeros((96, 64), np.float32)
    tile_linear.weight_gradient(dweight, dout, x)
    _assert_as_accurate_as_float32_blas(dweight, dout.T @ x,
                                        dout.T.astype(np.float64) @ x.astype(np.float64))


@needs_amx
@pytest.mark.parametrize("transposed", [False, True])
def test_weight_gradient_bits_do_not_depend_on_the_number_of_tasks(transposed):
    x, _, _, dout = _inputs(1100, 64, 256)
    a, b = (x, dout) if transposed else (dout[:, :64], x)
    shape = (b.shape[1], a.shape[1]) if transposed else (a.shape[1], b.shape[1])
    one = np.zeros(shape, np.float32)
    tile_linear._features_product.serial(one, a, b, tile_configuration(), transposed, 1)
    for tasks in (2, 3):
        other = np.zeros(shape, np.float32)
        tile_linear._features_product.parallel(other, a, b, tile_configuration(), transposed,
                                               tasks)
        assert np.array_equal(one, other), tasks


@needs_amx
def test_bits_do_not_depend_on_the_number_of_tasks():
    x, weight, bias, _ = _inputs(300, 96, 64)
    tiles, config = tile_linear.weight_over_inputs(weight), tile_configuration()
    one = np.empty((300, 64), np.float32)
    tile_linear._rows_times_weight.serial(one, x, tiles, config, bias, True, 1)
    for tasks in (2, 3, 7):
        other = np.empty((300, 64), np.float32)
        tile_linear._rows_times_weight.parallel(other, x, tiles, config, bias, True, tasks)
        assert np.array_equal(one, other), tasks


@needs_amx
def test_the_layer_launchers_take_the_tiles():
    """linear.py's forward, dx and dW are the tile kernels' products; db stays right."""
    R, K, O = 1024, 256, 1024  # 2^28 multiply-adds: both on the tiles
    x, weight, bias, dout = _inputs(R, K, O)
    out = np.empty((R, O), np.float32)
    linear.linear_forward(out, x, weight, bias, True)
    want = np.empty((R, O), np.float32)
    tile_linear.rows_times_weight(want, x, tile_linear.weight_over_inputs(weight), bias, True)
    assert np.array_equal(out, want)
    dx, dweight, dbias = np.empty_like(x), np.zeros_like(weight), np.zeros_like(bias)
    linear.linear_backward(dx, dweight, dbias, dout, x, weight, True, True)
    want_dx = np.empty_like(x)
    tile_linear.rows_times_weight(want_dx, dout, tile_linear.weight_over_outputs(weight), bias,
                                  False)
    assert np.array_equal(dx, want_dx)
    want_dweight = np.zeros_like(weight)
    tile_linear.weight_gradient(want_dweight, dout, x)
    assert np.array_equal(dweight, want_dweight)
    np.testing.assert_allclose(dweight, dout.T.astype(np.float64) @ x, rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(dbias, dout.sum(axis=0, dtype=np.float64), rtol=1e-4, atol=1e-3)
