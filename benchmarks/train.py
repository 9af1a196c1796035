"""Benchmark training steps per second of a small N -> N model against the same model and
optimizer in torch on the same threads.

The model: TokenModel with 4 input and 4 output features, d_model 64, 2 pre-norm GELU encoder
layers, 4 heads, FFN 128, fixed sinusoidal positions; batch 16, N 64, float32. One step is
forward, MSE loss, backward, global-norm clipping to 1.0 and AdamW (torch: the same modules with
the same weights, torch.nn.utils.clip_grad_norm_ and torch.optim.AdamW). Steps of the two sides
alternate after a warm-up (compilation); medians are printed with the machine's load average,
and the first step's losses of both sides as a check that they compute the same thing. Also
prints the rate of ``seqattn.train.fit`` over an epoch, which adds the host-side batch checks.

The seqattn contender runs as a user gets it: launches leave the cores that other processes hold
(``seqattn.follow_machine_load``, on by default). Two more contenders in the same rounds show what
the thread choices of kernels/cpu/threads.py are worth under the same load: seqattn with launches
sized by their work alone (``follow_machine_load(False)``), blind to the cores other processes
hold, and seqattn with every kernel launch on all threads, as before small launches ran serial.
``--hog`` keeps one core busy with another process meanwhile.

    python benchmarks/train.py                # 2 threads, 20 alternating repeats
    python benchmarks/train.py --repeats 5    # a smoke run
    python benchmarks/train.py --hog          # with another process spinning on one core
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
from seqattn.models import TokenModel, TokenModelConfig
from seqattn.train import AdamW, MSELoss, clip_factor, fit, global_grad_norm

CONFIG = dict(in_features=4, out_features=4, d_model=64, nhead=4, num_layers=2,
              dim_feedforward=128, max_len=64, activation="gelu")
BATCH, N = 16, 64


def torch_twin(ours):
    """The same model in torch.nn, parameter for parameter (same names, same weights)."""
    import torch

    class Twin(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = torch.nn.Module()
            self.encoder.embed = torch.nn.Linear(CONFIG["in_features"], CONFIG["d_model"])
            layer = torch.nn.TransformerEncoderLayer(
                CONFIG["d_model"], CONFIG["nhead"], CONFIG["dim_feedforward"], dropout=0.0,
                activation="gelu", norm_first=True, batch_first=True)
            self.encoder.encoder = torch.nn.TransformerEncoder(
                layer, CONFIG["num_layers"], torch.nn.LayerNorm(CONFIG["d_model"]),
                enable_nested_tensor=False)
            self.head = torch.nn.Linear(CONFIG["d_model"], CONFIG["out_features"])
            self.register_buffer("table", torch.from_numpy(ours.encoder.positions.table.copy()),
                                 persistent=False)

        def forward(self, x):
            h = self.encoder.embed(x) + self.table[:x.shape[1]]
            return self.head(self.encoder.encoder(h))

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


def median_seconds(steps, repeats, seed=0):
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
            start = time.perf_counter()
            steps[index]()
            times[index].append(time.perf_counter() - start)
    return [statistics.median(spent) for spent in times]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--hog", action="store_true", help="keep one core busy meanwhile")
    args = parser.parse_args()

    import numba
    import torch
    from threadpoolctl import threadpool_limits

    numba.set_num_threads(args.threads)
    torch.set_num_threads(args.threads)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(BATCH, N, CONFIG["in_features"])).astype(np.float32)
    y = rng.normal(size=(BATCH, N, CONFIG["out_features"])).astype(np.float32)

    ours = TokenModel(TokenModelConfig(**CONFIG))
    theirs = torch_twin(ours)
    loss, optimizer = MSELoss(), AdamW(ours, lr=1e-3)
    torch_optimizer = torch.optim.AdamW(theirs.parameters(), lr=1e-3)
    x_torch, y_torch = torch.from_numpy(x), torch.from_numpy(y)
    first_loss = {}

    def step_ours():
        value = loss(ours(x), y)
        optimizer.zero_grad()
        ours.backward(loss.backward())
        optimizer.step(clip_factor(global_grad_norm(ours.parameters()), 1.0))
        first_loss.setdefault("seqattn", value)

    def step_torch():
        value = torch.nn.functional.mse_loss(theirs(x_torch), y_torch)
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

    load_before = os.getloadavg()[0]
    with threadpool_limits(args.threads), hog_one_core(args.hog):
        t_ours, t_blind, t_parallel, t_torch = median_seconds(
            [step_ours, step_ours_blind, step_ours_all_parallel, step_torch], args.repeats)
        epoch_batches = 20
        data = (np.repeat(x, epoch_batches, 0), np.repeat(y, epoch_batches, 0))
        start = time.perf_counter()
        fit(ours, loss, optimizer, data, epochs=1, batch_size=BATCH, progress=False)
        t_fit = (time.perf_counter() - start) / epoch_batches
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
          f"{args.threads} threads, torch {torch.__version__}, BLAS {LIBRARY}; 1-min load "
          f"average {load_before:.1f} before, {os.getloadavg()[0]:.1f} after"
          + ("; another process spinning on one core" if args.hog else ""))
    print(f"TokenModel d_model {CONFIG['d_model']}, {CONFIG['num_layers']} layers, "
          f"{CONFIG['nhead']} heads, FFN {CONFIG['dim_feedforward']}, batch {BATCH}, N {N}, "
          f"float32; MSE + clipping + AdamW; median of {args.repeats} alternating steps")
    print(f"first-step loss: seqattn {first_loss['seqattn']:.6f}, torch "
          f"{first_loss['torch']:.6f}")
    print(f"seqattn step    {1 / t_ours:8.1f} steps/s ({1e3 * t_ours:.1f} ms)")
    print(f"  threads by work alone, blind to other processes {1 / t_blind:8.1f} steps/s "
          f"({1e3 * t_blind:.1f} ms)")
    print(f"  every launch on all threads {1 / t_parallel:8.1f} steps/s "
          f"({1e3 * t_parallel:.1f} ms)")
    print(f"torch step      {1 / t_torch:8.1f} steps/s ({1e3 * t_torch:.1f} ms)")
    print(f"seqattn fit     {1 / t_fit:8.1f} steps/s over an epoch of {epoch_batches} batches")
    print(f"ratio seqattn/torch (step): {t_torch / t_ours:.2f}x; blind to other processes "
          f"{t_torch / t_blind:.2f}x; with every launch on all threads "
          f"{t_torch / t_parallel:.2f}x")


if __name__ == "__main__":
    main()
