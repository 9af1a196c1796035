"""Small CPU launches run serial, large ones parallel (seqattn/kernels/cpu/threads.py): the
thread count by size and by the cores other processes keep busy, the two compiled versions kept
apart in Numba's disk cache, and every op correct on both sides of its kernels' grains (the
shared op table runs its tiny shapes serial; here every kernel is made to run parallel on the
same inputs, the attention cases too)."""
import copy
import importlib
import os
import pkgutil

import numba
import numpy as np
import pytest
from numba import prange

import seqattn
import seqattn.kernels.cpu
import attention_cases
from cpu_tiny_tiles import tiny_tile_attention, tiny_tile_backward
from op_cases import CASES
from ops_checks import _host, _inputs, check_backward, check_forward
from seqattn.kernels.cpu import attention, threads as threads_module
from seqattn.kernels.cpu.threads import CoresInUseElsewhere, SizedKernel, sized_kernel
from seqattn.ops.attention_inputs import prepare_attention
from structured_bias_cases import STRUCTURED_CASES, check_structured

pytestmark = pytest.mark.slow  # minutes in all: the file runs first (tests/conftest.py)

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


@pytest.fixture(autouse=True)
def no_helper(monkeypatch):
    """Launches compile the version they take, as without a helper process: a first-run helper
    that this test process started (seqattn.first_run) would have launches that miss their
    parallel version run the serial one."""
    monkeypatch.setattr(threads_module, "_request_twin", None)
    monkeypatch.setattr(threads_module, "_start_helper", None)


@pytest.fixture
def parallel_everywhere(monkeypatch):
    """Every CPU kernel takes all threads for any launch of two or more units of work, however
    busy the machine is."""
    if numba.get_num_threads() < 2:
        pytest.skip("needs two Numba threads")
    monkeypatch.setattr(threads_module, "_following_load", False)
    for kernel in _sized_kernels():
        monkeypatch.setattr(kernel, "grain", 1)


def test_threads_follow_the_work():
    threads = numba.get_num_threads()
    assert _double.threads(0) == 1
    assert _double.threads(2 * GRAIN - 1) == 1
    assert _double.threads(2 * GRAIN) == min(2, threads)
    assert _double.threads(10**12) == threads


class _FakeMachine:
    """A /proc/stat whose busy ticks and a process clock whose seconds the test advances."""

    def __init__(self, tmp_path, monkeypatch):
        self.path = tmp_path / "stat"
        self.wall, self.busy_ticks, self.niced_ticks, self.own = 100.0, 0, 0, 0.0
        self.write()
        monkeypatch.setattr(threads_module.time, "monotonic", lambda: self.wall)
        monkeypatch.setattr(threads_module.time, "process_time", lambda: self.own)

    def write(self):
        # user nice system idle iowait irq softirq steal guest guest_nice
        self.path.write_text(f"cpu  {self.busy_ticks} {self.niced_ticks} 0 7 0 0 0 0 0 0\n"
                             "cpu0 0 0 0 0\n")

    def advance(self, seconds, busy_cores, own_cores, niced_cores=0.0):
        ticks = seconds * os.sysconf("SC_CLK_TCK")
        self.wall += seconds
        self.own += own_cores * seconds
        self.busy_ticks += round(busy_cores * ticks)
        self.niced_ticks += round(niced_cores * ticks)
        self.write()


def test_cores_in_use_elsewhere_are_the_machines_busy_time_less_our_own(tmp_path, monkeypatch):
    machine = _FakeMachine(tmp_path, monkeypatch)
    elsewhere = CoresInUseElsewhere(str(machine.path), window=0.2)
    assert elsewhere() == 0
    # We use 1.2 cores of the 2.0 busy: 0.8 elsewhere.
    machine.advance(0.5, busy_cores=2.0, own_cores=1.2)
    assert elsewhere() == pytest.approx(0.8)
    # Within the window the figure stands, whatever happens meanwhile.
    machine.advance(0.1, busy_cores=0.0, own_cores=0.0)
    assert elsewhere() == pytest.approx(0.8)
    # The next window starts where the last ended: 0.1 s idle + 0.3 s with ourselves alone.
    machine.advance(0.3, busy_cores=1.0, own_cores=1.0)
    assert elsewhere() == pytest.approx(0.0, abs=0.05)


