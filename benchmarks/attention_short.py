"""Where the short-sequence attention (kernels/cpu/attention_small.py) stops beating the tiled one
(kernels/cpu/attention.py): the evidence for attention_small.MAX_LENGTH.

For the head dims and batch x heads of the small models the examples train, and lengths from 8
to 512, times a forward plus backward of each kernel on the same prepared call (a padding mask
on every batch, lengths between N / 2 and N), with torch's scaled_dot_product_attention as the
peer on the same threads. The contenders alternate in a shuffled order each round; medians in
microseconds, and the ratios torch / kernel (above 1: the kernel is faster). On one thread
(the default) the times are CPU seconds of the calling thread, where both sides run all their
work: on a shared machine busier than its cores, wall time charges whoever held the core.

    python benchmarks/attention_short.py                # 1 thread, the grid below
    python benchmarks/attention_short.py --threads 2 --repeats 30
    python benchmarks/attention_short.py --shapes 16,4,16 16,4,64 --lengths 512 768 1024
"""
import argparse
import os
import platform
import time

import numpy as np
from train import median_seconds  # benchmarks/train.py: steps alternated in shuffled order

# (batch, heads, head dim): the models of benchmarks/train.py
SHAPES = [(16, 4, 16), (64, 2, 8), (128, 4, 8), (16, 2, 8), (16, 2, 32)]
LENGTHS = [8, 16, 24, 32, 48, 64, 128, 192, 256, 384, 512]


def inputs(B, H, N, D, seed=0):
    rng = np.random.default_rng(seed)
    q, k, v, dout = (rng.standard_normal((B, H, N, D)).astype(np.float32) for _ in range(4))
    lengths = rng.integers(max(1, N // 2), N + 1, size=B)
    mask = np.arange(N)[None, :] >= lengths[:, None]
    return q, k, v, dout, mask


def kernel_step(kernels, q, k, v, dout, mask):
    """A forward and a backward of one kernel module on a prepared call."""
    from seqattn.kernels.cpu.attention import StructuredGrads
    from seqattn.ops.attention_inputs import prepare_attention

    call = prepare_attention(q, k, v, key_padding_mask=mask)
    out, lse = np.empty_like(q), np.empty(q.shape[:3], q.dtype)
    dq, dk, dv = np.empty_like(q), np.empty_like(k), np.empty_like(v)

    def step():
        kernels.attention_forward(out, lse, call)
        kernels.attention_backward(dq, dk, dv, StructuredGrads(None, None, None, None), dout,
                                   out, lse, call)
    return step


def torch_step(q, k, v, dout, mask):
    import torch

    q_t, k_t, v_t = (torch.from_numpy(a).requires_grad_() for a in (q, k, v))
    # SDPA's boolean mask: True = may attend
    allowed = torch.from_numpy(~mask)[:, None, None, :]
    dout_t = torch.from_numpy(dout)

    def step():
        out = torch.nn.functional.scaled_dot_product_attention(q_t, k_t, v_t, attn_mask=allowed)
        out.backward(dout_t)
    return step


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--shapes", nargs="+", metavar="B,H,D",
                        type=lambda text: tuple(int(n) for n in text.split(",")),
                        default=SHAPES, help="batch, heads and head dim of each call")
    parser.add_argument("--lengths", nargs="+", type=int, default=LENGTHS)
    args = parser.parse_args()

    import torch  # started before Numba's threads (docs/PERFORMANCE.md)
    import numba
    from threadpoolctl import threadpool_limits

    from seqattn.kernels.cpu import attention, attention_small

    torch.set_num_threads(args.threads)
    numba.set_num_threads(args.threads)
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
          f"{args.threads} threads, torch {torch.__version__}; float32, padding masks; "
          f"forward + backward, median us ({'CPU' if args.threads == 1 else 'wall'}) of "
          f"{args.repeats} alternating rounds; "
          f"the op runs the short kernel (*) where N <= {attention_small.MAX_LENGTH}")
    print(f"{'B H D':>10} {'N':>5} {'short':>9} {'tiled':>9} {'torch':>9} "
          f"{'tiled/short':>12} {'torch/short':>12} {'torch/tiled':>12}")
    clock = time.thread_time if args.threads == 1 else time.perf_counter
    load_before = os.getloadavg()[0]
    with threadpool_limits(args.threads):
        for B, H, D in args.shapes:
            for N in args.lengths:
                arrays = inputs(B, H, N, D)
                short, tiled, peer = median_seconds(
                    [kernel_step(attention_small, *arrays), kernel_step(attention, *arrays),
                     torch_step(*arrays)], args.repeats, clock)
                chosen = "*" if N <= attention_small.MAX_LENGTH else " "
                print(f"{B:>4} {H} {D:>2} {N:>4}{chosen} {1e6 * short:9.1f} {1e6 * tiled:9.1f} "
                      f"{1e6 * peer:9.1f} {tiled / short:12.2f} {peer / short:12.2f} "
                      f"{peer / tiled:12.2f}", flush=True)
    print(f"1-min load average {load_before:.1f} before, {os.getloadavg()[0]:.1f} after")


if __name__ == "__main__":
    main()
