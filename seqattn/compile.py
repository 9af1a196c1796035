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

A first run that skips this step compiles as it goes (saying so, with a progress bar), beside
one helper process (:func:`start_helper`, started by the run's first compilation or by its first
launch that misses a kernel) that takes requests: first the register products' C functions
(:data:`PRODUCTS`), then the backward of each float32 forward the run compiles
(linear map, short and tiled attention, the short one in the layout of its heads: views of a
packed projection, ops.packed_attention, or heads of their own; for an attention call with
structured biases, the backward of that call itself, :func:`backward_of_call_job`; then layer
norm and GELU), the
register driver of large dW products (:data:`FUNCTION_JOBS`), the kernels that end the
training steps of a first run's fit (:data:`STEP_END_JOBS`), and the versions of sized kernels
(cpu/threads.py) that the run's launches miss; such a launch runs the other version meanwhile
(the serial one, which compiles several times faster than the parallel one; same bits).
A launch that reaches a job the helper has not started yet takes it back and compiles it.
Set ``SEQATTN_COMPILE_HELPER=0`` to keep every compilation in the calling process.
"""
import argparse
import contextlib
import importlib
import os
import pickle
import subprocess
import sys
import time

import numpy as np

# The tiled attention forward, whose compilation (serial, parallel or AMX version) every run
# that trains through the tiled backward starts with.
HELPER_AFTER = "seqattn.kernels.cpu.attention._forward_tasks"
# The tiled attention backward's launches, which the helper process compiles on a first run.
BACKWARD_KERNELS = ("seqattn.kernels.cpu.attention._backward_tasks",
                    "seqattn.kernels.cpu.attention._row_delta_rows")
SHORT_FORWARD = "seqattn.kernels.cpu.attention_small._forward_tasks"
# Request file names sort by priority: a job that the run waits for (the slowest backward
# kernels), then small kernels that the run reaches after some of those, then the
# kernels that end its first training step, then a version that a launch misses (the other
# version runs meanwhile), then the other version of one compiled in the run, for later runs:
# those wait until the run has ended, so as not to slow it down. A job that the helper has not
# started when the run reaches it, the run takes back (kernels/compiled_elsewhere.py).
JOB_PRIORITY, SMALL_JOB_PRIORITY, STEP_END_PRIORITY, VERSION_PRIORITY, LATER_PRIORITY = (
    "0", "1", "2", "3", "4")
# What a first run hands the helper at the first compilation of a float32 forward kernel: the
# job that compiles its backward (the slowest kernels of a training step, which the run
# reaches last, then small ones whose signature does not depend on the model: merging the
# heads also ends the attention's forward), and the launches that wait for that job;
# (forward, job, launches, priority).
# A forward's name is the prefix of its chunk function's too (threads.sized_kernel(chunk=...)),
# which its version's compilation compiles first: the job is handed over at that one.
HANDOVERS = (
    (HELPER_AFTER, "tiled-backward", BACKWARD_KERNELS, JOB_PRIORITY),
    (SHORT_FORWARD, "short-backward", ("seqattn.kernels.cpu.attention_small._backward_tasks",),
     JOB_PRIORITY),
    ("seqattn.kernels.cpu.linear._linear_forward", "linear-backward",
     ("seqattn.kernels.cpu.linear._linear_backward",), JOB_PRIORITY),
    ("seqattn.kernels.cpu.layer_norm.layer_norm_forward", "layer-norm-backward",
     ("seqattn.kernels.cpu.layer_norm._layer_norm_backward",), SMALL_JOB_PRIORITY),
    ("seqattn.kernels.cpu.activations._gelu_forward_f32", "gelu-backward",
     ("seqattn.kernels.cpu.activations._gelu_backward_f32",), SMALL_JOB_PRIORITY),
    ("seqattn.kernels.cpu.heads.split_heads_forward", "merge-heads",
     ("seqattn.kernels.cpu.heads.split_heads_backward",), SMALL_JOB_PRIORITY),
)
# The jobs of a call with structured biases (backward_of_call_job): ops.attention's, and
# ops.packed_attention's, whose heads are views of the packed projection.
STRUCTURED_JOB, PACKED_STRUCTURED_JOB = "structured-backward", "packed-structured-backward"
# The C functions of register_gemm.py (products and transposes), which every float32
# attention kernel calls by name: the first kernel to reach them compiles them. The helper
# compiles them first, beside the run's first kernels, and the run's first attention kernel
# loads them.
PRODUCTS = ("seqattn_register_gemm_product_f32", "seqattn_register_gemm_transpose_f32")
# The C functions that launches may ask the helper for (kernels/compiled_elsewhere.py), by
# symbol: the job that compiles each. The register driver of the linear layers' dW is asked
# for by the first forward whose dW may take it (a product of packed_gemm.MIN_WORK or more).
FUNCTION_JOBS = {"seqattn_packed_gemm_in_registers": "dweight-driver"}
# The attention forwards: their backward jobs have the signature of a call without structured
# biases (distances, pair codes), so they are handed over at such a call's forward only.
ATTENTION_FORWARDS = (HELPER_AFTER, SHORT_FORWARD)
# The short backward's jobs for a forward that reads the heads of a packed projection in place
# (ops.packed_attention: the models' self-attention), whose arrays are strided views, a
# signature of their own (Numba's layout "A"): (heads side by side, one head, whose output
# views are contiguous). first_run chooses by the forward's argument types.
PACKED_JOBS = {"short-backward": ("packed-backward", "packed-one-head-backward")}
HELPER_SWITCH = "SEQATTN_COMPILE_HELPER"
# A helper lock older than this is left over from a process that was killed (a helper touches
# its lock between requests).
HELPER_LOCK_SECONDS = 900
# Seconds between the helper's looks for requests while it has none.
POLL_SECONDS = 0.05
# Added to a request's file name while the helper serves it.
SERVING = ".serving"
# The kernels at the end of a training step on float32 NumPy parameters: the gradients' norm
# (fit computes it every step) and Adam's update of every parameter in one launch. Their
# signatures do not depend on the model (address tables), so the helper compiles them from
# the start of a first run's fit; (job, launches) by optimizer.
GRADIENT_NORM = "seqattn.kernels.cpu.sums_of_squares.sums_of_squares"
ADAM_MANY = "seqattn.kernels.cpu.optimizers._adam_update_many"
STEP_END_JOBS = {"adam": ("adam-step", (GRADIENT_NORM, ADAM_MANY)),
                 "other": ("gradient-norm", (GRADIENT_NORM,))}


# Sequence lengths of the attention jobs: ops.attention may run short sequences through a kernel
# of their own and long ones through the tiled kernel of kernels/cpu/attention.py; the jobs
# take one of each, and the helper the long one (the tiled backward is the one it compiles).
SHORT, LONG = 16, 1024
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


def short_backward_job():
    """The short-sequence attention backward (float32; attention_small.py)."""
    from .ops import attention_backward

    q, k, v = _qkv(np.random.default_rng(0), SHORT)
    out, lse = np.zeros_like(q), np.zeros(q.shape[:3], np.float32)
    attention_backward(q, q, k, v, out, lse)


def packed_backward_job(num_heads=2):
    """The short attention backward (float32) of self-attention from a packed projection.

    ops.packed_attention, the models' self-attention: the heads are views of the projection."""
    from .ops import packed_attention_backward

    qkv = np.zeros((1, SHORT, 3 * num_heads * HEAD_DIM), np.float32)
    tokens = np.zeros((1, SHORT, num_heads * HEAD_DIM), np.float32)
    packed_attention_backward(tokens, qkv, num_heads, tokens,
                              np.zeros((1, num_heads, SHORT), np.float32))