def _autogroup(tmp_path, enabled):
    setting = tmp_path / "sched_autogroup_enabled"
    setting.write_text("1\n" if enabled else "0\n")
    return str(setting)


def _meter_at_nice_0(tmp_path, monkeypatch, autogroup):
    """A fake machine and a CoresInUseElsewhere reading it, for a process at nice 0 with the
    scheduler's session groups on or off."""
    machine = _FakeMachine(tmp_path, monkeypatch)
    monkeypatch.setattr(threads_module.os, "getpriority", lambda which, who: 0)
    elsewhere = CoresInUseElsewhere(str(machine.path), window=0.2,
                                    autogroup=_autogroup(tmp_path, autogroup))
    return machine, elsewhere


def test_processes_of_lower_priority_take_no_core(tmp_path, monkeypatch):
    machine, elsewhere = _meter_at_nice_0(tmp_path, monkeypatch, autogroup=False)
    machine.advance(0.5, busy_cores=1.0, own_cores=1.0, niced_cores=1.0)
    assert elsewhere() == pytest.approx(0.0, abs=0.05)
    # Niced ourselves, our time is in the nice column with our peers': they count.
    monkeypatch.setattr(threads_module.os, "getpriority", lambda which, who: 10)
    machine.advance(0.5, busy_cores=0.0, own_cores=1.0, niced_cores=2.0)
    assert elsewhere() == pytest.approx(1.0, abs=0.05)


def test_niced_processes_count_where_the_scheduler_groups_sessions(tmp_path, monkeypatch):
    machine, elsewhere = _meter_at_nice_0(tmp_path, monkeypatch, autogroup=True)
    machine.advance(0.5, busy_cores=1.0, own_cores=1.0, niced_cores=1.0)
    assert elsewhere() == pytest.approx(1.0, abs=0.05)


def test_unreadable_machine_figures_count_as_a_machine_to_ourselves(tmp_path):
    elsewhere = CoresInUseElsewhere(str(tmp_path / "missing"), window=0.0)
    assert elsewhere() == 0
    assert elsewhere() == 0


def test_launches_leave_the_cores_that_other_processes_hold(monkeypatch):
    if numba.get_num_threads() < 2 or (os.cpu_count() or 1) < 2:
        pytest.skip("needs two cores and two Numba threads")
    cores, planned = os.cpu_count(), numba.get_num_threads()
    busy = [cores + 3.0]
    monkeypatch.setattr(threads_module, "cores_in_use_elsewhere", lambda: busy[0])
    # The plan ignores the load: the work is split the same way, so results keep their bits.
    assert _double.threads(10**12) == planned
    # On by default; off, a launch runs on every planned thread whatever the load.
    monkeypatch.setattr(threads_module, "_following_load", True)
    assert threads_module.follow_machine_load(False) is True
    assert threads_module.free_threads(planned) == planned
    assert threads_module.follow_machine_load() is False
    busy[0] = 0.0
    assert threads_module.free_threads(planned) == planned
    busy[0] = 0.4  # a process that runs less than half the time takes no core
    assert threads_module.free_threads(planned) == planned
    busy[0] = 0.6  # from half a core on, a core is taken
    assert threads_module.free_threads(planned) == max(1, min(planned, cores - 1))
    busy[0] = cores - 1.0  # all but one core taken: serial, on the calling thread
    assert threads_module.free_threads(planned) == 1
    busy[0] = cores + 3.0  # more than the machine: still one thread
    assert threads_module.free_threads(planned) == 1


