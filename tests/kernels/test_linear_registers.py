"""The linear layers' x W^T and dout W on packed_gemm's register path, forced on (in this
process it is taken only where SciPy's OpenBLAS runs a kernel narrower than AVX-512, or on a
CPU with AVX2 but not AVX-512 for small weights): against float64 NumPy at shapes with
remainders, the path's bits whatever the split of rows over threads, the choice from the
kernel family OpenBLAS names and on AVX2 from the weight's size, and a forward on BLAS's path
compiled without the register driver, as a backward whose dW products are all too small for
it."""
import textwrap

import numpy as np
import pytest
from threadpoolctl import threadpool_info

from cache_child import run_on_cache
from gradcheck import assert_float32_close
from seqattn import ops
from seqattn.kernels.cpu import linear
from seqattn.kernels.cpu.gemm import blas_library, packed_gemm
from seqattn.kernels.cpu.gemm.blas_library import single_threaded_blas
from seqattn.kernels.cpu.gemm.packed_gemm import (AVX2_MAX_WEIGHT, avx2_in_registers,
                                             gemm_in_registers, nt_nn_in_registers)
from seqattn.kernels.cpu.llvm_vectors import TARGET_FEATURES, has_avx2_fma, has_avx512

# (R, K, O): token rows past 12-row blocks and 96-row strips (last strips of 11 and 34 rows),
# features past 32-column panels, inner dimensions (K forward, O for dx) of one to three
# chunks (KC = 256), and more columns than one chunk of b (NC = 512).
SHAPES = [(203, 300, 77), (130, 45, 530), (13, 1, 40)]


@pytest.fixture
def nt_nn_in_registers_on(monkeypatch):
    monkeypatch.setattr(linear, "NT_NN_IN_REGISTERS", True)


def _layer(rng, R, K, O):
    x = rng.standard_normal((R, K), dtype=np.float32)
    weight = rng.standard_normal((O, K), dtype=np.float32)
    bias = rng.standard_normal(O, dtype=np.float32)
    dout = rng.standard_normal((R, O), dtype=np.float32)
    return x, weight, bias, dout


def _in_registers(M, N, a, b, transpose_b, start=None):
    c = np.zeros((M, N), np.float32) if start is None else np.tile(start, (M, 1))
    gemm_in_registers(c, a, b, False, transpose_b, start is not None)
    return c


@pytest.mark.parametrize("R, K, O", SHAPES)
def test_forward_and_input_gradient_in_registers_match_numpy(R, K, O, nt_nn_in_registers_on):
    """The layer's float32 y and dx are the register path's bits (so the path was taken) and
    as accurate as NumPy's float32 products against float64 ones; dW and db as before."""
    rng = np.random.default_rng(R * K + O)
    x, weight, bias, dout = _layer(rng, R, K, O)
    x64, w64 = x.astype(np.float64), weight.astype(np.float64)
    y = ops.linear(x, weight, bias)
    np.testing.assert_array_equal(y, _in_registers(R, O, x, weight, True, bias))
    assert_float32_close("y", y, x64 @ w64.T + bias, x @ weight.T + bias)
    y = ops.linear(x, weight)
    np.testing.assert_array_equal(y, _in_registers(R, O, x, weight, True))
    weight_grad, bias_grad = np.zeros_like(weight), np.zeros_like(bias)
    dx = ops.linear_backward(dout, x, weight, weight_grad=weight_grad, bias_grad=bias_grad)
    np.testing.assert_array_equal(dx, _in_registers(R, K, dout, weight, False))
    assert_float32_close("dx", dx, dout.astype(np.float64) @ w64, dout @ weight)
    assert_float32_close("dW", weight_grad, dout.T.astype(np.float64) @ x64, dout.T @ x)
    assert_float32_close("db", bias_grad, dout.astype(np.float64).sum(axis=0),
                         dout.sum(axis=0))


@pytest.mark.parametrize("R, K, O", SHAPES)
def test_float64_is_unaffected(R, K, O, nt_nn_in_registers_on):
    """Forced on, float64 (gradient checks) still takes BLAS, as accurate as before."""
    rng = np.random.default_rng(R + K + O)
    x, weight, bias, dout = (v.astype(np.float64) for v in _layer(rng, R, K, O))
    tolerance = {"rtol": 1e-12, "atol": 1e-13 * max(K, O)}
    np.testing.assert_allclose(ops.linear(x, weight, bias), x @ weight.T + bias, **tolerance)
    dx = ops.linear_backward(dout, x, weight, weight_grad=np.zeros_like(weight))
    np.testing.assert_allclose(dx, dout @ weight, **tolerance)


