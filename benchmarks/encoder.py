"""Benchmark forward + backward of a Transformer encoder against the same model in torch.nn.

The issue's model: 4 pre-norm GELU layers, d_model 256, 8 heads, FFN 1024, batch 8, N 1024,
float32. Both models get the same weights; torch runs on the same number of threads (CPU) or
the same GPU in float32. Prints tokens per second (median of the timed repeats, which alternate
between the two models, after a warm-up that compiles the kernels), the ratio seqattn / torch
and the machine's load average around the run.

    python benchmarks/encoder.py                  # the issue's size on 2 CPU threads
    python benchmarks/encoder.py --quick          # N=128, a smoke run
    python benchmarks/encoder.py --device cuda    # both on the GPU
    python benchmarks/encoder.py --ops --threads 1  # CPU seconds per op (wall on 2 threads)
    python benchmarks/encoder.py --quick --hog    # with another process spinning on one core
    python benchmarks/encoder.py --quick --hog --ignore-load  # seqattn blind to that core
"""
import argparse
import collections
import contextlib
import importlib
import os
import platform
import statistics
import time

import numpy as np

import seqattn
import seqattn.nn as nn
from train import hog_one_core  # benchmarks/train.py: the same competitor


def build(args):
    layer = nn.TransformerEncoderLayer(args.d_model, args.heads, args.ffn, dropout=0.0,
                                       activation="gelu", norm_first=True, seed=0)
    return nn.TransformerEncoder(layer, args.layers)


def torch_twin(ours, args, device):
    import torch

    layer = torch.nn.TransformerEncoderLayer(args.d_model, args.heads, args.ffn, dropout=0.0,
                                             activation="gelu", norm_first=True,
                                             batch_first=True)
    theirs = torch.nn.TransformerEncoder(layer, args.layers, enable_nested_tensor=False)
    theirs.load_state_dict({k: torch.from_numpy(v) for k, v in ours.state_dict().items()})
    return theirs.to(device).train()


def step_seconds(steps, repeats, warmup=True):
    """Per (step, synchronize) pair: (median wall, min wall, max wall, median CPU) seconds per
    step. The steps alternate, so a load that other users put on a shared machine meanwhile
    falls on both sides alike; the process's CPU time (all its threads, spinning included) is
    the figure such load disturbs least. With ``warmup`` each step runs once untimed first."""
    for step, synchronize in steps if warmup else ():
        step()  # compilation, allocator
        synchronize()
    wall = [[] for _ in steps]
    cpu = [[] for _ in steps]
    for _ in range(repeats):
        for (step, synchronize), spent, used in zip(steps, wall, cpu):
            start, start_cpu = time.perf_counter(), time.process_time()
            step()
            synchronize()
            spent.append(time.perf_counter() - start)
            used.append(time.process_time() - start_cpu)
    return [(statistics.median(spent), min(spent), max(spent), statistics.median(used))
            for spent, used in zip(wall, cpu)]


# Kernel families whose launchers the encoder step calls (seqattn.kernels.cpu.<family>).
FAMILIES = ("linear", "attention", "layer_norm", "activations", "heads", "elementwise",
            "reductions", "arithmetic", "dropout")


def _timed(launcher, key, totals, depth, clock):
    def timed(*args, **kwargs):
        depth[0] += 1
        start = clock()
        try:
            return launcher(*args, **kwargs)
        finally:
            depth[0] -= 1
            if depth[0] == 0:  # a launcher that calls another is counted once, as itself
                totals[key] += clock() - start
    return timed


@contextlib.contextmanager
def timed_launchers(totals, clock):
    """Within the block, each Python-level launcher of FAMILIES (plain functions and sized
    kernels, not compiled dispatchers, which compiled callers bind at compile time) adds its
    seconds by ``clock`` to ``totals["family.name"]``. Compile everything before entering."""
    from numba.core.dispatcher import Dispatcher

    patched, depth = [], [0]
    for family in FAMILIES:
        module = importlib.import_module(f"seqattn.kernels.cpu.{family}")
        for name, launcher in list(vars(module).items()):
            if (name.startswith("_") or not callable(launcher) or isinstance(launcher, type)
                    or isinstance(launcher, Dispatcher)
                    or getattr(launcher, "__module__", None) != module.__name__):
                continue
            patched.append((module, name, launcher))
            setattr(module, name, _timed(launcher, f"{family}.{name}", totals, depth,
                                               clock))
    try:
        yield
    finally:
        for module, name, launcher in patched:
            setattr(module, name, launcher)


def _outermost_aten_op(event):
    """The name of the outermost aten op that ``event`` runs inside (its own if none): the
    seconds torch spends in an op's helpers count for the op, as a kernel launcher's whole time
    counts for it. addmm copies the bias into its output with a child copy_, the flash attention
    backward zeroes its dq with a child fill_: counted by self time alone, these went to copy_
    and fill_, and addmm looked 1.2-1.4x faster than it is."""
    name = event.name
    parent = event.cpu_parent
    while parent is not None:
        if parent.name.startswith("aten::"):
            name = parent.name
        parent = parent.cpu_parent
    return name