def test_a_launch_runs_its_plan_on_the_threads_the_load_leaves(monkeypatch):
    if numba.get_num_threads() < 2:
        pytest.skip("needs two Numba threads")
    kernel = SizedKernel(_double.parallel.py_func, GRAIN, _double.work, {})
    ran = []
    monkeypatch.setattr(kernel, "serial", lambda *args: ran.append("serial"))
    monkeypatch.setattr(kernel, "parallel", lambda *args: ran.append(numba.get_num_threads()))
    monkeypatch.setattr(threads_module, "free_threads", lambda threads: 1)
    kernel.run(2, None)
    monkeypatch.setattr(threads_module, "free_threads", lambda threads: threads)
    kernel.run(2, None)
    assert ran == ["serial", 2]


def test_launch_runs_serial_below_two_grains_and_parallel_from_there(monkeypatch):
    if numba.get_num_threads() < 2:
        pytest.skip("needs two Numba threads")
    monkeypatch.setattr(threads_module, "_following_load", False)  # parallel on a busy machine
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


def _uncached_double():
    """_double as a new kernel whose versions neither load from nor go to the disk cache (an
    earlier session may have cached them), so that each call shows what it compiles."""
    from numba.core.caching import NullCache

    kernel = SizedKernel(_double.parallel.py_func, GRAIN, _double.work, {})
    kernel.serial._cache = kernel.parallel._cache = NullCache()
    return kernel


def _recorded_requests(monkeypatch, helper_there=True):
    """The requests launches make of a helper (kernel, version, later), in a list; each is
    answered `helper_there`."""
    asked = []
    monkeypatch.setattr(threads_module, "_request_twin",
                        lambda k, version, argtypes, later=False:
                        asked.append((k, version, later)) or helper_there)
    return asked


def test_a_first_run_launch_compiles_the_serial_version_and_asks_for_the_parallel_one(
        monkeypatch):
    if numba.get_num_threads() < 2:
        pytest.skip("needs two Numba threads")
    monkeypatch.setattr(threads_module, "_following_load", False)
    kernel = _uncached_double()
    asked = _recorded_requests(monkeypatch)
    monkeypatch.setattr(threads_module, "RECHECK_SECONDS", 1e9)  # however slow compiling is
    large = np.arange(2 * GRAIN, dtype=np.float64)
    for _ in range(2):  # the second within RECHECK_SECONDS: no look into the cache, no request
        out = np.empty_like(large)
        kernel(out, large)
        np.testing.assert_array_equal(out, 2 * large)
    assert asked == [(kernel, "parallel", False)]
    assert kernel.serial.signatures and not kernel.parallel.signatures, \
        "the launch compiled the parallel version instead of leaving it to the helper"
    kernel.parallel(out, large)  # called directly, a version compiles as usual
    assert kernel.parallel.signatures


def test_a_first_run_launch_runs_the_parallel_version_on_one_thread_for_a_missing_serial(
        monkeypatch):
    if numba.get_num_threads() < 2:
        pytest.skip("needs two Numba threads")
    kernel = _uncached_double()
    small = np.arange(GRAIN, dtype=np.float64)
    kernel.parallel(np.empty_like(small), small)
    threads = numba.get_num_threads()
    asked = _recorded_requests(monkeypatch)
    out = np.empty_like(small)
    kernel(out, small)
    np.testing.assert_array_equal(out, 2 * small)
    assert asked == [(kernel, "serial", False)] and not kernel.serial.signatures
    assert numba.get_num_threads() == threads, "the launch must leave the thread count as it was"


def test_a_missing_serial_version_compiles_here_and_the_parallel_one_later(
        monkeypatch):
    kernel = _uncached_double()
    asked = _recorded_requests(monkeypatch)
    small = np.arange(GRAIN, dtype=np.float64)
    out = np.empty_like(small)
    kernel(out, small)
    np.testing.assert_array_equal(out, 2 * small)
    assert kernel.serial.signatures and not kernel.parallel.signatures
    assert asked == [(kernel, "parallel", True)], "the parallel version, for later runs"