def packed_one_head_backward_job():
    """The packed-backward job's backward of one head (its output views are contiguous)."""
    packed_backward_job(num_heads=1)


def backward_of_call_job(call, packed=False):
    """The attention backward of a prepared ``call`` (ops.attention_inputs): what the helper
    compiles for a call with structured biases, whose kernels' signature depends on the biases
    it has (types, cutoff, cell, pair codes) and so on no fixed job; with ``packed``, for a
    call of ops.packed_attention, whose heads (views of qkv) arrive contiguous from the pickle
    and are made views again. Run on made-up saved outputs: only the signature matters."""
    from .ops.attention import attention_backward_of_call
    from .ops.packed_attention import (PackedAttentionCall, heads_of,
                                       packed_attention_backward_of_call)

    B, H, N, D = call.q.shape
    lse = np.zeros((B, H, N), call.q.dtype)
    if not packed:
        zeros = np.zeros((B, H, N, D), call.q.dtype)
        attention_backward_of_call(call, zeros, zeros, lse)
        return
    # the views of a model's call, of the same shapes: the same layouts
    q, k, v = heads_of(np.zeros((B, N, 3 * H * D), call.q.dtype), H, 3)
    tokens = np.zeros((B, N, H * D), call.q.dtype)
    packed_attention_backward_of_call(PackedAttentionCall(call._replace(q=q, k=k, v=v), H, True),
                                      tokens, heads_of(tokens, H), lse)


