"""A first run says that it compiles; a second one loads every kernel from Numba's disk cache,
with or without the helper process that compiles beside the first (seqattn.compile).

Each process is a small fit (a TokenModel without encoder layers, so that it compiles in
seconds: its linear, loss and optimizer kernels) with NUMBA_CACHE_DIR set to a new folder."""
import io
import os
import subprocess
import sys
import threading
import time
import types

import numba
import numpy as np
import pytest
from numba import prange

from seqattn.compile import HELPER_LOCK_SECONDS, VersionRequests, _helper_running, serve
from seqattn.first_run import NOTICE, CompileNotice
from seqattn.kernels.compiled_elsewhere import compiling_elsewhere, wait_for
from seqattn.kernels.cpu.threads import sized_kernel

FIT = """
import numpy as np
from numba.core import event

import seqattn
from seqattn.models import TokenModel, TokenModelConfig
from seqattn.train import AdamW, MSELoss, fit

compiled = []


class Count(event.Listener):
    def on_start(self, ev):
        if ev.data["dispatcher"].py_func.__module__.startswith("seqattn."):
            compiled.append(ev.data["dispatcher"].py_func.__qualname__)

    def on_end(self, ev):
        pass


event.register("numba:compile", Count())
x = np.random.default_rng(0).standard_normal((8, 4, 3)).astype(np.float32)
model = TokenModel(TokenModelConfig(in_features=3, out_features=2, d_model=8, nhead=2,
                                    num_layers=0, dim_feedforward=8, max_len=4))
fit(model, MSELoss(), AdamW(model, lr=1e-3), (x, x[..., :2]), epochs=1, batch_size=4,
    progress=False)
print(len(compiled))
"""


def _fit_in_new_process(cache, helper=False):
    env = dict(os.environ, NUMBA_CACHE_DIR=str(cache), SEQATTN_COMPILE_HELPER=str(int(helper)))
    for name in ("NUMBA_DISABLE_JIT", "SEQATTN_COMPILE_NOTICE"):
        env.pop(name, None)
    done = subprocess.run([sys.executable, "-c", FIT], env=env, capture_output=True, text=True,
                          check=True)
    return int(done.stdout.split()[-1]), done.stderr


def test_a_first_run_says_it_compiles_and_a_second_compiles_nothing(tmp_path):
    compiled, stderr = _fit_in_new_process(tmp_path)
    assert compiled > 0
    assert stderr.count(NOTICE) == 1, stderr
    assert f"seqattn: {compiled} kernels compiled in " in stderr, "no progress, or a wrong count"
    compiled, stderr = _fit_in_new_process(tmp_path)
    assert compiled == 0, "the second process compiled instead of loading from the cache"
    assert NOTICE not in stderr and "kernels compiled" not in stderr, stderr


def test_with_the_helper_a_second_run_compiles_nothing_once_the_helper_is_done(tmp_path):
    """The helper compiles into the same cache the versions that the first run's launches did
    not take (the parallel ones of these small launches), for later runs."""
    compiled, stderr = _fit_in_new_process(tmp_path, helper=True)
    assert compiled > 0 and stderr.count(NOTICE) == 1, stderr
    locks = list(tmp_path.glob("*/seqattn-compile-helper.lock"))
    requests = list(tmp_path.glob("*/seqattn-compile-helper-requests"))
    assert requests, "no helper was started"
    deadline = time.monotonic() + HELPER_LOCK_SECONDS
    while any(lock.exists() for lock in locks) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not any(lock.exists() for lock in locks), "the helper did not end"
    assert not list(requests[0].iterdir()), "requests left unserved"
    parallel_entries = [index for index in tmp_path.glob("*/*.nbi")
                        if "_serial" not in index.name and "linear" in index.name]
    assert parallel_entries, "the helper compiled no parallel version"
    compiled, stderr = _fit_in_new_process(tmp_path, helper=True)
    assert compiled == 0, "the second process compiled instead of loading from the cache"
    assert NOTICE not in stderr, stderr


