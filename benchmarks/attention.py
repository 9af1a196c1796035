"""Benchmark the fused attention operator against torch's scaled_dot_product_attention.

Prints, per (N, D, causal) and for forward and backward: seqattn GFLOP/s, torch GFLOP/s on the
same threads, a naive NumPy implementation, the ratio seqattn/torch and the peak memory growth.
FLOPs are counted as FlashAttention counts them: 4*B*H*N*M*D forward, 2.5x that backward, halved
when causal. Times are medians of repeated rounds after a warm-up round (compilation is not
counted); each round times every contender once, in turn, so load from other jobs on a shared
machine falls on all of them alike.

    python benchmarks/attention.py                   # the issue's table (several minutes)
    python benchmarks/attention.py --quick           # one small size, a smoke run
    python benchmarks/attention.py --threads 1 --clock cpu   # CPU seconds, for a shared machine
    python benchmarks/attention.py --long            # N=32768, H=1: forward+backward memory
    python benchmarks/attention.py --structured      # distance and pair-code biases vs plain
    python benchmarks/attention.py --structured --threads 1 --clock cpu
    python benchmarks/attention.py --device cuda     # CUDA kernels vs torch on the GPU

seqattn runs on all the threads asked for, as torch does, even where other processes keep cores
busy (``threads.follow_machine_load(False)``): following the load, seqattn ran on one thread
whenever another job held half a core, against torch's two. ``--follow-load`` times it as a
user's call runs, leaving those cores.
"""
import argparse
import os
import platform
import statistics
import sys
import threading
import time

import numpy as np

import seqattn
from seqattn.kernels.cpu.threads import follow_machine_load
from seqattn.kernels.cpu.workspace import held_bytes


CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}


def attention_flops(B, H, N, M, D, causal, backward=False):
    flops = 4.0 * B * H * N * M * D * (2.5 if backward else 1.0)
    return flops / 2 if causal else flops


class PeakMemory:
    """Peak growth of host RSS (CPU) or device memory in use (GPU) while the block runs."""

    def __init__(self, device):
        self.device = device
        self.peak = 0

    def _host_rss(self):
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

    def _device_used(self):
        from numba import cuda

        free, total = cuda.current_context().get_memory_info()
        return total - free

    def __enter__(self):
        self._read = self._device_used if self.device == "cuda" else self._host_rss
        self.base = self._read()
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def _sample(self):
        while not self._stop.is_set():
            self.peak = max(self.peak, self._read() - self.base)
            time.sleep(0.0005)

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self._read() - self.base)


def timed(fn, sync, clock=time.perf_counter):
    """Seconds of ``clock`` for one call of fn, the device drained before and after."""
    sync()
    start = clock()
    fn()
    sync()
    return clock() - start


def interleaved_medians(timers, repeats, warmup=True):
    """Median seconds per contender, timing one call of each per round in turn, so that load
    from other jobs on a shared machine falls on all contenders alike. With ``warmup`` the first
    round is a warm-up (compilation, first-touch allocations) and is not counted."""
    samples = {name: [] for name in timers}
    for round_ in range(repeats + int(warmup)):
        for name, timer in timers.items():
            elapsed = timer()
            if round_ or not warmup:
                samples[name].append(elapsed)
    return {name: statistics.median(times) for name, times in samples.items()}


def naive_numpy_forward(q, k, v, causal):
    s = np.einsum("bhnd,bhmd->bhnm", q, k) / np.sqrt(q.shape[-1]).astype(q.dtype)
    if causal:
        n, m = s.shape[-2:]
        s = np.where(np.arange(m)[None, :] <= np.arange(n)[:, None] + (m - n), s, -np.inf)
    s = np.exp(s - s.max(axis=-1, keepdims=True))
    return np.einsum("bhnm,bhmd->bhnd", s / s.sum(axis=-1, keepdims=True), v)


class SeqattnRunner:
    def __init__(self, device, q, k, v, causal, clock=time.perf_counter):
        self.device, self.causal, self.clock = device, causal, clock
        if device == "cuda":
            from numba import cuda

            self.sync = cuda.synchronize
            q, k, v = (cuda.to_device(a) for a in (q, k, v))
        else:
            self.sync = lambda: None
        self.q, self.k, self.v = q, k, v
        self.out, self.lse = seqattn.attention(q, k, v, causal=causal, return_lse=True)
        self.dout = self.out  # any array of the right shape will do for timing

    def forward(self):
        seqattn.attention(self.q, self.k, self.v, causal=self.causal, return_lse=True)

    def backward(self):
        seqattn.attention_backward(self.dout, self.q, self.k, self.v, self.out, self.lse,
                                   causal=self.causal)

    def forward_time(self):
        return timed(self.forward, self.sync, self.clock)

    def backward_time(self):
        return timed(self.backward, self.sync, self.clock)