def attention_backward_job():
    """The fused attention backward (float32), for short and for long sequences."""
    tiled_backward_job()
    short_backward_job()


def register_products_job():
    """The C functions of the register products (float32), where float32 products take them."""
    from .kernels.cpu.called_by_name import register
    from .kernels.cpu.gemm.register_gemm import IN_REGISTERS

    if IN_REGISTERS:
        for symbol in PRODUCTS:
            register(symbol)


def dweight_driver_job():
    """The register driver of large float32 dW products (the linear backward takes it by
    address, for products of packed_gemm.MIN_WORK multiply-adds or more only)."""
    from .kernels.cpu.gemm.packed_gemm import TN_IN_REGISTERS, driver_address

    if TN_IN_REGISTERS:
        driver_address()


def layer_norm_backward_job():
    """The layer norm's backward (float32), from made-up saved statistics."""
    from .ops import layer_norm_backward

    x, weight = np.ones((4, 3), np.float32), np.ones(3, np.float32)
    layer_norm_backward(x, x, np.zeros(4, np.float32), np.ones(4, np.float32), weight,
                        weight_grad=np.zeros_like(weight), bias_grad=np.zeros_like(weight))


def gelu_backward_job():
    """GELU's backward (float32, with erf)."""
    from .ops import gelu_backward

    x = np.ones((4, 3), np.float32)
    gelu_backward(x, x)


def merge_heads_job():
    """Merging heads (float32): one (the attention's output) and three (the gradients of a
    packed q, k, v projection's split)."""
    from .ops import merge_heads

    heads = np.ones((1, 2, 3, 4), np.float32)
    merge_heads(heads)
    merge_heads(heads, heads, heads)


def linear_backward_job():
    """The linear map's backward (float32, with a bias and an input gradient), for a layer of
    16 inputs: its dx takes the register path where a model's wider layers do (on AVX2, a
    product of 16 columns or more), and the version compiled for it serves the model's layers
    on BLAS as well (linear._path_argument)."""
    from .kernels.cpu.linear import linear_backward

    x, weight = np.ones((4, 16), np.float32), np.ones((2, 16), np.float32)
    dout = np.ones((4, 2), np.float32)
    linear_backward(np.empty_like(x), np.zeros_like(weight), np.zeros(2, np.float32), dout, x,
                    weight, True, True)


# The jobs below call the ops that fit and its optimizers call, not seqattn.train: importing
# that would cost the helper most of a second more than the ops' launches.
def _tiny_arrays():
    return [np.ones(shape, np.float32) for shape in ((3, 2), (2,))]


def gradient_norm_job():
    """The gradients' squared norm (float32, one launch): what fit computes every step."""
    from .ops import sum_of_squares

    sum_of_squares(_tiny_arrays())


def adam_step_job():
    """The gradients' norm, then Adam's update of all parameters in one launch (float32)."""
    from .ops.optimizers import AdamManyParameters

    gradient_norm_job()
    AdamManyParameters(_tiny_arrays(), _tiny_arrays(), _tiny_arrays()).step(
        _tiny_arrays(), step=1, lr=1e-3, decoupled_weight_decay=True)


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
        "tiled-backward": tiled_backward_job,
        "short-backward": short_backward_job,
        "packed-backward": packed_backward_job,
        "packed-one-head-backward": packed_one_head_backward_job,
        "linear-backward": linear_backward_job,
        "layer-norm-backward": layer_norm_backward_job,
        "gelu-backward": gelu_backward_job,
        "merge-heads": merge_heads_job,
        "register-products": register_products_job,
        "dweight-driver": dweight_driver_job,
        "gradient-norm": gradient_norm_job,
        "adam-step": adam_step_job}
