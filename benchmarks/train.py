"""Benchmark training steps of small models against the same models and optimizer in torch on
the same threads, over the sizes the examples train (issue 44).

The grid: TokenModel (N -> N, 4 input and 4 output features) and SequenceModel (N -> 1, mean
over unpadded tokens, one output) with d_model 16-64, 1-2 pre-norm GELU encoder layers, FFN
twice d_model, fixed sinusoidal positions, N 8-512, batch 16-128, float32, and a padding mask
on every batch (lengths drawn between N / 2 and N). One step is forward, MSE loss, backward,
global-norm clipping to 1.0 and AdamW (torch: the same modules with the same weights, the
padding mask as ``src_key_padding_mask`` and the same masked mean,
torch.nn.utils.clip_grad_norm_ and torch.optim.AdamW). Per row, steps of the contenders
alternate after a warm-up (compilation); medians are printed with the machine's load average,
and the first step's losses of both sides as a check that they compute the same thing.

The seqattn contender runs as a user gets it: launches leave the cores that other processes hold
(``seqattn.follow_machine_load``, on by default). ``--thread-choices`` adds two more contenders
in the same rounds, to show what the thread choices of kernels/cpu/threads.py are worth under
the same load: seqattn with launches sized by their work alone (``follow_machine_load(False)``),
blind to the cores other processes hold, and seqattn with every kernel launch on all threads,
as before small launches ran serial. ``--hog`` keeps one core busy with another process
meanwhile.

    python benchmarks/train.py                  # the grid, 2 threads, 20 alternating repeats
    python benchmarks/train.py --threads 1      # both sides serial, timed in CPU seconds of
                                                # the thread (a machine others load)
    python benchmarks/train.py --repeats 5 --only "token d64"   # a smoke run of some rows
    python benchmarks/train.py --thread-choices --hog
"""
import argparse
import contextlib
import importlib
import multiprocessing
import os
import pkgutil
import platform
import random
import statistics
import time

import numpy as np

import seqattn
from seqattn.kernels.cpu.gemm.blas_library import LIBRARY
from seqattn.models import SequenceModel, SequenceModelConfig, TokenModel, TokenModelConfig
from seqattn.train import AdamW, MSELoss, clip_factor, global_grad_norm

# (model, d_model, layers, heads, N, batch): the examples' sizes; the first row is the one this
# benchmark timed alone before the grid (issue 44)
GRID = [
    ("token", 64, 2, 4, 64, 16),
    ("token", 16, 1, 2, 32, 64),
    ("token", 32, 2, 4, 8, 128),
    ("token", 32, 2, 4, 300, 16),
    ("token", 64, 2, 4, 512, 16),
    ("sequence", 32, 2, 4, 64, 32),
    ("sequence", 64, 1, 4, 128, 128),
    ("sequence", 16, 1, 2, 300, 16),
]
FEATURES = 4


def row_name(row):
    model, d_model, layers, heads, n, batch = row
    return f"{model} d{d_model} L{layers} H{heads} N{n} B{batch}"


