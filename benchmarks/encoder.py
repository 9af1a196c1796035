"""Benchmark forward + backward of a Transformer encoder against the same model in torch.nn.

The issue's model: 4 pre-norm GELU layers, d_model 256, 8 heads, FFN 1024, batch 8, N 1024,
float32. Both models get the same weights; torch runs on the same number of threads (CPU) or
the same GPU in float32. Prints tokens per second (median of the timed repeats, which alternate
between the two models, after a warm-up that compiles the kernels), the ratio seqattn / torch
and the machine's load average around the run.

    python benchmarks/encoder.py                  # the issue's size on 2 CPU threads
    python benchmarks/encoder.py --quick          # N=128, a smoke run
    python benchmarks/encoder.py --device cuda    # both on the GPU
"""
import argparse
import os
import platform
import statistics
import time

import numpy as np

import seqattn.nn as nn


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


def step_seconds(steps, repeats):
    """Per (step, synchronize) pair: (median wall, min wall, max wall, median CPU) seconds per
    step. The steps alternate, so a load that other users put on a shared machine meanwhile
    falls on both sides alike; the process's CPU time (all its threads, spinning included) is
    the figure such load disturbs least."""
    for step, synchronize in steps:
        step()  # warm-up: compilation, allocator
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


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    args.layers, args.d_model, args.heads, args.ffn, args.batch = 4, 256, 8, 1024, 8
    args.n = 128 if args.quick else 1024

    import numba
    import torch
    from threadpoolctl import threadpool_limits

    numba.set_num_threads(args.threads)
    torch.set_num_threads(args.threads)
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
    with threadpool_limits(args.threads):
        ours_times, torch_times = step_seconds([(step_ours, sync_ours), (step_torch, sync_torch)],
                                         args.repeats)
    tokens = args.batch * args.n
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
          f"device {args.device}, {args.threads} threads, torch {torch.__version__}; "
          f"1-min load average {load_before:.1f} before, {os.getloadavg()[0]:.1f} after")
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