def test_a_launch_waits_for_the_process_compiling_its_kernel():
    polls, waits = [], []

    def done():
        polls.append(1)
        return len(polls) > 3

    compiling_elsewhere(["toy.kernel"], done, on_wait=lambda: waits.append(1))
    wait_for("toy.kernel", poll_seconds=0)
    assert len(polls) == 4 and waits == [1]
    wait_for("toy.kernel", poll_seconds=0)
    assert len(polls) == 4, "waited twice for one kernel"


def _running_helper(tmp_path):
    """A helper's lock and requests folder, the helper being this process (alive)."""
    lock = tmp_path / "seqattn-compile-helper.lock"
    lock.write_text(str(os.getpid()))
    (tmp_path / "seqattn-compile-helper-requests").mkdir()
    return str(lock)


def test_a_launch_takes_back_a_job_that_the_helper_has_not_started(tmp_path, monkeypatch):
    """Waiting for a job still in the helper's queue would take longer than compiling it: the
    launch withdraws it (and compiles it itself), and the helper skips it."""
    import seqattn.compile
    from seqattn.compile import hand_over

    lock = _running_helper(tmp_path)
    hand_over(lock, "adam-step", ["toy.first", "toy.second"])
    launches = threading.Thread(target=lambda: [wait_for(n) for n in ("toy.first", "toy.second")],
                                daemon=True)
    launches.start()
    launches.join(timeout=5)
    assert not launches.is_alive(), "waits for a job that the helper has not started"
    assert list((tmp_path / "seqattn-compile-helper-requests").iterdir()) == []
    served = []
    monkeypatch.setattr(seqattn.compile, "run_job", lambda job, parallel_twins: served.append(job))
    serve(lock, client=_ended_process())
    assert served == []


def test_a_launch_waits_for_a_job_that_the_helper_has_started(tmp_path, monkeypatch):
    import seqattn.compile
    from seqattn.compile import hand_over

    lock = _running_helper(tmp_path)

    def run_job(job, parallel_twins):
        time.sleep(0.5)
        served.append(job)
    served = []
    monkeypatch.setattr(seqattn.compile, "run_job", run_job)
    hand_over(lock, "adam-step", ["toy.launch"])
    helper = threading.Thread(target=serve, args=(lock, _ended_process()))
    helper.start()
    while not served and not any(p.name.endswith(".serving") for p in
                                 (tmp_path / "seqattn-compile-helper-requests").iterdir()):
        time.sleep(0.01)
    wait_for("toy.launch", poll_seconds=0.01)
    assert served == ["adam-step"], "went on before the helper had compiled it"
    helper.join()


class _Stream(io.StringIO):
    def __init__(self, terminal):
        super().__init__()
        self.terminal = terminal

    def isatty(self):
        return self.terminal


def _compile_events(notice, names):
    """What Numba tells a listener when it compiles functions of these modules, one by one."""
    for module in names:
        _compile_named(notice, module, "kernel")


def test_the_notice_counts_seqattn_kernels_only_on_a_bar_or_in_lines():
    for terminal in (True, False):
        stream = _Stream(terminal)
        notice = CompileNotice(stream, start_helper=False)
        _compile_events(notice, ["numpy_user_code", "seqattn.kernels.cpu.x",
                                 "seqattn.kernels.cpu.y", "other"])
        notice.close()
        shown = stream.getvalue()
        assert shown.count(NOTICE) == 1 and notice.compiled == 2
        expected = "compiling: 2 kernels" if terminal else "seqattn: 2 kernels compiled in"
        assert expected in shown, shown


