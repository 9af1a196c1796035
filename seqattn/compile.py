"""Compile seqattn's kernels for this machine ahead of a first run: ``python -m seqattn.compile``.

Numba compiles each kernel the first time a process calls it and keeps it in its disk cache
(``NUMBA_CACHE_DIR``, else beside the sources); later processes load it in a fraction of a
second. This fills that cache for the common models: float32 attention forward and backward
(the slowest kernels by far), then a few training steps of a TokenModel (N -> N) and of a
SequenceModel (N -> 1, classes), with the parallel version of every kernel they launched
serially (a launch big enough for several threads takes it). Each job runs in its own process,
as many at once as there are cores, since Numba compiles on one thread per process.

    python -m seqattn.compile                 # every job, one process per core
    python -m seqattn.compile --processes 1   # one job at a time
    python -m seqattn.compile --list          # the jobs, without compiling

A first run that skips this step compiles as it goes (saying so, with a progress bar): when it
compiles the tiled attention forward, it hands the tiled backward to one helper process
(:func:`start_helper`) while it compiles the rest.
Set ``SEQATTN_COMPILE_HELPER=0`` to keep every compilation in the calling process.
"""
import argparse
import contextlib
import os
import subprocess
import sys
import time

import numpy as np

# The compilation at whose start a first run starts the helper: the tiled attention forward's
# (its serial, parallel or AMX version), which every run that trains through the tiled
# backward compiles first; a run whose attention takes another kernel starts no helper.
HELPER_AFTER = "seqattn.kernels.cpu.attention._forward_tasks"
# The tiled attention backward's launches, which the helper process compiles on a first run.
BACKWARD_KERNELS = ("seqattn.kernels.cpu.attention._backward_tasks",
                    "seqattn.kernels.cpu.attention._row_delta_rows")
HELPER_SWITCH = "SEQATTN_COMPILE_HELPER"
# A helper lock older than this is left over from a process that was killed.
HELPER_LOCK_SECONDS = 900


# Sequence lengths of the attention jobs: ops.attention may run short sequences through a kernel
# of their own and long ones through the tiled kernel of kernels/cpu/attention.py; the jobs
# take one of each, and the helper the long one (the tiled backward is the one it compiles).
SHORT, LONG = 16, 320
HEAD_DIM = 8


def _qkv(rng, length, dtype=np.float32):
    return [rng.standard_normal((1, 2, length, HEAD_DIM)).astype(dtype) for _ in range(3)]


def tiled_backward_job():
    """The tiled attention backward (float32): what the helper process compiles.

    From made-up saved outputs: its signature is the one every model's call has (absent
    options are placeholders, attention_inputs.py)."""
    from .ops import attention_backward

    q, k, v = _qkv(np.random.default_rng(0), LONG)
    out, lse = np.zeros_like(q), np.zeros(q.shape[:3], np.float32)
    attention_backward(q, q, k, v, out, lse)


def attention_backward_job():
    """The fused attention backward (float32), for short and for long sequences."""
    from .ops import attention_backward

    tiled_backward_job()
    q, k, v = _qkv(np.random.default_rng(0), SHORT)
    out, lse = np.zeros_like(q), np.zeros(q.shape[:3], np.float32)
    attention_backward(q, q, k, v, out, lse)


def attention_forward_job():
    """The fused attention forward and weights (float32), for short and long sequences."""
    from .ops import attention, attention_weights

    for length in (SHORT, LONG):
        q, k, v = _qkv(np.random.default_rng(0), length)
        attention(q, k, v)
        attention_weights(q, k)


def _steps(model, loss, inputs, targets):
    from .train import AdamW, fit

    fit(model, loss, AdamW(model, lr=1e-3), (inputs, targets), epochs=1, batch_size=4,
        clip_grad_norm=1.0, progress=False)


def token_model_job():
    """Training steps of a TokenModel (N -> N: GELU encoder, MSE, AdamW, clipping)."""
    from .models import TokenModel, TokenModelConfig
    from .train import MSELoss

    rng = np.random.default_rng(0)
    x = rng.standard_normal((8, 16, 4)).astype(np.float32)
    model = TokenModel(TokenModelConfig(in_features=4, out_features=2, d_model=16, nhead=2,
                                        num_layers=1, dim_feedforward=32, max_len=16))
    _steps(model, MSELoss(), x, x[..., :2])


def sequence_model_job():
    """Training steps of a SequenceModel (N -> 1: mean pooling, classes, cross-entropy)."""
    from .models import SequenceModel, SequenceModelConfig
    from .train import CrossEntropyLoss

    rng = np.random.default_rng(0)
    x = rng.standard_normal((8, 16, 4)).astype(np.float32)
    model = SequenceModel(SequenceModelConfig(in_features=4, out_features=3, d_model=16,
                                              nhead=2, num_layers=1, dim_feedforward=32,
                                              max_len=16))
    _steps(model, CrossEntropyLoss(), x, rng.integers(0, 3, 8))


# In the order they start: the attention kernels first, so that the model jobs (which call
# them too) find them in the cache when they run after them.
JOBS = {"attention-backward": attention_backward_job,
        "attention-forward": attention_forward_job,
        "token-model": token_model_job,
        "sequence-model": sequence_model_job,
        "tiled-backward": tiled_backward_job}