@pytest.mark.parametrize("R, K, O", SHAPES[:2])
def test_register_path_bits_do_not_depend_on_the_thread_count(R, K, O):
    """The kernels' split of rows for 1 to 4 tasks (run serially: the split, not the threads
    that run it, sets the blocks) gives the same y and dx, bit for bit."""
    rng = np.random.default_rng(3)
    x, weight, bias, dout = _layer(rng, R, K, O)
    results = []
    for tasks in (1, 2, 3, 4):
        y, dx = np.empty((R, O), np.float32), np.empty_like(x)
        dweight, dbias = np.zeros_like(weight), np.zeros_like(bias)
        with single_threaded_blas():
            linear._linear_forward.serial(y, x, weight, bias, True, True, tasks)
            linear._linear_backward.serial(dx, dweight, dbias, dout, x, weight, True, True,
                                           True, True, packed_gemm.TN_IN_REGISTERS, tasks)
        results.append((y, dx))
    for tasks, (y, dx) in zip((2, 3, 4), results[1:]):
        np.testing.assert_array_equal(y, results[0][0], f"y with {tasks} tasks")
        np.testing.assert_array_equal(dx, results[0][1], f"dx with {tasks} tasks")


@pytest.mark.parametrize("corename, wanted", [
    ("Haswell", True), ("Zen", True), ("Sandybridge", True), ("SkylakeX", False),
    ("Cooperlake", False), ("SapphireRapids", False), ("SKYLAKEX", False), (None, False)])
def test_x_wt_and_dout_w_take_registers_only_against_a_narrower_openblas_kernel(corename,
                                                                               wanted):
    assert nt_nn_in_registers(True, corename) is wanted
    assert nt_nn_in_registers(False, corename) is False, "not without dW's register path"


@pytest.mark.skipif(blas_library.LIBRARY != blas_library.OPENBLAS, reason="MKL is chosen")
def test_corename_is_the_kernel_family_scipys_openblas_runs():
    """OPENBLAS_CORETYPE=Haswell in the environment makes it 'Haswell' on any x86 CPU."""
    scipys = [lib["architecture"] for lib in threadpool_info()
              if lib["internal_api"] == "openblas" and "scipy.libs" in lib["filepath"]]
    if not scipys:
        pytest.skip("SciPy's OpenBLAS is not where SciPy's wheels put it")
    assert blas_library.CORENAME == blas_library.openblas_corename() == scipys[0]
    assert packed_gemm.NT_NN_IN_REGISTERS == nt_nn_in_registers(packed_gemm.TN_IN_REGISTERS,
                                                                scipys[0])


@pytest.mark.parametrize("weight_shape, columns, wanted", [
    ((192, 64), 192, True), ((192, 64), 64, True), ((64, 128), 16, True),
    ((128, 128), 128, True), ((4, 4096), 4096, True), ((129, 128), 128, False),
    ((256, 256), 256, False), ((768, 256), 256, False), ((256, 1024), 1024, False),
    ((4, 64), 4, False), ((64, 4), 4, False), ((64, 15), 15, False)])
def test_on_avx2_products_take_registers_for_small_weights_and_16_columns_or_more(
        weight_shape, columns, wanted):
    """At most AVX2_MAX_WEIGHT entries (the small models' layers, not the encoder's) and at
    least 16 columns (a block's width: not the first and last layers' narrow products)."""
    assert AVX2_MAX_WEIGHT == 128 * 128
    assert avx2_in_registers(True, weight_shape, columns) is wanted
    assert avx2_in_registers(False, weight_shape, columns) is False


def test_the_avx2_choice_is_taken_on_avx2_cpus_with_openblas_only():
    """Never on a CPU with AVX-512 (its path is left as it was), always on one with AVX2 and
    FMA but not AVX-512 where SciPy's OpenBLAS is the BLAS library."""
    wanted = (has_avx2_fma(TARGET_FEATURES) and not has_avx512(TARGET_FEATURES)
              and blas_library.LIBRARY == blas_library.OPENBLAS)
    assert packed_gemm.AVX2_IN_REGISTERS is wanted
    assert linear.AVX2_IN_REGISTERS is wanted


