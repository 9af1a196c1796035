"""Functions called by name (seqattn.kernels.cpu.called_by_name): a calling kernel's module holds
a declaration of the register products, not their code; and a kernel that calls them runs when
it comes from Numba's cache in a new process (which must register the symbol before the cached
code is loaded: without it the process crashed); and a function that another process is
compiling into the cache (handed to the helper, or marked by whichever process reached it first)
is waited for, not compiled twice."""
import os
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest
from numba import njit, types

from cache_child import run_on_cache
from seqattn.kernels.compiled_elsewhere import compiling_elsewhere, compiling_here
from seqattn.kernels.cpu import called_by_name as by_name
from seqattn.kernels.cpu.called_by_name import address_of, called_at_address, called_by_name
from seqattn.kernels.cpu.gemm.register_gemm import register_gemm


@njit
def _product(c, a, b):
    register_gemm(c, a, b, 1.0, False)


def test_a_caller_holds_a_declaration_of_the_products_not_their_code():
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(13, 7)).astype(np.float32), rng.normal(size=(7, 40)).astype(np.float32)
    c = np.zeros((13, 40), np.float32)
    _product(c, a, b)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-5)
    ir = next(iter(_product.inspect_llvm().values()))
    assert "seqattn_register_gemm_product_f32" in ir
    defined = [line for line in ir.splitlines() if line.startswith("define")]
    assert not any("_columns_product" in line or "_product_f32" in line for line in defined)
    assert len(ir) < 100_000, f"the caller's IR is {len(ir)} characters"


_CHILD = textwrap.dedent("""
    import json, sys
    import numpy as np
    from seqattn import ops
    from seqattn.kernels.cpu import linear
    rng = np.random.default_rng(1)
    x = rng.normal(size=(700, 32)).astype(np.float32)
    w = rng.normal(size=(48, 32)).astype(np.float32)
    out = np.zeros((700, 48), np.float32)
    # the serial and the parallel (prange) kernels, each calling the products by name
    linear._linear_forward.serial(out, x, w, np.zeros(48, np.float32), False, True, 1)
    serial = out.copy()
    linear._linear_forward.parallel(out, x, w, np.zeros(48, np.float32), False, True, 2)
    misses = sum(sum(d.stats.cache_misses.values())
                 for d in (linear._linear_forward.serial, linear._linear_forward.parallel))
    print(json.dumps({"error": float(np.abs(serial - x @ w.T).max()),
                      "same": bool((serial == out).all()), "misses": misses}))
""")


def test_kernels_calling_by_name_run_when_loaded_from_the_cache_in_a_new_process(tmp_path):
    compiled, loaded = run_on_cache(_CHILD, tmp_path), run_on_cache(_CHILD, tmp_path)
    assert compiled["misses"] == 2 and loaded["misses"] == 0
    for run in (compiled, loaded):
        assert run["error"] < 1e-4 and run["same"]


def _twice(x):
    return 2 * x


_TWICE = called_by_name("seqattn_test_twice", types.int64(types.int64))(_twice)


@njit
def _call_twice(x):
    return _TWICE((x,))


def _thrice(x):
    return 3 * x


_THRICE = "seqattn_test_thrice"
called_by_name(_THRICE, types.int64(types.int64))(_thrice)
_AT_ADDRESS = called_at_address(types.int64(types.int64))


@njit
def _call_at(address, x):
    return _AT_ADDRESS(address, (x,))


def test_a_c_function_called_at_an_address_is_compiled_only_when_its_address_is_asked_for():
    """A kernel that calls a C function at an address passed in neither compiles nor names
    it: the function is compiled at the first address_of."""
    _call_at.compile((types.int64, types.int64))
    assert _THRICE not in by_name._COMPILED
    assert _THRICE not in next(iter(_call_at.inspect_llvm().values()))
    assert _call_at(address_of(_THRICE), 7) == 21
    assert _THRICE in by_name._COMPILED


def test_a_c_function_that_another_process_compiles_is_waited_for():
    """As a helper process compiles the register products on a first run
    (seqattn.compile.hand_over_products): the first kernel that calls it waits, then loads."""
    polls = []
    compiling_elsewhere(["seqattn_test_twice"], lambda: polls.append(1) or len(polls) > 2)
    assert _call_twice(21) == 42
    assert len(polls) == 3, "registered without waiting for the process compiling it"