def test_the_helper_starts_at_the_first_compilation_and_takes_each_backward_once(
        monkeypatch):
    import seqattn.compile
    from seqattn.kernels import compiled_elsewhere

    helpers, started, products = [], [], []
    # the notice's start hands its C functions' requests to this stand-in helper: for this test
    monkeypatch.setattr(compiled_elsewhere, "_hand_over_function", None)
    monkeypatch.setattr(seqattn.compile, "start_helper", lambda: helpers.append(1) or "lock")
    monkeypatch.setattr(seqattn.compile, "hand_over",
                        lambda lock, job, launches, on_wait, priority:
                        started.append((lock, job, priority)))
    monkeypatch.setattr(seqattn.compile, "hand_over_products", products.append)
    notice = CompileNotice(_Stream(False), start_helper=True)
    plain, with_pair = _score_modifications(pair=False), _score_modifications(pair=True)
    # the short kernel's arguments end with the batch geometry, None without structured biases
    nb = numba.types
    # the kernels' output first: the float32 call's, whose signature the helper's jobs have
    f32, f64 = nb.float32[:, ::1], nb.float64[:, ::1]
    for module, name, args in [
            ("seqattn.kernels.cpu.layer_norm", "layer_norm_forward_serial", (f64,)),
            ("seqattn.kernels.cpu.linear", "_linear_forward_serial", (f32,)),
            ("seqattn.kernels.cpu.attention_small", "_forward_tasks",
             (nb.int64, f32, with_pair, nb.none)),
            ("seqattn.kernels.cpu.attention_small", "_forward_tasks",
             (nb.int64, f32, plain, nb.none)),
            ("seqattn.kernels.cpu.attention", "_backward_tasks_serial", (f32, plain)),
            ("seqattn.kernels.cpu.attention", "_forward_tasks_serial", (f32, with_pair)),
            ("seqattn.kernels.cpu.layer_norm", "layer_norm_forward_serial", (f32,)),
            ("seqattn.kernels.cpu.heads", "split_heads_forward_serial",
             (nb.float32[:, :, :, :, ::1],))]:
        _compile_named(notice, module, name, args)
    assert helpers == [1], "one helper, from the first compilation on"
    assert products == ["lock"], "the register products, once, at the helper's start"
    handed = [("lock", "linear-backward", "0"), ("lock", "short-backward", "0"),
              ("lock", "layer-norm-backward", "1"), ("lock", "merge-heads", "1")]
    assert started == handed, "a backward for a forward whose signature it lacks"
    for name in ("_forward_tasks_serial", "_forward_tasks"):
        _compile_named(notice, "seqattn.kernels.cpu.attention", name, (f32, plain))
    _compile_named(notice, "seqattn.kernels.cpu.linear", "_linear_forward", (f32,))
    assert started == handed + [("lock", "tiled-backward", "0")] and helpers == [1]
    assert products == ["lock"]
    notice.close()


_PRODUCTS_CHILD = """
import json
from seqattn.compile import PRODUCTS, run_job
from seqattn.kernels.cpu.called_by_name import _COMPILED, available
from seqattn.kernels.cpu.gemm.register_gemm import IN_REGISTERS
before = [available(symbol) for symbol in PRODUCTS]
run_job("register-products", parallel_twins=False)
print(json.dumps({"before": before, "registered": [s in _COMPILED for s in PRODUCTS],
                  "in_registers": IN_REGISTERS}))
"""


def test_the_register_products_job_fills_the_cache_a_first_attention_kernel_loads(tmp_path):
    """What the helper compiles first: the C functions that the run's float32 attention
    kernels then find in the cache (available), where float32 products take them."""
    from cache_child import run_on_cache

    first = run_on_cache(_PRODUCTS_CHILD, tmp_path)
    if not first["in_registers"]:
        pytest.skip("float32 products go through BLAS on this CPU")
    second = run_on_cache(_PRODUCTS_CHILD, tmp_path)
    assert all(first["registered"]) and not any(first["before"]), "compiled on an empty cache"
    assert all(second["before"]), "not found in the cache by the next process"


def _score_modifications(pair):
    """The type of attention._mods(call) for a call without a distance bias, with or without
    a pair bias (None marks an absent one)."""
    from numba import types as nb

    from seqattn.kernels.cpu.attention import PAIR_AT, STRUCTURED_AT

    fields = [nb.int64] * (PAIR_AT + 7)
    fields[STRUCTURED_AT] = nb.none
    fields[PAIR_AT] = nb.int64 if pair else nb.none
    return nb.Tuple(fields)


# (the model's heads and positions, the backward job of its attention, whether it splits heads
# and so takes the merge-heads job): self-attention straight from the packed projection
# (ops.packed_attention, in the views' layouts of many heads or of one), and rotary positions,
# which rotate heads of their own
MODEL_ATTENTION_JOBS = [(2, "sinusoidal", "packed-backward", False),
                        (1, "sinusoidal", "packed-one-head-backward", False),
                        (2, "rope", "short-backward", True)]


