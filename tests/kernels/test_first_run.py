"""A first run says that it compiles; a second one loads every kernel from Numba's disk cache.

Each process is a small fit (a TokenModel without encoder layers, so that it compiles in
seconds: its linear, loss and optimizer kernels) with NUMBA_CACHE_DIR set to a new folder."""
import io
import os
import subprocess
import sys
import types

from seqattn.compile import HELPER_LOCK_SECONDS, _helper_running
from seqattn.first_run import NOTICE, CompileNotice
from seqattn.kernels.compiled_elsewhere import compiling_elsewhere, wait_for

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


def _fit_in_new_process(cache):
    # No helper process: this fit has no attention backward for it to compile.
    env = dict(os.environ, NUMBA_CACHE_DIR=str(cache), SEQATTN_COMPILE_HELPER="0")
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


def test_the_helper_starts_at_the_tiled_forward_only_once(monkeypatch):
    import seqattn.compile

    started = []
    monkeypatch.setattr(seqattn.compile, "start_helper", lambda on_wait: started.append(1))
    notice = CompileNotice(_Stream(False), start_helper=True)
    plain, with_pair = _score_modifications(pair=False), _score_modifications(pair=True)
    for module, name, args in [
            ("seqattn.kernels.cpu.linear", "_linear_forward_serial", ()),
            ("seqattn.kernels.cpu.attention_small", "_forward_tasks", (plain,)),
            ("seqattn.kernels.cpu.attention", "_backward_tasks_serial", (plain,)),
            ("seqattn.kernels.cpu.attention", "_forward_tasks_serial", (with_pair,))]:
        _compile_named(notice, module, name, args)
    assert started == [], "a helper for a run whose tiled forward it does not match"
    for name in ("_forward_tasks_serial", "_forward_tasks"):
        _compile_named(notice, "seqattn.kernels.cpu.attention", name, (plain,))
    assert started == [1]
    notice.close()


def _score_modifications(pair):
    """The type of attention._mods(call) for a call without a distance bias, with or without
    a pair bias (None marks an absent one)."""
    from numba import types as nb

    from seqattn.kernels.cpu.attention import PAIR_AT, STRUCTURED_AT

    fields = [nb.int64] * (PAIR_AT + 7)
    fields[STRUCTURED_AT] = nb.none
    fields[PAIR_AT] = nb.int64 if pair else nb.none
    return nb.Tuple(fields)


def test_the_attention_jobs_reach_the_short_and_the_tiled_kernel():
    from seqattn.compile import HEAD_DIM, LONG, SHORT
    from seqattn.kernels.cpu.attention_small import MAX_LENGTH_TIMES_HEAD_DIM

    # ops.attention's choice (_short_sequence_kernels): the helper's LONG job must be tiled
    assert SHORT * HEAD_DIM <= MAX_LENGTH_TIMES_HEAD_DIM < LONG * HEAD_DIM


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