def test_the_launch_whose_compilation_starts_the_helper_asks_it_for_the_parallel_one_later(
        monkeypatch):
    """A run's first compilation starts the helper (seqattn.first_run): the launch that made it
    had no helper to ask before compiling, but asks it afterwards for the version kept for later
    runs (without this, every warm run of the first layer compiled its parallel linear map)."""
    from numba.core import event

    kernel = _uncached_double()
    monkeypatch.setattr(threads_module, "_request_twin", None)
    asked = []

    class StartsTheHelper(event.Listener):
        def on_start(self, ev):
            threads_module.compile_twins_elsewhere(
                lambda k, version, argtypes, later=False: asked.append((k, version, later)))

        def on_end(self, ev):
            pass

    small = np.arange(GRAIN, dtype=np.float64)
    out = np.empty_like(small)
    with event.install_listener("numba:compile", StartsTheHelper()):
        kernel(out, small)
    np.testing.assert_array_equal(out, 2 * small)
    assert kernel.serial.signatures and not kernel.parallel.signatures
    assert asked == [(kernel, "parallel", True)], "the parallel version, for later runs"


def test_a_run_whose_first_launch_misses_starts_the_helper_and_hands_it_the_parallel_version(
        monkeypatch):
    """The first launch of a run may come before any compilation has started the helper; its
    parallel version, the slowest to compile, goes to the helper all the same."""
    if numba.get_num_threads() < 2:
        pytest.skip("needs two Numba threads")
    monkeypatch.setattr(threads_module, "_following_load", False)
    kernel = _uncached_double()
    asked = []
    monkeypatch.setattr(threads_module, "_start_helper", lambda: threads_module.
                        compile_twins_elsewhere(lambda k, version, argtypes, later=False:
                                                asked.append((k, version, later)) or True))
    large = np.arange(2 * GRAIN, dtype=np.float64)
    out = np.empty_like(large)
    kernel(out, large)
    np.testing.assert_array_equal(out, 2 * large)
    assert asked == [(kernel, "parallel", False)]
    assert kernel.serial.signatures and not kernel.parallel.signatures, \
        "the first launch compiled its parallel version instead of handing it over"


def test_a_launch_whose_version_is_in_the_disk_cache_starts_no_helper(monkeypatch):
    """A warm run loads its kernels from the cache: no helper process for it."""
    _double.serial(np.empty(4), np.arange(4.0))  # in the disk cache, if not already
    fresh = SizedKernel(_double.parallel.py_func, GRAIN, _double.work, {})
    started = []
    monkeypatch.setattr(threads_module, "_start_helper", lambda: started.append(True))
    small = np.arange(GRAIN, dtype=np.float64)
    out = np.empty_like(small)
    fresh(out, small)
    np.testing.assert_array_equal(out, 2 * small)
    assert started == [] and fresh.serial.signatures


def test_without_a_helper_a_launch_compiles_its_own_version(monkeypatch):
    if numba.get_num_threads() < 2:
        pytest.skip("needs two Numba threads")
    monkeypatch.setattr(threads_module, "_following_load", False)
    kernel = _uncached_double()
    asked = _recorded_requests(monkeypatch, helper_there=False)
    large = np.arange(2 * GRAIN, dtype=np.float64)
    kernel(np.empty_like(large), large)
    assert kernel.parallel.signatures and not kernel.serial.signatures
    assert asked == [(kernel, "parallel", False)]


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


def test_attention_threads_follow_the_score_products():
    """Attention's launchers size by the multiply-adds of q k^T, B H N M D."""
    rng = np.random.default_rng(0)
    small = prepare_attention(*(rng.standard_normal((1, 2, 16, 8)) for _ in range(3)))
    assert attention._score_work(small) == 1 * 2 * 16 * 16 * 8
    assert attention._forward_tasks.threads(attention._score_work(small)) == 1
    q = rng.standard_normal((1, 2, 512, 64))
    large = prepare_attention(q, q[:, :1, :384], q[:, :1, :384])
    assert attention._score_work(large) == 1 * 2 * 512 * 384 * 64
    assert attention._backward_tasks.threads(attention._score_work(large)) == \
        numba.get_num_threads()