@pytest.mark.parametrize("nhead, positions, attention_job, splits", MODEL_ATTENTION_JOBS)
def test_the_helper_jobs_compile_the_backward_signatures_a_model_trains_with(
        monkeypatch, nhead, positions, attention_job, splits):
    """What the helper compiles is of use only if the run's launches have its signatures."""
    from seqattn.compile import (JOBS, gelu_backward_job, layer_norm_backward_job,
                                 linear_backward_job, merge_heads_job)
    from seqattn.kernels.cpu import activations, attention_small, heads, layer_norm, linear
    from seqattn.models import TokenModel, TokenModelConfig
    from seqattn.train import AdamW, MSELoss, fit

    launched = {}
    for kernel in (linear._linear_backward, attention_small._backward_tasks,
                   layer_norm._layer_norm_backward, activations._gelu_backward_f32,
                   heads.split_heads_backward):
        def run(threads, *args, kernel=kernel, run=kernel.run):
            launched[(kernel.__name__, tuple(numba.typeof(a) for a in args))] = source[0]
            return run(threads, *args)
        monkeypatch.setattr(kernel, "run", run)
    source = ["job"]
    for job in (linear_backward_job, JOBS[attention_job], layer_norm_backward_job,
                gelu_backward_job) + ((merge_heads_job,) if splits else ()):
        job()
    jobs = set(launched)
    assert {name for name, _ in jobs} == {"_linear_backward", "_backward_tasks",
                                          "_layer_norm_backward", "_gelu_backward_f32"} | (
        {"split_heads_backward"} if splits else set())
    source[0] = "model"
    x = np.random.default_rng(0).standard_normal((4, 6, 3)).astype(np.float32)
    # the examples' smallest width: on AVX2 its layers take the register path and BLAS's
    # (narrow ones: 3 -> 16, 16 -> 8, 16 -> 2), as the examples' do
    model = TokenModel(TokenModelConfig(in_features=3, out_features=2, d_model=16, nhead=nhead,
                                        num_layers=1, dim_feedforward=8, max_len=6,
                                        positions=positions))
    fit(model, MSELoss(), AdamW(model, lr=1e-3), (x, x[..., :2]), epochs=1, batch_size=4,
        progress=False)
    assert sorted(launched.values()).count("model") == len(jobs), "a backward not launched"
    assert set(launched) == jobs, \
        "the model's backward launches took signatures that the helper's jobs did not compile"


@pytest.mark.parametrize("nhead, positions, attention_job, splits", MODEL_ATTENTION_JOBS)
def test_a_model_s_attention_forward_hands_the_helper_the_job_of_its_backward(
        monkeypatch, nhead, positions, attention_job, splits):
    """The short forward's argument types, as the model launches it, choose the job whose
    signatures the test above pins."""
    import seqattn.compile
    from seqattn.kernels import compiled_elsewhere
    from seqattn.kernels.cpu import attention_small
    from seqattn.models import TokenModel, TokenModelConfig

    forwards, handed = [], []
    kernel = attention_small._forward_tasks

    def run(threads, *args, run=kernel.run):
        forwards.append(tuple(numba.typeof(a) for a in args))
        return run(threads, *args)
    monkeypatch.setattr(kernel, "run", run)
    monkeypatch.setattr(compiled_elsewhere, "_hand_over_function", None)
    monkeypatch.setattr(seqattn.compile, "start_helper", lambda: "lock")
    monkeypatch.setattr(seqattn.compile, "hand_over_products", lambda lock: None)
    monkeypatch.setattr(seqattn.compile, "hand_over",
                        lambda lock, job, launches, on_wait, priority: handed.append(job))
    model = TokenModel(TokenModelConfig(in_features=3, out_features=2, d_model=8, nhead=nhead,
                                        num_layers=1, dim_feedforward=8, max_len=6,
                                        positions=positions))
    model(np.zeros((4, 6, 3), np.float32))
    notice = CompileNotice(_Stream(False), start_helper=True)
    _compile_named(notice, "seqattn.kernels.cpu.attention_small", "_forward_tasks",
                   forwards[0])
    assert handed == [attention_job]
    notice.close()