class TorchRunner:
    def __init__(self, device, q, k, v, causal, clock=time.perf_counter):
        import torch

        self.torch, self.causal, self.clock = torch, causal, clock
        dev = "cuda" if device == "cuda" else "cpu"
        self.sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
        self.q, self.k, self.v = (torch.tensor(a, device=dev, requires_grad=True)
                                  for a in (q, k, v))
        self.dout = torch.ones_like(self.q)

    def _sdpa(self):
        return self.torch.nn.functional.scaled_dot_product_attention(
            self.q, self.k, self.v, is_causal=self.causal)

    def forward_time(self):
        with self.torch.no_grad():
            return timed(self._sdpa, self.sync, self.clock)

    def backward_time(self):
        out = self._sdpa()  # the forward that records the graph is not timed
        return timed(lambda: out.backward(self.dout), self.sync, self.clock)


def torch_available():
    try:
        import torch  # noqa: F401
    except ImportError:
        return False
    return True


def peak_memory(device, fn, sync):
    """Peak memory growth of one call of fn, after a warm-up call, and the bytes of scratch
    buffers that the CPU kernels keep after it (released before the call, so that it allocates
    its own; the RSS may not grow where the allocator had the memory still)."""
    fn()
    sync()
    if device == "cpu":
        seqattn.release_scratch()
    with PeakMemory(device) as mem:
        fn()
        sync()
    return mem.peak, held_bytes() if device == "cpu" else 0


def run_case(device, B, H, N, D, causal, repeats, with_naive, clock=time.perf_counter):
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((B, H, N, D)).astype(np.float32) for _ in range(3))
    row = {"N": N, "D": D, "causal": causal}
    ours = SeqattnRunner(device, q, k, v, causal, clock)
    row["fwd_mem"], row["fwd_scratch"] = peak_memory(device, ours.forward, ours.sync)
    row["bwd_mem"], row["bwd_scratch"] = peak_memory(device, ours.backward, ours.sync)
    timers = {"fwd_s": ours.forward_time, "bwd_s": ours.backward_time}
    if torch_available():
        theirs = TorchRunner(device, q, k, v, causal, clock)
        timers.update(torch_fwd_s=theirs.forward_time, torch_bwd_s=theirs.backward_time)
    if with_naive and device == "cpu":
        timers["naive_fwd_s"] = lambda: timed(lambda: naive_numpy_forward(q, k, v, causal),
                                              ours.sync, clock)
    row.update(interleaved_medians(timers, repeats))
    fwd = attention_flops(B, H, N, N, D, causal)
    bwd = attention_flops(B, H, N, N, D, causal, backward=True)
    gf = lambda flops, key: flops / row[key] / 1e9 if key in row else float("nan")  # noqa: E731
    row.update(fwd_gflops=gf(fwd, "fwd_s"), bwd_gflops=gf(bwd, "bwd_s"),
               torch_fwd_gflops=gf(fwd, "torch_fwd_s"), torch_bwd_gflops=gf(bwd, "torch_bwd_s"),
               naive_fwd_gflops=gf(fwd, "naive_fwd_s"))
    return row


def print_header(device, threads, clock_name, follow_load=False):
    import numba

    print(f"# seqattn attention benchmark, device={device}, threads={threads}, "
          f"clock={clock_name}, follow load {'on' if follow_load else 'off'}, "
          f"1-min load {os.getloadavg()[0]:.1f}, "
          f"numba {numba.__version__}, numpy {np.__version__}, {platform.processor() or ''} "
          f"{platform.machine()}, {os.cpu_count()} logical CPUs")
    print("| N | D | causal | pass | seqattn GFLOP/s | torch GFLOP/s | naive NumPy GFLOP/s "
          "| seqattn/torch | peak mem MiB | scratch held MiB |")
    print("|---|---|---|---|---|---|---|---|---|---|")