# Helper jobs of small kernels that a run compiled itself before they were handed over, with
# their parallel versions for later runs (threads.py: a launch on a quieter machine may take
# one): the helper asks itself for those, for when the run has ended.
TWINNED_JOBS = ("layer-norm-backward", "gelu-backward", "merge-heads", "gradient-norm",
                "adam-step")
# Jobs that only the helper runs (compile_all's jobs include what they compile).
HELPER_JOBS = ("tiled-backward", "short-backward", "packed-backward", "packed-one-head-backward",
               "linear-backward", "layer-norm-backward", "gelu-backward", "merge-heads",
               "register-products", "gradient-norm", "adam-step")


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


def _requests_folder(lock):
    return lock.removesuffix(".lock") + "-requests"


def _write_request(lock, priority, request):
    """Queue a request (a dict) for the helper; returns its file, which the helper removes when
    it has served it."""
    folder = _requests_folder(lock)
    path = os.path.join(folder, f"{priority}-{time.time_ns()}-{os.getpid()}.pickle")
    with open(path + ".part", "wb") as f:
        pickle.dump(request, f)
    os.replace(path + ".part", path)  # the helper never reads half a request
    return path


class VersionRequests:
    """Asks the helper for versions of sized kernels, each once (threads.compile_twins_elsewhere):
    ``later`` for one that no launch of this run waits for. A call returns whether a helper is
    there to compile it."""

    def __init__(self, lock):
        self.lock = lock
        self.sent = set()

    def __call__(self, kernel, version, argtypes, later=False):
        key = (kernel.__module__, kernel.__qualname__, version, argtypes)
        if key not in self.sent:
            try:
                _write_request(self.lock, LATER_PRIORITY if later else VERSION_PRIORITY, dict(
                    module=kernel.__module__, name=kernel.__qualname__, version=version,
                    argtypes=argtypes))
            except (OSError, pickle.PicklingError, TypeError, AttributeError):
                return False  # argument types that do not pickle: compiled here
            self.sent.add(key)
        return _helper_running(self.lock)


def start_helper():
    """On a first run: make sure a helper process serves this process's cache folder (one at a
    time, a lock file says which) and hand it the versions that sized kernels miss. Returns
    the lock's path, or None where no helper is used (``SEQATTN_COMPILE_HELPER=0``, or Numba
    keeps no disk cache)."""
    if os.environ.get(HELPER_SWITCH, "1") == "0":
        return None
    from .kernels.cpu.threads import compile_twins_elsewhere

    lock = helper_lock_path()
    if lock is None:
        return None
    os.makedirs(_requests_folder(lock), exist_ok=True)
    if not _helper_running(lock):
        with contextlib.suppress(FileNotFoundError):
            os.remove(lock)  # left by a helper that was killed
        try:  # created exclusively: of processes starting at once, one starts the helper
            descriptor = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            descriptor = None
        if descriptor is not None:
            process = subprocess.Popen(
                [sys.executable, "-m", "seqattn.compile", "--serve", lock,
                 "--client", str(os.getpid())],
                env=dict(os.environ, **{HELPER_SWITCH: "0"}), stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL, start_new_session=True)
            os.write(descriptor, str(process.pid).encode())
            os.close(descriptor)
    compile_twins_elsewhere(VersionRequests(lock))
    return lock


def hand_over(lock, job, launches, on_wait=None, call=None, priority=JOB_PRIORITY):
    """At a forward kernel's first compilation (HANDOVERS): the helper of ``lock`` (what
    :func:`start_helper` returned) runs ``job`` meanwhile (with ``call``: the backward of that
    prepared attention call, :func:`backward_of_call_job`), and this process's first launch of
    each of ``launches`` waits for it (kernels/compiled_elsewhere.py); ``on_wait()`` is called
    when such a launch starts waiting. The helper serves the jobs of one ``priority`` in the
    order they came, those of a lower priority after them."""
    from .kernels.compiled_elsewhere import compiling_elsewhere

    path = _write_request(lock, priority, dict(job=job, call=call))
    compiling_elsewhere(
        launches, lambda: not (os.path.exists(path) or os.path.exists(path + SERVING))
        or not _helper_running(lock), on_wait, lambda: _take_back(path))