@pytest.mark.parametrize("optimizer", ["AdamW", "SGD"])
def test_the_step_end_jobs_compile_the_signatures_that_fit_launches(monkeypatch, optimizer):
    """The helper's jobs for the end of a training step (compile.STEP_END_JOBS) launch each
    kernel that fit's step ends with, with the signature of fit's launch."""
    import seqattn.train
    from seqattn.compile import JOBS, STEP_END_JOBS
    from seqattn.kernels.cpu import optimizers, sums_of_squares
    from seqattn.models import TokenModel, TokenModelConfig
    from seqattn.train import MSELoss, fit

    kernels = {kernel.__qualname__: kernel for kernel in (
        sums_of_squares.sums_of_squares, optimizers._adam_update_many, optimizers.sgd_update)}
    launched = {}
    for kernel in kernels.values():
        def run(threads, *args, kernel=kernel, run=kernel.run):
            launched.setdefault(source[0], set()).add(
                (kernel.__qualname__, tuple(numba.typeof(a) for a in args)))
            return run(threads, *args)
        monkeypatch.setattr(kernel, "run", run)
    source = ["model"]
    x = np.random.default_rng(0).standard_normal((4, 6, 3)).astype(np.float32)
    model = TokenModel(TokenModelConfig(in_features=3, out_features=2, d_model=8, nhead=2,
                                        num_layers=0, dim_feedforward=8, max_len=6))
    fit(model, MSELoss(), getattr(seqattn.train, optimizer)(model, lr=1e-3), (x, x[..., :2]),
        epochs=1, batch_size=4, progress=False)
    job, launches = STEP_END_JOBS["adam" if optimizer == "AdamW" else "other"]
    source[0] = "job"
    JOBS[job]()
    assert {name for name, _ in launched["job"]} == {n.rsplit(".", 1)[1] for n in launches}
    assert launched["job"] <= launched["model"], \
        "fit's step launched its kernels with signatures that the helper's job did not compile"