def print_row(r):
    mib = 1 << 20
    for p in ("fwd", "bwd"):
        naive = r["naive_fwd_gflops"] if p == "fwd" else float("nan")
        ratio = r[f"{p}_gflops"] / r[f"torch_{p}_gflops"]  # nan without torch
        print(f"| {r['N']} | {r['D']} | {r['causal']} | {p} | {r[f'{p}_gflops']:.1f} | "
              f"{r[f'torch_{p}_gflops']:.1f} | {naive:.1f} | {ratio:.2f} | "
              f"{r[f'{p}_mem'] / mib:.1f} | {r[f'{p}_scratch'] / mib:.1f} |", flush=True)


class BiasedRunner(SeqattnRunner):
    """seqattn with extra options (a structured or a dense bias), forward and backward, timed by
    ``clock`` (time.perf_counter for wall time, time.process_time for CPU time)."""

    def __init__(self, device, q, k, v, options, bias_requires_grad=False,
                 clock=time.perf_counter):
        self.options, self.bias_requires_grad, self.clock = options, bias_requires_grad, clock
        self.sync = lambda: None
        self.q, self.k, self.v = q, k, v
        self.out, self.lse = seqattn.attention(q, k, v, return_lse=True, **options)
        self.dout = self.out

    def forward(self):
        seqattn.attention(self.q, self.k, self.v, return_lse=True, **self.options)

    def backward(self):
        seqattn.attention_backward(self.dout, self.q, self.k, self.v, self.out, self.lse,
                                   bias_requires_grad=self.bias_requires_grad, **self.options)

    def _timed(self, fn):
        start = self.clock()
        fn()
        return self.clock() - start

    def forward_time(self):
        return self._timed(self.forward)

    def backward_time(self):
        return self._timed(self.backward)


def structured_biases(B=1, H=8, N=4096, D=64, repeats=5, clock_name="wall", dense=True):
    """Forward and backward with a distance bias, pair codes, a relative-position bias and a
    dense (B, H, N, N) bias tensor, as ratios to plain attention measured in the same rounds
    (the issue's target: structured <= 1.3x plain and faster than dense), plus torch SDPA
    plain as the peer that shows whether plain attention itself kept its speed. ``clock_name``
    is a key of CLOCKS: "cpu" times both by the process's CPU time (a loaded machine's wall
    times include the time other processes held the core)."""
    from seqattn.ops import DistanceBias, PairBias

    clock = CLOCKS[clock_name]
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((B, H, N, D)).astype(np.float32) for _ in range(3))
    # A molecule-like cloud: atoms in a 30 A box, a table of 64 bins up to 10 A.
    positions = rng.uniform(0, 30, (B, N, 3)).astype(np.float32)
    distance = DistanceBias(positions, rng.standard_normal((H, 64)).astype(np.float32), 10.0)
    hops = rng.integers(0, 16, (N, N)).astype(np.int8)  # e.g. shortest-path hops on a graph
    pair = PairBias(rng.standard_normal((H, 16)).astype(np.float32), hops)
    relative = PairBias.relative(rng.standard_normal((H, 129)).astype(np.float32))
    options = {"plain": {}, "distance": {"distance_bias": distance},
               "pair codes": {"pair_bias": pair}, "relative": {"pair_bias": relative}}
    runners = {name: BiasedRunner("cpu", q, k, v, opts, clock=clock)
               for name, opts in options.items()}
    if dense:
        runners["dense bias"] = BiasedRunner(
            "cpu", q, k, v, {"bias": rng.standard_normal((B, H, N, N)).astype(np.float32)},
            bias_requires_grad=True, clock=clock)
    timers = {}
    for name, runner in runners.items():
        timers[f"{name} fwd"] = runner.forward_time
        timers[f"{name} bwd"] = runner.backward_time
    if torch_available():
        theirs = TorchRunner("cpu", q, k, v, False, clock)
        timers.update({"torch fwd": theirs.forward_time, "torch bwd": theirs.backward_time})
    medians = interleaved_medians(timers, repeats)
    print(f"# structured biases, B{B} H{H} N{N} D{D} float32, medians of {repeats} rounds, "
          f"clock={clock_name}")
    print("| bias | fwd s | bwd s | fwd / plain | bwd / plain | fwd+bwd / plain "
          "| fwd+bwd / dense |")
    print("|---|---|---|---|---|---|---|")
    total = {name: medians[f"{name} fwd"] + medians[f"{name} bwd"] for name in runners}
    for name in runners:
        versus_dense = f"{total[name] / total['dense bias']:.2f}" if dense else "-"
        print(f"| {name} | {medians[f'{name} fwd']:.3f} | {medians[f'{name} bwd']:.3f} | "
              f"{medians[f'{name} fwd'] / medians['plain fwd']:.2f} | "
              f"{medians[f'{name} bwd'] / medians['plain bwd']:.2f} | "
              f"{total[name] / total['plain']:.2f} | {versus_dense} |")
    if torch_available():
        print(f"| torch SDPA (plain) | {medians['torch fwd']:.3f} | {medians['torch bwd']:.3f} "
              f"| seqattn plain / torch: fwd {medians['plain fwd'] / medians['torch fwd']:.2f}, "
              f"bwd {medians['plain bwd'] / medians['torch bwd']:.2f} | | | |")