def build(row, seed=0):
    """The seqattn model and one batch (x, y, padding mask with True on padded tokens)."""
    kind, d_model, layers, heads, n, batch = row
    common = dict(in_features=FEATURES, d_model=d_model, nhead=heads, num_layers=layers,
                  dim_feedforward=2 * d_model, max_len=n, activation="gelu")
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(batch, n, FEATURES)).astype(np.float32)
    lengths = rng.integers(max(1, n // 2), n + 1, size=batch)
    mask = np.arange(n)[None, :] >= lengths[:, None]
    if kind == "token":
        model = TokenModel(TokenModelConfig(out_features=FEATURES, **common))
        y = rng.normal(size=(batch, n, FEATURES)).astype(np.float32)
    else:
        model = SequenceModel(SequenceModelConfig(out_features=1, **common))
        y = rng.normal(size=(batch, 1)).astype(np.float32)
    return model, x, y, mask


def torch_twin(ours, row):
    """The same model in torch.nn, parameter for parameter (same names, same weights)."""
    import torch

    kind, d_model, layers, heads, _, _ = row

    class Twin(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = torch.nn.Module()
            self.encoder.embed = torch.nn.Linear(FEATURES, d_model)
            layer = torch.nn.TransformerEncoderLayer(
                d_model, heads, 2 * d_model, dropout=0.0, activation="gelu", norm_first=True,
                batch_first=True)
            self.encoder.encoder = torch.nn.TransformerEncoder(
                layer, layers, torch.nn.LayerNorm(d_model), enable_nested_tensor=False)
            self.head = torch.nn.Linear(d_model, FEATURES if kind == "token" else 1)
            self.register_buffer("table", torch.from_numpy(ours.encoder.positions.table.copy()),
                                 persistent=False)

        def forward(self, x, mask):
            h = self.encoder.embed(x) + self.table[:x.shape[1]]
            h = self.encoder.encoder(h, src_key_padding_mask=mask)
            if kind == "sequence":  # the mean over unpadded tokens
                keep = (~mask).unsqueeze(-1).to(h.dtype)
                h = (h * keep).sum(1) / keep.sum(1)
            return self.head(h)

    twin = Twin()
    twin.load_state_dict({k: torch.from_numpy(v) for k, v in ours.state_dict().items()})
    return twin.train()


@contextlib.contextmanager
def blind_to_other_processes():
    """Within the block, launches take the threads their work pays for, whatever else runs."""
    previous = seqattn.follow_machine_load(False)
    try:
        yield
    finally:
        seqattn.follow_machine_load(previous)


@contextlib.contextmanager
def every_launch_parallel():
    """Within the block, every CPU kernel launch takes all threads, whatever its size and
    whatever else runs."""
    import seqattn.kernels.cpu
    from seqattn.kernels.cpu.threads import SizedKernel

    kernels = []
    for info in pkgutil.iter_modules(seqattn.kernels.cpu.__path__):
        module = importlib.import_module(f"seqattn.kernels.cpu.{info.name}")
        kernels += [k for k in vars(module).values() if isinstance(k, SizedKernel)]
    grains = [k.grain for k in kernels]
    for kernel in kernels:
        kernel.grain = 1
    try:
        with blind_to_other_processes():
            yield
    finally:
        for kernel, grain in zip(kernels, grains):
            kernel.grain = grain


def _spin():
    while True:
        pass


@contextlib.contextmanager
def hog_one_core(enabled):
    """Another process spinning on the last core while the block runs (Linux)."""
    if not enabled:
        yield
        return
    hog = multiprocessing.get_context("fork").Process(target=_spin, daemon=True)
    hog.start()
    os.sched_setaffinity(hog.pid, {os.cpu_count() - 1})
    try:
        yield
    finally:
        hog.terminate()
        hog.join()


def median_seconds(steps, repeats, clock=time.perf_counter, seed=0):
    """Median seconds per call of each step. The steps alternate, so that load from other users
    of a shared machine falls on all alike, in an order shuffled each round: a step that runs
    right after torch's pays for torch's OpenMP threads still spinning on both cores (12 % more
    time for a seqattn step, 9.3 ms against 8.2-8.3 after any other step, Zen 5), so in a fixed
    order the contender after torch would always pay it."""
    for step in steps:
        step()
    times = [[] for _ in steps]
    order = list(range(len(steps)))
    rng = random.Random(seed)
    for _ in range(repeats):
        rng.shuffle(order)
        for index in order:
            start = clock()
            steps[index]()
            times[index].append(clock() - start)
    return [statistics.median(spent) for spent in times]


def contenders(row, thread_choices):
    """{name: step} for one grid row, and the first step's loss of each side."""
    import torch

    ours, x, y, mask = build(row)
    theirs = torch_twin(ours, row)
    loss, optimizer = MSELoss(), AdamW(ours, lr=1e-3)
    torch_optimizer = torch.optim.AdamW(theirs.parameters(), lr=1e-3)
    x_torch, y_torch, mask_torch = (torch.from_numpy(a) for a in (x, y, mask))
    first_loss = {}

    def step_ours():
        value = loss(ours(x, mask), y)
        optimizer.zero_grad()
        ours.backward(loss.backward())
        optimizer.step(clip_factor(global_grad_norm(ours.parameters()), 1.0))
        first_loss.setdefault("seqattn", value)

    def step_torch():
        value = torch.nn.functional.mse_loss(theirs(x_torch, mask_torch), y_torch)
        torch_optimizer.zero_grad()
        value.backward()
        torch.nn.utils.clip_grad_norm_(theirs.parameters(), 1.0)
        torch_optimizer.step()
        first_loss.setdefault("torch", value.item())

    def step_ours_blind():
        with blind_to_other_processes():
            step_ours()

    def step_ours_all_parallel():
        with every_launch_parallel():
            step_ours()

    steps = {"seqattn": step_ours, "torch": step_torch}
    if thread_choices:
        steps.update({"blind to other processes": step_ours_blind,
                      "every launch on all threads": step_ours_all_parallel})
    return steps, first_loss


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--only", help="run the grid rows whose name contains this")
    parser.add_argument("--thread-choices", action="store_true",
                        help="also time seqattn blind to other processes and with every "
                             "launch on all threads")
    parser.add_argument("--hog", action="store_true", help="keep one core busy meanwhile")
    parser.add_argument("--wall", action="store_true",
                        help="time wall seconds on one thread too (default there: CPU time of "
                             "the calling thread)")
    args = parser.parse_args()

    import numba
    import torch
    from threadpoolctl import threadpool_limits

    numba.set_num_threads(args.threads)
    torch.set_num_threads(args.threads)
    rows = [row for row in GRID if args.only is None or args.only in row_name(row)]
    # On one thread both sides run all their work on the calling thread: its CPU time is the
    # step's, undisturbed by other processes on a machine busier than its cores (--wall: wall
    # time all the same).
    cpu_clock = args.threads == 1 and not args.wall and not args.hog
    clock = time.thread_time if cpu_clock else time.perf_counter
    load_before = os.getloadavg()[0]
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
          f"{args.threads} threads, torch {torch.__version__}, BLAS {LIBRARY}"
          + ("; another process spinning on one core" if args.hog else ""))
    print(f"pre-norm GELU encoder, FFN 2 d_model, padding masks, float32; MSE + clipping + "
          f"AdamW; median ms ({'CPU time' if cpu_clock else 'wall'}) of {args.repeats} "
          f"alternating steps; ratio = torch ms / seqattn "
          "ms (above 1: seqattn faster)")
    with threadpool_limits(args.threads), hog_one_core(args.hog):
        for row in rows:
            steps, first_loss = contenders(row, args.thread_choices)
            medians = dict(zip(steps, median_seconds(list(steps.values()), args.repeats,
                                                     clock)))
            others = "".join(f"; {name} {1e3 * t:.2f} ms ({medians['torch'] / t:.2f}x)"
                             for name, t in medians.items() if name not in ("seqattn", "torch"))
            print(f"{row_name(row):32} seqattn {1e3 * medians['seqattn']:8.2f} ms  torch "
                  f"{1e3 * medians['torch']:8.2f} ms  ratio "
                  f"{medians['torch'] / medians['seqattn']:5.2f}x  first loss "
                  f"{first_loss['seqattn']:.5f} / {first_loss['torch']:.5f}{others}",
                  flush=True)
    print(f"1-min load average {load_before:.1f} before, {os.getloadavg()[0]:.1f} after")


if __name__ == "__main__":
    main()