def _take_back(path):
    """Withdraw a request that the helper has not started (it renames a request when it starts
    it, serve): whether it was withdrawn."""
    try:
        os.remove(path)
    except FileNotFoundError:
        return False
    return True


def hand_over_products(lock):
    """At the helper's start: it compiles the register products first (PRODUCTS), and this
    process's first kernel that calls them waits for it, where float32 products take them and
    the cache lacks them."""
    from .kernels.cpu.called_by_name import available
    from .kernels.cpu.gemm.register_gemm import IN_REGISTERS

    if IN_REGISTERS and not all(available(symbol) for symbol in PRODUCTS):
        hand_over(lock, "register-products", PRODUCTS)


def _serial_versions():
    """(sized kernel, argument types) of each serial version this process has compiled or
    loaded (cpu/threads.py)."""
    from .kernels.cpu.threads import SizedKernel

    return {(kernel, argtypes) for name, module in list(sys.modules.items())
            if name.startswith("seqattn.kernels.cpu")
            for kernel in list(vars(module).values()) if isinstance(kernel, SizedKernel)
            for argtypes in kernel.serial.signatures}


def _serve_one(request, lock):
    if request.get("call") is not None:
        backward_of_call_job(request["call"], packed=request.get("job") == PACKED_STRUCTURED_JOB)
    elif request.get("job") in TWINNED_JOBS:
        before = _serial_versions()
        run_job(request["job"], parallel_twins=False)
        ask = VersionRequests(lock)
        for kernel, argtypes in _serial_versions() - before:
            ask(kernel, "parallel", argtypes, later=True)
    elif "job" in request:
        run_job(request["job"], parallel_twins=False)
    else:
        kernel = getattr(importlib.import_module(request["module"]), request["name"])
        getattr(kernel, request["version"]).compile(request["argtypes"])


def _alive(pid):
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    return True


def serve(lock, client):
    """The helper: serve the requests in the lock's folder, in the order of their names (those
    for later runs once the process ``client``, which started it, has ended), until there are
    none left and the client has ended."""
    folder = _requests_folder(lock)
    try:
        while True:
            os.utime(lock)
            client_ended = not _alive(client)
            waiting = sorted(name for name in os.listdir(folder) if name.endswith(".pickle")
                             and (client_ended or not name.startswith(LATER_PRIORITY)))
            if not waiting:
                if client_ended:
                    return
                time.sleep(POLL_SECONDS)
                continue
            path = os.path.join(folder, waiting[0])
            try:  # started: the client waits for it from now on (_take_back)
                os.replace(path, path + SERVING)
            except FileNotFoundError:  # taken back: the client compiles it
                continue
            try:
                with open(path + SERVING, "rb") as f:
                    _serve_one(pickle.load(f), lock)
            except Exception as error:  # the client compiles it when it looks again
                print(f"seqattn.compile helper: {waiting[0]}: {error!r}", file=sys.stderr)
            finally:
                with contextlib.suppress(FileNotFoundError):
                    os.remove(path + SERVING)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.remove(lock)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m seqattn.compile",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--processes", type=int, help="jobs at once (default: the cores)")
    parser.add_argument("--serial-only", action="store_true",
                        help="leave out the parallel versions of the kernels")
    parser.add_argument("--list", action="store_true", help="list the jobs and exit")
    parser.add_argument("--job", choices=sorted(JOBS), help=argparse.SUPPRESS)
    parser.add_argument("--serve", metavar="LOCK", help=argparse.SUPPRESS)
    parser.add_argument("--client", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve:
        serve(args.serve, args.client)
    elif args.list:
        for name, job in JOBS.items():
            print(f"{name}: {job.__doc__.splitlines()[0]}")
    elif args.job:
        run_job(args.job, parallel_twins=not args.serial_only)
    else:
        seconds = compile_all(args.processes, parallel_twins=not args.serial_only)
        print(f"seqattn: kernels compiled and cached in {seconds:.0f} s")


if __name__ == "__main__":
    main()