def long_sequence(device, N=32768, D=64):
    """Forward plus backward at N=32768, H=1: the peak memory growth must stay under 256 MiB.
    Compilation is not counted, as in the timings: Numba compiling the kernels inside the
    measurement added 226 MiB (a fresh cache), loading them from its cache 7 MiB. So the kernels
    run once first, at a length that takes the same paths, and give their scratch back."""
    rng = np.random.default_rng(0)
    warm = SeqattnRunner(device, *(rng.standard_normal((1, 1, 4096, D)).astype(np.float32)
                                   for _ in range(3)), causal=False)
    warm.backward()
    seqattn.release_scratch()
    q, k, v = (rng.standard_normal((1, 1, N, D)).astype(np.float32) for _ in range(3))
    ours = SeqattnRunner(device, q, k, v, causal=False)
    start = time.perf_counter()
    with PeakMemory(device) as mem:
        ours.forward()
        ours.backward()
        ours.sync()
    elapsed = time.perf_counter() - start
    inputs_mib = 3 * q.nbytes / (1 << 20)
    print(f"# long sequence N={N} H=1 D={D}: forward+backward {elapsed:.1f} s, peak memory "
          f"growth {mem.peak / (1 << 20):.1f} MiB (inputs {inputs_mib:.1f} MiB; "
          f"target < 256 MiB: {'met' if mem.peak < 256 << 20 else 'MISSED'})")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--threads", type=int, default=2, help="CPU threads for both sides")
    parser.add_argument("--sizes", type=int, nargs="+", default=[512, 1024, 4096, 16384])
    parser.add_argument("--head-dims", type=int, nargs="+", default=[64, 128])
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--clock", choices=sorted(CLOCKS), default="wall",
                        help="wall: time.perf_counter; cpu: time.process_time, the CPU seconds "
                             "of the process (with --threads 1, unaffected by other jobs taking "
                             "the core between time slices)")
    parser.add_argument("--follow-load", action="store_true",
                        help="seqattn leaves the cores that other processes keep busy (its "
                             "default for users); without it, both sides run on --threads")
    parser.add_argument("--quick", action="store_true", help="one small size only")
    parser.add_argument("--causal", choices=["both", "no", "yes"], default="both")
    parser.add_argument("--no-naive", action="store_true", help="leave out the NumPy forward")
    parser.add_argument("--long", action="store_true", help="only the N=32768 memory check")
    parser.add_argument("--structured", action="store_true",
                        help="only the structured biases at B1 H8 N4096 D64 (CPU)")
    parser.add_argument("--no-dense", action="store_true",
                        help="with --structured: leave out the dense bias tensor (1 GiB)")
    args = parser.parse_args(argv)

    # torch first: started after Numba's OpenMP threads, torch's own OpenMP runtime ran 4-5x
    # slower here (measured), which would flatter seqattn.
    if torch_available():
        import torch

        torch.set_num_threads(args.threads)
    import numba

    numba.set_num_threads(min(args.threads, numba.config.NUMBA_NUM_THREADS))
    follow_machine_load(args.follow_load)
    if args.long:
        long_sequence(args.device)
        return 0
    if args.structured:
        structured_biases(repeats=args.repeats, clock_name=args.clock,
                          dense=not args.no_dense)
        return 0
    sizes, dims = (([512], [64]) if args.quick else (args.sizes, args.head_dims))
    print_header(args.device, args.threads, args.clock, args.follow_load)
    for N in sizes:
        for D in dims:
            for causal in {"both": (False, True), "no": (False,), "yes": (True,)}[args.causal]:
                repeats = args.repeats if N <= 4096 else max(2, args.repeats // 3)
                print_row(run_case(args.device, args.batch, args.heads, N, D, causal, repeats,
                                   with_naive=N <= 4096 and not args.no_naive,
                                   clock=CLOCKS[args.clock]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