@pytest.mark.parametrize("K, O, wanted_y, wanted_dx", [
    (64, 192, True, True), (128, 128, True, True), (128, 129, False, False),
    (256, 256, False, False), (64, 15, False, True), (15, 64, True, False)])
def test_the_layer_takes_the_path_the_avx2_rule_chooses(K, O, wanted_y, wanted_dx,
                                                         monkeypatch):
    """On an AVX2 CPU (forced here, without the AVX-512 choice): y and dx of a float32 layer
    are the register path's bits for a weight of at most AVX2_MAX_WEIGHT entries and a product
    of 16 columns or more (O for y, K for dx), and not (BLAS's) otherwise; float64 keeps
    BLAS."""
    monkeypatch.setattr(linear, "NT_NN_IN_REGISTERS", False)
    monkeypatch.setattr(linear, "AVX2_IN_REGISTERS", True)
    rng = np.random.default_rng(K + O)
    R = 203
    x, weight, _, dout = _layer(rng, R, K, O)
    assert linear._rows_in_registers(x, weight, O) is (True if wanted_y else None)
    assert linear._rows_in_registers(x, weight, K) is (True if wanted_dx else None)
    assert linear._rows_in_registers(x.astype(np.float64), weight.astype(np.float64), O) is None
    y = ops.linear(x, weight)
    dx = ops.linear_backward(dout, x, weight, weight_grad=np.zeros_like(weight))
    same = [np.array_equal(y, _in_registers(R, O, x, weight, True)),
            np.array_equal(dx, _in_registers(R, K, dout, weight, False))]
    assert same == [wanted_y, wanted_dx]
    assert_float32_close("y", y, x.astype(np.float64) @ weight.astype(np.float64).T,
                         x @ weight.T)


def test_the_layer_asks_for_the_columns_of_each_product(monkeypatch):
    """The forward's x W^T has the weight's rows as columns, the backward's dout W its
    columns: the rule is asked about those (a first layer 4 -> 64 and a last 64 -> 4)."""
    asked = []

    def recorded(x, weight, columns):
        asked.append((weight.shape, columns))
        return None

    monkeypatch.setattr(linear, "_rows_in_registers", recorded)
    rng = np.random.default_rng(1)
    for K, O in ((4, 64), (64, 4)):
        x, weight, _, dout = _layer(rng, 30, K, O)
        ops.linear(x, weight)
        ops.linear_backward(dout, x, weight, weight_grad=np.zeros_like(weight))
    assert asked == [((64, 4), 64), ((64, 4), 4), ((4, 64), 4), ((4, 64), 64)]


def test_layers_on_blas_share_the_kernel_version_of_the_register_path(monkeypatch):
    """On AVX2 (forced), a float32 layer whose products take BLAS's path passes None (its
    kernel compiled for BLAS alone) until a layer has taken the register path through the same
    launcher, and False from then on: one compiled version serves a model with layers of both
    kinds. The BLAS layer's bits do not change; float64 layers keep None."""
    import numba

    monkeypatch.setattr(linear, "NT_NN_IN_REGISTERS", False)
    monkeypatch.setattr(linear, "AVX2_IN_REGISTERS", True)
    monkeypatch.setattr(linear, "_FLAGGED", set())
    passed = []
    for kernel, at in ((linear._linear_forward, 5), (linear._linear_backward, 9)):
        def run(threads, *args, kernel=kernel, at=at, run=kernel.run):
            passed.append((kernel.__name__, numba.typeof(args[at])))
            return run(threads, *args)
        monkeypatch.setattr(kernel, "run", run)
    rng = np.random.default_rng(3)
    narrow, wide = _layer(rng, 40, 64, 4), _layer(rng, 40, 4, 64)

    def layer(x, weight, bias, dout):
        return (ops.linear(x, weight, bias),
                ops.linear_backward(dout, x, weight, weight_grad=np.zeros_like(weight),
                                    bias_grad=np.zeros_like(bias), need_input_grad=True))
    alone = layer(*narrow)  # y's 4 columns and dx's 64: BLAS, then the registers
    layer(*wide)  # y's 64 columns: the registers; dx's 4: BLAS after them
    beside = layer(*narrow)
    layer(*(a.astype(np.float64) for a in narrow))
    flag, none = numba.types.boolean, numba.types.none
    assert passed == [("_linear_forward", none), ("_linear_backward", flag),
                      ("_linear_forward", flag), ("_linear_backward", flag),
                      ("_linear_forward", flag), ("_linear_backward", flag),
                      ("_linear_forward", none), ("_linear_backward", none)]
    for before, after in zip(alone, beside):
        np.testing.assert_array_equal(before, after)