# Jobs that only the helper runs (compile_all's jobs include what they compile).
HELPER_JOBS = ("tiled-backward",)


def compile_parallel_twins():
    """Compile the parallel version of every sized kernel (cpu/threads.py) for each signature
    that its serial version has in this process."""
    from .kernels.cpu.threads import SizedKernel

    for name, module in list(sys.modules.items()):
        if name.startswith("seqattn.kernels.cpu"):
            for kernel in list(vars(module).values()):
                if isinstance(kernel, SizedKernel):
                    for signature in kernel.serial.signatures:
                        kernel.parallel.compile(signature)


def run_job(name, parallel_twins=True):
    """Run one job in this process (the cache takes what it compiles)."""
    JOBS[name]()
    if parallel_twins:
        compile_parallel_twins()


def _job_process(name, parallel_twins):
    command = [sys.executable, "-m", "seqattn.compile", "--job", name]
    if not parallel_twins:
        command.append("--serial-only")
    return subprocess.Popen(command, env=dict(os.environ, **{HELPER_SWITCH: "0"}),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def compile_all(processes=None, parallel_twins=True, progress=True):
    """Run every job, ``processes`` at a time (default: the cores); returns the seconds taken.
    Raises a RuntimeError naming the jobs that failed, with their errors."""
    from tqdm import tqdm

    processes = processes or os.cpu_count() or 1
    started = time.perf_counter()
    waiting = [name for name in JOBS if name not in HELPER_JOBS]
    running, failed = {}, {}
    with tqdm(total=len(waiting), desc="compiling seqattn's kernels", unit="job",
              disable=not progress, file=sys.stderr) as bar:
        while waiting or running:
            while waiting and len(running) < processes:
                name = waiting.pop(0)
                running[name] = _job_process(name, parallel_twins)
            for name, process in list(running.items()):
                if process.poll() is not None:
                    if process.returncode:
                        failed[name] = process.stderr.read()[-2000:]
                    process.stderr.close()
                    del running[name]
                    bar.update(1)
            time.sleep(0.1)
    if failed:
        raise RuntimeError("seqattn.compile: jobs failed: " + "; ".join(
            f"{name}: {error}" for name, error in failed.items()))
    return time.perf_counter() - started


def helper_lock_path():
    """The file that says a helper is compiling into this process's cache folder, or None
    where Numba keeps no disk cache of the backward (then a helper would be of no use)."""
    from .kernels.cpu import attention

    cache = getattr(attention._backward_tasks.serial, "_cache", None)
    folder = getattr(cache, "_cache_path", None)
    return None if folder is None else os.path.join(folder, "seqattn-compile-helper.lock")


def _helper_running(lock):
    """Whether the lock names a helper process that is still alive and not too old."""
    try:  # an empty lock: its helper is being started (pid 0 is this process's group)
        with open(lock) as f:
            pid = int(f.read() or 0)
        if time.time() - os.path.getmtime(lock) > HELPER_LOCK_SECONDS:
            return False
        os.kill(pid, 0)
    except (OSError, ValueError):
        return False
    return True


def start_helper(on_wait=None):
    """On a first run: compile the tiled attention backward in a helper process (once per cache
    folder at a time, a lock file says one is at it) while this process compiles the rest, and
    have this process's first backward launch wait for it (kernels/compiled_elsewhere.py).
    ``on_wait()`` is called when that launch starts waiting. Does nothing where
    ``SEQATTN_COMPILE_HELPER=0``."""
    if os.environ.get(HELPER_SWITCH, "1") == "0":
        return
    from .kernels.compiled_elsewhere import compiling_elsewhere

    lock = helper_lock_path()
    if lock is None:
        return
    if not _helper_running(lock):
        with contextlib.suppress(FileNotFoundError):
            os.remove(lock)  # left by a helper that was killed
        try:  # created exclusively: of processes starting at once, one starts the helper
            descriptor = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            descriptor = None
        if descriptor is not None:
            process = subprocess.Popen(
                [sys.executable, "-m", "seqattn.compile", "--job", "tiled-backward",
                 "--serial-only", "--lock", lock],
                env=dict(os.environ, **{HELPER_SWITCH: "0"}), stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL, start_new_session=True)
            os.write(descriptor, str(process.pid).encode())
            os.close(descriptor)
    compiling_elsewhere(BACKWARD_KERNELS, lambda: not _helper_running(lock), on_wait)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m seqattn.compile",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--processes", type=int, help="jobs at once (default: the cores)")
    parser.add_argument("--serial-only", action="store_true",
                        help="leave out the parallel versions of the kernels")
    parser.add_argument("--list", action="store_true", help="list the jobs and exit")
    parser.add_argument("--job", choices=sorted(JOBS), help=argparse.SUPPRESS)
    parser.add_argument("--lock", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.list:
        for name, job in JOBS.items():
            print(f"{name}: {job.__doc__.splitlines()[0]}")
    elif args.job:
        try:
            run_job(args.job, parallel_twins=not args.serial_only)
        finally:
            if args.lock:
                with contextlib.suppress(FileNotFoundError):
                    os.remove(args.lock)
    else:
        seconds = compile_all(args.processes, parallel_twins=not args.serial_only)
        print(f"seqattn: kernels compiled and cached in {seconds:.0f} s")


if __name__ == "__main__":
    main()