def _sleeping_process(seconds):
    """A process that lives ``seconds``, reaped when it ends (an unreaped one looks alive)."""
    process = subprocess.Popen([sys.executable, "-c", f"import time; time.sleep({seconds})"])
    threading.Thread(target=process.wait, daemon=True).start()
    return process


def test_a_c_function_marked_by_another_live_process_is_waited_for(tmp_path):
    """The job and the helper reach the distance geometry's fill at once: the second waits
    until the first's mark is gone (here: its process ends), then marks it itself."""
    other = _sleeping_process(1.0)
    mark = tmp_path / "seqattn_toy.compiling"
    mark.write_text(str(other.pid))
    started = time.monotonic()
    with compiling_here(str(tmp_path), "seqattn_toy", poll_seconds=0.01):
        waited = time.monotonic() - started
        assert mark.read_text() == str(os.getpid()), "not marked by this process"
    assert not mark.exists(), "the mark outlived the compilation"
    assert waited > 0.5 and other.poll() is not None, "did not wait for the live process"


def test_a_mark_left_by_an_ended_process_is_taken_over(tmp_path):
    ended = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                           capture_output=True, text=True, check=True)
    mark = tmp_path / "seqattn_toy.compiling"
    mark.write_text(ended.stdout.strip())
    started = time.monotonic()
    with compiling_here(str(tmp_path), "seqattn_toy"):
        assert mark.read_text() == str(os.getpid())
    assert time.monotonic() - started < 0.5


def test_a_launch_holds_a_declaration_of_its_task_function_not_its_code():
    """linear's and the short attention's prange kernels call their task body by symbol
    (called_natively): the body is compiled once for both versions, not linked into each."""
    from seqattn.kernels.cpu import linear
    # the kernel's function compiled here without the cache, whose code cannot be inspected
    kernel = njit(linear._linear_forward.__wrapped__)
    rng = np.random.default_rng(2)
    x = rng.normal(size=(40, 8)).astype(np.float32)
    w = rng.normal(size=(12, 8)).astype(np.float32)
    out = np.zeros((40, 12), np.float32)
    kernel(out, x, w, np.zeros(12, np.float32), False, True, 2)
    np.testing.assert_allclose(out, x @ w.T, rtol=1e-5, atol=1e-5)
    ir = next(iter(kernel.inspect_llvm().values()))
    symbol = by_name.native_symbol(linear._linear_forward_task,
                                   (types.int64,) + kernel.signatures[0])
    assert any(line.startswith("declare") and symbol in line for line in ir.splitlines())
    defined = [line for line in ir.splitlines() if line.startswith("define")]
    assert not any("_linear_forward_task" in line for line in defined)
    assert len(ir) < 100_000, f"the kernel's IR is {len(ir)} characters"


@njit
def _checked_half(x):
    if x % 2:
        raise ValueError("odd")
    return x // 2


_HALF = by_name.called_natively(_checked_half)


@njit
def _call_half(x):
    return _HALF((x,)) + 1


def test_a_function_called_natively_returns_its_value_and_raises_its_exceptions():
    assert _call_half(10) == 6
    with pytest.raises(ValueError, match="odd"):
        _call_half(7)


def test_a_cached_launch_whose_task_function_left_the_cache_compiles_it_and_runs(tmp_path):
    """The symbol is the same in every process: a launch loaded from the cache finds a task
    function compiled afresh (its cache files deleted) as well as one loaded."""
    compiled = run_on_cache(_CHILD, tmp_path)
    removed = [f for f in tmp_path.rglob("*")
               if f.is_file() and "_linear_forward_task" in f.name]
    assert removed, "the task function was not cached on its own"
    for f in removed:
        f.unlink()
    loaded = run_on_cache(_CHILD, tmp_path)
    assert compiled["misses"] == 2 and loaded["misses"] == 0
    assert loaded["same"] and loaded["error"] == compiled["error"]


def test_a_chunk_function_not_named_after_its_kernel_is_refused():
    """A first run hands the helper a backward at its forward's name (seqattn.compile.HANDOVERS),
    which a chunk function compiles first: named otherwise, the hand-over would come late."""
    from seqattn.kernels.cpu.threads import sized_kernel

    @njit
    def _elsewhere(t, out):
        out[t] = t

    def _kernel(out):
        for t in range(out.size):
            _elsewhere(t, out)

    with pytest.raises(ValueError, match="must be named after it"):
        sized_kernel(1, chunk=_elsewhere)(_kernel)