def op_seconds(step_ours, step_torch, repeats, clock):
    """Seconds per step and per op by ``clock`` (CPU time on 1 thread, wall time on more),
    medians of alternating rounds: ({op: s} for seqattn, {op: s} for torch per outermost aten
    op, its helper ops' self time included). The step's total is under "step" (by ``clock``
    for both), and what no kernel launcher accounts for (Python, allocation) under "outside
    kernels". torch's per-op times
    are the profiler's, wall time on the calling thread: on a loaded machine they include
    waiting for a core and can sum to more than torch's CPU-time step."""
    import torch

    ours, theirs = collections.defaultdict(list), collections.defaultdict(list)
    step_ours()
    step_torch()
    for _ in range(repeats):
        totals = collections.defaultdict(float)
        with timed_launchers(totals, clock):
            start = clock()
            step_ours()
            totals["step"] = clock() - start
        totals["outside kernels"] = totals["step"] - sum(
            v for k, v in totals.items() if k != "step")
        for key, value in totals.items():
            ours[key].append(value)
        activities = [torch.profiler.ProfilerActivity.CPU]
        start = clock()
        with torch.profiler.profile(activities=activities) as profile:
            step_torch()
        theirs["step"].append(clock() - start)
        by_name = collections.defaultdict(float)
        for event in profile.events():
            by_name[_outermost_aten_op(event)] += event.self_cpu_time_total / 1e6
        for key, value in by_name.items():
            theirs[key].append(value)
    return ({k: statistics.median(v) for k, v in ours.items()},
            {k: statistics.median(v) for k, v in theirs.items()})


def print_op_seconds(ours, theirs, what, top=24):
    for name, unit, table in (("seqattn kernel launchers", what, ours),
                              ("torch aten ops (outermost)", "profiler seconds (wall)", theirs)):
        print(f"\n{name}: {unit} per step (median); step {table['step']:.3f} {what}")
        rows = sorted(((v, k) for k, v in table.items() if k != "step"), reverse=True)
        for value, key in rows[:top]:
            print(f"  {key:52s} {value:8.4f}  {value / table['step']:6.1%}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--hog", action="store_true",
                        help="keep one core busy with another process meanwhile")
    parser.add_argument("--ignore-load", action="store_true",
                        help="seqattn.follow_machine_load(False): launches take the threads "
                             "their work pays for even where other processes hold a core")
    parser.add_argument("--ops", action="store_true",
                        help="seconds per op instead of the timed steps: CPU seconds on "
                             "--threads 1, wall seconds on more")
    args = parser.parse_args()
    if args.ops and args.device != "cpu":
        parser.error("--ops profiles the CPU kernels; drop --device cuda")
    args.layers, args.d_model, args.heads, args.ffn, args.batch = 4, 256, 8, 1024, 8
    args.n = 128 if args.quick else 1024

    import numba
    import torch
    from threadpoolctl import threadpool_limits

    numba.set_num_threads(args.threads)
    torch.set_num_threads(args.threads)
    seqattn.follow_machine_load(not args.ignore_load)
    ours = build(args).train()
    theirs = torch_twin(ours, args, args.device)
    x = np.random.default_rng(0).normal(size=(args.batch, args.n, args.d_model))
    x = x.astype(np.float32)
    dout = np.random.default_rng(1).normal(size=x.shape).astype(np.float32)

    if args.device == "cuda":
        from numba import cuda

        ours.to("cuda")
        x_ours, dout_ours = cuda.to_device(x), cuda.to_device(dout)
        sync_ours, sync_torch = cuda.synchronize, torch.cuda.synchronize
    else:
        x_ours, dout_ours = x, dout
        sync_ours = sync_torch = lambda: None  # noqa: E731
    x_torch = torch.from_numpy(x).to(args.device).requires_grad_()
    dout_torch = torch.from_numpy(dout).to(args.device)

    def step_ours():
        ours(x_ours, is_causal=False)
        ours.backward(dout_ours)

    def step_torch():
        theirs(x_torch).backward(dout_torch)

    load_before = os.getloadavg()[0]
    if args.ops:
        clock, what = ((time.process_time, "CPU seconds") if args.threads == 1 else
                       (time.perf_counter, f"wall seconds on {args.threads} threads"))
        with threadpool_limits(args.threads), hog_one_core(args.hog):
            ours_ops, torch_ops = op_seconds(step_ours, step_torch, args.repeats, clock)
        print(f"1-min load average {load_before:.1f} before, {os.getloadavg()[0]:.1f} after; "
              f"N {args.n}, {args.repeats} alternating rounds")
        print_op_seconds(ours_ops, torch_ops, what)
        return
    with threadpool_limits(args.threads), hog_one_core(args.hog):
        ours_times, torch_times = step_seconds([(step_ours, sync_ours), (step_torch, sync_torch)],
                                         args.repeats)
    tokens = args.batch * args.n
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
          f"device {args.device}, {args.threads} threads, torch {torch.__version__}; "
          f"1-min load average {load_before:.1f} before, {os.getloadavg()[0]:.1f} after"
          + ("; another process spinning on one core" if args.hog else "")
          + ("; seqattn ignores the machine's load" if args.ignore_load else ""))
    print(f"encoder {args.layers} x pre-norm GELU, d_model {args.d_model}, {args.heads} heads, "
          f"FFN {args.ffn}, batch {args.batch}, N {args.n}, float32, forward+backward, "
          f"median of {args.repeats} alternating repeats")
    for name, (t, fastest, slowest, cpu) in (("seqattn", ours_times), ("torch  ", torch_times)):
        print(f"{name} {tokens / t:10.0f} tokens/s ({t:.3f} s/step; {fastest:.3f} to "
              f"{slowest:.3f}; CPU {cpu:.3f} s/step)")
    print(f"ratio seqattn/torch: {torch_times[0] / ours_times[0]:.2f}x wall, "
          f"{torch_times[3] / ours_times[3]:.2f}x CPU time")


if __name__ == "__main__":
    main()