@pytest.mark.parametrize("case", [c for c in attention_cases.CASES if c.small], ids=str)
def test_attention_in_parallel(case, parallel_everywhere):
    attention_cases.check_forward(seqattn.attention, case, np.float32)
    attention_cases.check_backward(seqattn.attention, seqattn.attention_backward, case,
                                   np.float32)
    attention_cases.check_weights(seqattn.attention_weights, case, np.float32)
    attention_cases.check_backward(tiny_tile_attention, tiny_tile_backward, case, np.float32)


@pytest.mark.parametrize("case", [c for c in STRUCTURED_CASES if c.small], ids=str)
def test_structured_biases_in_parallel(case, parallel_everywhere):
    check_structured(tiny_tile_attention, tiny_tile_backward, case, np.float32)


def _bits_on(running, monkeypatch, compute):
    """compute()'s results with every launch planned for all threads and run on ``running``."""
    monkeypatch.setattr(threads_module, "free_threads", lambda threads: min(threads, running))
    return compute()


def _op_results(case):
    inputs = _inputs(case)
    results = [_host(case.forward(**inputs))]
    if case.backward:
        dout = np.random.default_rng(1).normal(size=results[0].shape)
        results += [np.asarray(g) for g in case.backward(dout, **inputs).values()]
    return results


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c.family}-{c.name}")
def test_op_bits_do_not_depend_on_the_threads_that_run_them(case, parallel_everywhere,
                                                             monkeypatch):
    """A busy machine runs a launch's planned tasks on fewer threads: the same bits."""
    alone = _bits_on(numba.get_num_threads(), monkeypatch, lambda: _op_results(case))
    crowded = _bits_on(1, monkeypatch, lambda: _op_results(case))
    for a, b in zip(alone, crowded, strict=True):
        np.testing.assert_array_equal(a, b, err_msg=case.name)


@pytest.mark.parametrize("case", [c for c in attention_cases.CASES if c.small], ids=str)
def test_attention_bits_do_not_depend_on_the_threads_that_run_them(case, parallel_everywhere,
                                                                   monkeypatch):
    def results():
        found = []
        for forward, backward in ((seqattn.attention, seqattn.attention_backward),
                                  (tiny_tile_attention, tiny_tile_backward)):
            dout, q, k, v, opts = attention_cases.backward_inputs(case, np.float32)
            out, lse = forward(q, k, v, return_lse=True, **opts)
            grads = backward(dout, q, k, v, out, lse, bias_requires_grad="bias" in opts, **opts)
            found += [out, lse, *(g for g in grads if g is not None)]
        return found

    alone = _bits_on(numba.get_num_threads(), monkeypatch, results)
    crowded = _bits_on(1, monkeypatch, results)
    for a, b in zip(alone, crowded, strict=True):
        np.testing.assert_array_equal(a, b, err_msg=str(case))


def test_training_bits_do_not_depend_on_the_threads_that_run_it(parallel_everywhere,
                                                                monkeypatch):
    """fit() end to end: the weights after an epoch are the same bits whether a busy machine
    left every launch one thread or all of them."""
    from seqattn.models import TokenModel, TokenModelConfig
    from seqattn.train import AdamW, MSELoss, fit

    rng = np.random.default_rng(0)
    x = rng.normal(size=(8, 16, 3))
    y = rng.normal(size=(8, 16, 2))
    start = TokenModel(TokenModelConfig(in_features=3, out_features=2, d_model=16, nhead=2,
                                        num_layers=1, dim_feedforward=32, max_len=16,
                                        dtype="float64"))

    def trained():
        model = copy.deepcopy(start)
        fit(model, MSELoss(), AdamW(model, lr=1e-2), (x, y), epochs=1, batch_size=4,
            progress=False)
        return model.state_dict()

    alone = _bits_on(numba.get_num_threads(), monkeypatch, trained)
    crowded = _bits_on(1, monkeypatch, trained)
    assert alone.keys() == crowded.keys()
    for name in alone:
        assert not np.array_equal(alone[name], start.state_dict()[name]), f"{name} not trained"
        np.testing.assert_array_equal(alone[name], crowded[name], err_msg=name)
