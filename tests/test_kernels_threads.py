"""Small CPU launches run serial, large ones parallel (seqattn/kernels/cpu/threads.py): the
thread count by size, the two compiled versions kept apart in Numba's disk cache, and every
kernel family correct on both sides of its grain (the shared op table runs its tiny shapes
serial; here every kernel is made to run parallel on the same inputs)."""
import importlib
import pkgutil

import numba
import numpy as np
import pytest
from numba import prange

import seqattn.kernels.cpu
from op_cases import CASES, check_backward, check_forward
from seqattn import ops
from seqattn.kernels.cpu.threads import SizedKernel, sized_kernel

GRAIN = 8


@sized_kernel(GRAIN)
def _double(out, x):
    for i in prange(x.size):
        out[i] = 2 * x[i]


def _sized_kernels():
    kernels = []
    for info in pkgutil.iter_modules(seqattn.kernels.cpu.__path__):
        module = importlib.import_module(f"seqattn.kernels.cpu.{info.name}")
        kernels += [k for k in vars(module).values() if isinstance(k, SizedKernel)]
    return kernels


@pytest.fixture
def parallel_everywhere(monkeypatch):
    """Every CPU kernel takes all threads for any launch of two or more units of work."""
    if numba.get_num_threads() < 2:
        pytest.skip("needs two Numba threads")
    for kernel in _sized_kernels():
        monkeypatch.setattr(kernel, "grain", 1)


def test_threads_follow_the_work():
    threads = numba.get_num_threads()
    assert _double.threads(0) == 1
    assert _double.threads(2 * GRAIN - 1) == 1
    assert _double.threads(2 * GRAIN) == min(2, threads)
    assert _double.threads(10**12) == threads


def test_launch_runs_serial_below_two_grains_and_parallel_from_there():
    if numba.get_num_threads() < 2:
        pytest.skip("needs two Numba threads")
    # A fresh kernel, so that no earlier test compiled either version.
    kernel = SizedKernel(_double.parallel.py_func, GRAIN, _double.work, {})
    small = np.arange(2 * GRAIN - 1, dtype=np.float64)
    out = np.empty_like(small)
    kernel(out, small)
    np.testing.assert_array_equal(out, 2 * small)
    assert kernel.serial.signatures and not kernel.parallel.signatures
    large = np.arange(2 * GRAIN, dtype=np.float64)
    out = np.empty_like(large)
    kernel(out, large)
    np.testing.assert_array_equal(out, 2 * large)
    assert kernel.parallel.signatures
    assert numba.get_num_threads() >= 2, "the launch must leave Numba's thread count as it was"


def test_serial_and_parallel_versions_have_their_own_cache_files():
    """Numba keys its disk cache by function name and bytecode, not by the parallel flag: with
    one name, a process would load the other version's machine code."""
    kernels = _sized_kernels()
    assert len(kernels) > 30
    for kernel in kernels:
        serial = kernel.serial._cache._cache_file._index_name
        parallel = kernel.parallel._cache._cache_file._index_name
        assert serial != parallel, kernel.parallel.py_func.__qualname__


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c.family}-{c.name}")
def test_op_table_in_parallel(case, parallel_everywhere):
    check_forward(case)
    if case.backward:
        check_backward(case)


def _inputs(seed=0):
    rng = np.random.default_rng(seed)
    return {"x": rng.normal(size=(3, 5, 4)), "y": rng.normal(size=(3, 5, 4)),
            "logits": rng.normal(size=(7, 5)), "classes": rng.integers(0, 5, size=7),
            "padding": rng.random((3, 5)) < 0.3, "token": rng.normal(size=4),
            "cache": rng.normal(size=(3, 2, 9, 4))}


def _adam(x, y, **_):
    param, avg, avg_sq = x.copy(), np.zeros_like(x), np.zeros_like(x)
    for step in (1, 2):
        ops.adam_step(param, y * step, avg, avg_sq, step=step, lr=0.1, weight_decay=0.01,
                      decoupled_weight_decay=True, grad_scale=0.5)
    return param, avg, avg_sq


def _sgd(x, y, **_):
    param, velocity = x.copy(), np.zeros_like(x)
    for _ in range(2):
        ops.sgd_step(param, y, velocity, lr=0.1, momentum=0.9, nesterov=True)
    return param, velocity


def _cross_entropy(logits, classes, **_):
    total, weight_sum, lse = ops.cross_entropy(logits, classes, label_smoothing=0.1)
    return total, weight_sum, lse, ops.cross_entropy_backward(logits, lse, classes, scale=0.5,
                                                              label_smoothing=0.1)


# Kernel families with no entry in the op table, each through its op; every entry returns
# arrays or numbers that must not depend on how many threads computed them.
OUTSIDE_THE_TABLE = {
    "adam": _adam,
    "sgd": _sgd,
    "sum_of_squares": lambda x, y, **_: ops.sum_of_squares([x, y]),
    "dropout": lambda x, y, **_: (ops.dropout(x, 0.3, 11), ops.dropout_backward(y, 0.3, 11)),
    "mse": lambda x, y, **_: (ops.pointwise_loss(x, y, "mse"),
                              ops.pointwise_loss_backward(x, y, "mse", scale=0.5)),
    "cross_entropy": _cross_entropy,
    "add_into": lambda x, y, **_: ops.add_into(x.copy(), y),
    "fill": lambda x, **_: ops.fill(x.copy(), 3.0),
    "masked_mean": lambda x, y, padding, **_: (ops.masked_mean(x, padding),
                                               ops.masked_mean_backward(y[:, 0], x, padding)),
    "prepend_token": lambda x, token, **_: ops.prepend_token(x, token),
    "first_token": lambda x, y, **_: (ops.first_token(x), ops.first_token_backward(y[:, 0], x)),
    "write_positions": lambda cache, x, **_: ops.write_positions(cache.copy(),
                                                                 x[:, None, :2].repeat(2, 1), 3),
}


def _flatten(result):
    if isinstance(result, (tuple, list)):
        return [leaf for item in result for leaf in _flatten(item)]
    return [np.asarray(result, dtype=np.float64)]


@pytest.mark.parametrize("name", list(OUTSIDE_THE_TABLE))
def test_families_outside_the_table_agree_serial_and_parallel(name, monkeypatch):
    serial = _flatten(OUTSIDE_THE_TABLE[name](**_inputs()))
    if numba.get_num_threads() < 2:
        pytest.skip("needs two Numba threads")
    for kernel in _sized_kernels():
        monkeypatch.setattr(kernel, "grain", 1)
    parallel = _flatten(OUTSIDE_THE_TABLE[name](**_inputs()))
    assert len(serial) == len(parallel)
    for i, (want, got) in enumerate(zip(serial, parallel)):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12,
                                   err_msg=f"{name}: output {i}, parallel against serial")