@pytest.mark.parametrize("avx512", [True, False])
def test_a_forward_whose_dweight_may_take_registers_asks_the_helper_for_the_driver(
        monkeypatch, avx512):
    """The backward of a large enough product on AVX-512 (packed_gemm.gemm_tn, MIN_WORK), of
    a small enough weight on AVX2 (packed_gemm.avx2_in_registers), takes the register
    driver: its forward asks the helper for it, which the backward then loads."""
    from seqattn import ops
    from seqattn.compile import FUNCTION_JOBS
    from seqattn.kernels import compiled_elsewhere
    from seqattn.kernels.cpu import linear
    from seqattn.kernels.cpu.gemm.packed_gemm import AVX2_MAX_WEIGHT, DRIVER, MIN_WORK

    asked = []
    monkeypatch.setattr(compiled_elsewhere, "_hand_over_function", asked.append)
    # as on AVX-512 or on AVX2, with OpenBLAS
    monkeypatch.setattr(linear, "TN_IN_REGISTERS", avx512)
    monkeypatch.setattr(linear, "AVX2_IN_REGISTERS", not avx512)
    rng = np.random.default_rng(0)
    weight = rng.standard_normal((64, 64), dtype=np.float32)
    for rows in (30, MIN_WORK // 64 // 64 - 1, MIN_WORK // 64 // 64):
        ops.linear(rng.standard_normal((rows, 64), dtype=np.float32), weight)
    ops.linear(rng.standard_normal((MIN_WORK // 64 // 64, 64)), weight.astype(np.float64))
    ops.linear(rng.standard_normal((30, AVX2_MAX_WEIGHT // 64 + 1), dtype=np.float32),
               rng.standard_normal((64, AVX2_MAX_WEIGHT // 64 + 1), dtype=np.float32))
    wanted = [DRIVER] * (1 if avx512 else 3)
    assert asked == wanted, "asked for by the float32 products that may take it"
    assert FUNCTION_JOBS[DRIVER] == "dweight-driver"


def test_the_notice_hands_the_helper_a_c_function_once_where_the_cache_lacks_it(monkeypatch):
    import seqattn.compile
    from seqattn.kernels.cpu import called_by_name

    handed = []
    monkeypatch.setattr(seqattn.compile, "hand_over",
                        lambda lock, job, launches, on_wait: handed.append((lock, job, launches)))
    monkeypatch.setattr(seqattn.compile, "FUNCTION_JOBS", {"absent": "a", "cached": "c"})
    monkeypatch.setattr(called_by_name, "available", lambda symbol: symbol == "cached")
    notice = CompileNotice(_Stream(False), start_helper=True)
    notice._helper_lock = "lock"
    for symbol in ("absent", "cached", "absent"):
        notice._hand_over_function(symbol)
    assert handed == [("lock", "a", ("absent",))]


def test_the_driver_job_fills_the_cache_a_large_dweight_loads(tmp_path):
    """What the helper compiles when asked for the driver: the C function that the run's
    large dW then finds in the cache."""
    from cache_child import run_on_cache

    child = """
import json
from seqattn.compile import FUNCTION_JOBS, run_job
from seqattn.kernels.cpu.called_by_name import _COMPILED, available
from seqattn.kernels.cpu.gemm.packed_gemm import DRIVER, TN_IN_REGISTERS
before = available(DRIVER)
run_job(FUNCTION_JOBS[DRIVER], parallel_twins=False)
print(json.dumps({"before": before, "registered": DRIVER in _COMPILED,
                  "in_registers": bool(TN_IN_REGISTERS)}))
"""
    first = run_on_cache(child, tmp_path)
    if not first["in_registers"]:
        pytest.skip("float32 dW goes through BLAS on this CPU")
    second = run_on_cache(child, tmp_path)
    assert first["registered"] and not first["before"] and second["before"]


def test_the_step_end_jobs_leave_the_training_package_unimported(tmp_path):
    """The helper runs them while the run waits at its step's end: they call the ops, without
    the import of seqattn.train (most of a second)."""
    from cache_child import run_on_cache

    child = """
import json, sys
from seqattn.compile import STEP_END_JOBS, run_job
for job, _ in STEP_END_JOBS.values():
    run_job(job, parallel_twins=False)
print(json.dumps({"train": "seqattn.train" in sys.modules}))
"""
    assert not run_on_cache(child, tmp_path)["train"]


def test_the_attention_jobs_reach_the_short_and_the_tiled_kernel():
    from seqattn.compile import LONG, SHORT
    from seqattn.kernels.cpu.attention_small import MAX_LENGTH

    # ops.attention's choice (_short_sequence_kernels): the helper's LONG job must be tiled
    assert SHORT <= MAX_LENGTH < LONG


def _compile_named(notice, module, qualname, args=()):
    func = types.SimpleNamespace(__module__=module, __qualname__=qualname)
    ev = types.SimpleNamespace(data={"dispatcher": types.SimpleNamespace(py_func=func),
                                     "args": args})
    notice.on_start(ev)
    notice.on_end(ev)


def test_nothing_is_shown_without_a_seqattn_compilation():
    stream = _Stream(False)
    notice = CompileNotice(stream, start_helper=False)
    _compile_events(notice, ["numpy_user_code"])
    notice.close()
    assert stream.getvalue() == ""


def test_importing_seqattn_compiles_nothing_and_says_nothing(tmp_path):
    code = ("from numba.core import event\n"
            "event.register('numba:compile', event.RecordingListener())\n"
            "listener = event._registered['numba:compile'][-1]\n"
            "import seqattn\n"
            "print(len(listener.buffer))\n")
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path))
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          check=True)
    assert done.stdout.split() == ["0"] and done.stderr == ""


def test_a_helper_counts_as_running_while_its_process_lives_and_its_lock_is_fresh(tmp_path):
    lock = tmp_path / "seqattn-compile-helper.lock"
    assert not _helper_running(str(lock)), "no lock"
    lock.write_text(str(os.getpid()))
    assert _helper_running(str(lock))
    finished = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                              capture_output=True, text=True, check=True)
    lock.write_text(finished.stdout.strip())
    assert not _helper_running(str(lock)), "the lock of a process that has ended"
    lock.write_text(str(os.getpid()))
    old = os.path.getmtime(lock) - HELPER_LOCK_SECONDS - 1
    os.utime(lock, (old, old))
    assert not _helper_running(str(lock)), "a lock older than a helper ever takes"


@sized_kernel(8)
def _toy_kernel(out, x):
    for i in prange(x.size):
        out[i] = x[i] + 1


def _ended_process():
    finished = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                              capture_output=True, text=True, check=True)
    return int(finished.stdout)


def test_the_helper_compiles_each_requested_version_once_then_ends(tmp_path):
    from numba.core.caching import NullCache

    _toy_kernel.parallel._cache = NullCache()  # what it compiles shows in this process only
    lock = tmp_path / "seqattn-compile-helper.lock"
    lock.write_text(str(os.getpid()))  # a helper is running: this process, for the requests
    requests = VersionRequests(str(lock))
    folder = tmp_path / "seqattn-compile-helper-requests"
    folder.mkdir()
    argtypes = (numba.typeof(np.zeros(3)),) * 2
    assert requests(_toy_kernel, "parallel", argtypes)
    assert requests(_toy_kernel, "parallel", argtypes)
    assert len(list(folder.iterdir())) == 1, "a version asked twice"
    serve(str(lock), client=_ended_process())
    assert list(folder.iterdir()) == [] and not lock.exists()
    assert argtypes in _toy_kernel.parallel.overloads
    assert not requests(_toy_kernel, "parallel", argtypes), "no helper is running any more"


def test_the_helper_serves_the_end_of_a_step_after_the_backward_jobs(tmp_path, monkeypatch):
    import seqattn.compile
    from seqattn.compile import JOB_PRIORITY, STEP_END_PRIORITY, _write_request

    served = []
    monkeypatch.setattr(seqattn.compile, "run_job", lambda job, parallel_twins: served.append(job))
    lock = tmp_path / "seqattn-compile-helper.lock"
    lock.write_text(str(os.getpid()))
    (tmp_path / "seqattn-compile-helper-requests").mkdir()
    for priority, job in ((STEP_END_PRIORITY, "adam-step"), (JOB_PRIORITY, "linear-backward"),
                          (JOB_PRIORITY, "short-backward")):
        _write_request(str(lock), priority, dict(job=job, call=None))
    serve(str(lock), client=_ended_process())
    assert served == ["linear-backward", "short-backward", "adam-step"]


_TWINS_CHILD = """
import json, os, subprocess, sys
from seqattn.compile import JOB_PRIORITY, TWINNED_JOBS, _write_request, serve
from seqattn.kernels.cpu.activations import _gelu_backward_f32
folder = os.environ["NUMBA_CACHE_DIR"]
lock = os.path.join(folder, "seqattn-compile-helper.lock")
os.makedirs(lock.removesuffix(".lock") + "-requests")
with open(lock, "w") as f:
    f.write(str(os.getpid()))
_write_request(lock, JOB_PRIORITY, dict(job="gelu-backward", call=None))
ended = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                       capture_output=True, text=True).stdout
serve(lock, client=int(ended))
print(json.dumps({"twinned": "gelu-backward" in TWINNED_JOBS,
                  "serial": [str(s) for s in _gelu_backward_f32.serial.signatures],
                  "parallel": [str(s) for s in _gelu_backward_f32.parallel.signatures]}))
"""


def test_the_helper_compiles_the_parallel_versions_of_a_small_job_after_the_run(tmp_path):
    """A run used to compile the small kernels that the helper now compiles, and then asked it
    for their parallel versions for later runs (a launch on a quieter machine takes them): the
    helper asks itself for those once the run has ended."""
    from cache_child import run_on_cache

    run = run_on_cache(_TWINS_CHILD, tmp_path)
    assert run["twinned"] and run["serial"] and run["parallel"] == run["serial"]


def _structured_call(kind):
    """A prepared attention call with a distance bias (element types, smooth cutoff), or with
    pair codes."""
    from seqattn.ops import PairBias
    from seqattn.ops.attention_inputs import prepare_attention

    rng = np.random.default_rng(0)
    q = rng.standard_normal((2, 2, 5, 8)).astype(np.float32)
    if kind == "pair":
        codes = rng.integers(-1, 4, (2, 5, 5)).astype(np.int8)
        return prepare_attention(q, q, q, pair_bias=PairBias(
            table=rng.standard_normal((2, 4)).astype(np.float32), codes=codes))
    return prepare_attention(q, q, q, distance_bias=_distance_bias(rng))


def _distance_bias(rng):
    """The distance bias (element types, smooth cutoff) of _structured_call, B 2, H 2, N 5."""
    from seqattn.ops import DistanceBias

    return DistanceBias(x=rng.random((2, 5, 3)).astype(np.float32),
                        table=rng.standard_normal((3, 3, 2, 8)).astype(np.float32), r_max=3.0,
                        cutoff=2.5, smooth_cutoff=True,
                        types=rng.integers(0, 3, (2, 5)).astype(np.int32))


def test_a_structured_call_hands_the_helper_its_backward_once_per_signature(monkeypatch):
    import seqattn.compile

    handed = []
    monkeypatch.setattr(seqattn.compile, "hand_over",
                        lambda lock, job, launches, on_wait, call: handed.append((job, call)))
    notice = CompileNotice(_Stream(False), start_helper=True)
    distance, pair = _structured_call("distance"), _structured_call("pair")
    notice.hand_over_backward_of(distance)  # no helper: nothing
    assert handed == []
    notice._helper_lock = "lock"
    for call in (distance, distance, pair, _structured_call("distance"), pair):
        notice.hand_over_backward_of(call)
    assert [(job, call.distance.has, bool(call.pair.mode)) for job, call in handed] == [
        ("structured-backward", True, False), ("structured-backward", False, True)]


def _short_backward_launches(monkeypatch):
    """The argument types of every launch of the short attention backward from now on."""
    from seqattn.kernels.cpu import attention_small

    launched = []
    kernel = attention_small._backward_tasks

    def run(threads, *args, run=kernel.run):
        launched.append(tuple(numba.typeof(a) for a in args[1:]))
        return run(threads, *args)
    monkeypatch.setattr(kernel, "run", run)
    return launched


def test_the_helper_job_of_a_structured_call_compiles_its_backward_signature(monkeypatch):
    """The helper's job runs the backward of the pickled call itself: the model's launch then
    has its signature."""
    import pickle

    from seqattn.compile import backward_of_call_job
    from seqattn.ops.attention import attention_backward_of_call, attention_of_call

    launched = _short_backward_launches(monkeypatch)
    call = _structured_call("distance")
    backward_of_call_job(pickle.loads(pickle.dumps(call)))
    out, lse = attention_of_call(call, return_lse=True)
    attention_backward_of_call(call, np.ones_like(out), out, lse)
    assert len(launched) == 2 and launched[0] == launched[1]


def _packed_structured_call():
    """The prepared packed self-attention (ops.packed_attention) of a distance-biased call:
    its heads are views of the packed projection."""
    from seqattn.ops.packed_attention import prepare_packed_attention

    rng = np.random.default_rng(0)
    qkv = rng.standard_normal((2, 5, 3 * 2 * 8)).astype(np.float32)
    return prepare_packed_attention(qkv, 2, distance_bias=_distance_bias(rng))


def test_a_packed_structured_call_hands_the_helper_a_job_that_compiles_its_signature(
        monkeypatch):
    """The heads of a packed call are strided views, which pickle contiguous: its job (one of
    its own, beside the same call's contiguous one) makes them views again, and then has the
    signature of the model's backward launch."""
    import pickle

    import seqattn.compile
    from seqattn.compile import backward_of_call_job
    from seqattn.ops.packed_attention import (packed_attention_backward_of_call,
                                              packed_attention_of_call)

    handed = []
    monkeypatch.setattr(seqattn.compile, "hand_over",
                        lambda lock, job, launches, on_wait, call: handed.append((job, call)))
    notice = CompileNotice(_Stream(False), start_helper=True)
    notice._helper_lock = "lock"
    packed = _packed_structured_call()
    for call in (packed.call, _structured_call("distance"), packed.call):
        notice.hand_over_backward_of(call)
    assert [job for job, _ in handed] == ["packed-structured-backward", "structured-backward"]

    launched = _short_backward_launches(monkeypatch)
    backward_of_call_job(pickle.loads(pickle.dumps(handed[0][1])), packed=True)
    out, heads, lse = packed_attention_of_call(packed)
    packed_attention_backward_of_call(packed, np.ones_like(out), heads, lse)
    assert len(launched) == 2 and launched[0] == launched[1]
    assert any(t.layout == "A" for t in launched[0] if isinstance(t, numba.types.Array))