@pytest.mark.skipif(packed_gemm.TN_MIN_WORK > 0, reason="dW's AVX-512 size floor applies")
@pytest.mark.parametrize("O, K, wanted", [(64, 64, True), (192, 64, True), (4, 64, True),
                                          (64, 8, False), (256, 256, False)])
def test_the_layer_takes_the_dweight_path_the_avx2_rule_chooses(O, K, wanted, monkeypatch):
    """On AVX2 (here forced on where the CPU compiles for AVX2): the layer's float32 dW, split
    over threads by features, is the register path's bits of the whole product for a small
    weight with 16 inputs or more, and not (BLAS's) otherwise; as accurate as NumPy's."""
    monkeypatch.setattr(linear, "TN_IN_REGISTERS", False)
    monkeypatch.setattr(linear, "AVX2_IN_REGISTERS", True)
    rng = np.random.default_rng(O * K)
    x, weight, _, dout = _layer(rng, 4099, K, O)
    assert linear._dweight_in_registers(x, weight) is wanted
    weight_grad = np.zeros_like(weight)
    ops.linear_backward(dout, x, weight, weight_grad=weight_grad)
    registers = np.zeros_like(weight)
    gemm_in_registers(registers, dout, x, True, False, False)
    assert np.array_equal(weight_grad, registers) is wanted
    assert_float32_close("dW", weight_grad, dout.T.astype(np.float64) @ x.astype(np.float64),
                         dout.T @ x)


_FORWARD_ON_BLAS = textwrap.dedent("""
    import json
    import numpy as np
    from seqattn import ops
    from seqattn.kernels.cpu import called_by_name, linear
    linear.NT_NN_IN_REGISTERS = False
    linear.AVX2_IN_REGISTERS = False
    rng = np.random.default_rng(0)
    x = rng.normal(size=(30, 8)).astype(np.float32)
    weight = rng.normal(size=(5, 8)).astype(np.float32)
    y = ops.linear(x, weight)
    print(json.dumps({"error": float(np.abs(y - x @ weight.T).max()),
                      "registered": sorted(called_by_name._COMPILED)}))
""")


def test_a_forward_on_blas_path_is_compiled_without_the_register_driver(tmp_path):
    """Where x W^T takes BLAS's path, the float32 forward's kernel leaves out the register
    driver (the larger part of a first run's linear forward): its C function is never
    registered, in a new process on an empty cache."""
    run = run_on_cache(_FORWARD_ON_BLAS, tmp_path)
    assert run["error"] < 1e-4
    assert "seqattn_packed_gemm_in_registers" not in run["registered"]


_BACKWARD = textwrap.dedent("""
    import json
    import numpy as np
    from seqattn.kernels.cpu import called_by_name, linear
    from seqattn.kernels.cpu.gemm.packed_gemm import DRIVER, MIN_WORK, TN_IN_REGISTERS
    rng = np.random.default_rng(0)
    runs = []
    for R, K, O in ((30, 8, 5), (MIN_WORK // 64 // 64, 64, 64)):
        x = rng.normal(size=(R, K)).astype(np.float32)
        weight = rng.normal(size=(O, K)).astype(np.float32)
        dout = rng.normal(size=(R, O)).astype(np.float32)
        dweight = np.zeros_like(weight)
        linear.linear_backward(np.empty_like(x), dweight, np.zeros(O, np.float32), dout, x,
                               weight, True, True)
        exact = dout.astype(np.float64).T @ x
        runs.append({"error": float(np.abs(dweight - exact).max() / np.abs(exact).max()),
                     "driver": DRIVER in called_by_name._COMPILED})
    print(json.dumps({"runs": runs, "in_registers": bool(TN_IN_REGISTERS)}))
""")


def test_the_register_driver_is_compiled_for_the_first_dweight_that_takes_it(tmp_path):
    """dW takes the register driver for products of MIN_WORK multiply-adds or more only: a
    backward of smaller ones leaves it out (not compiled, in a new process on an empty cache),
    and the first larger one compiles it."""
    run = run_on_cache(_BACKWARD, tmp_path)
    if not run["in_registers"]:
        pytest.skip("float32 dW goes through BLAS on this CPU")
    small, large = run["runs"]
    assert small["error"] < 1e-5 and large["error"] < 1e-5
    assert not small["driver"], "compiled for products that never take it"
    assert large["driver"]
