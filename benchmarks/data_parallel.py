"""Data-parallel fit over MPI on one machine: samples per second of the encoder benchmark's model
trained by one process on all threads, and by 1 and 2 MPI ranks of one thread each; then the
all-reduce time against the message size (what a step pays per byte of gradients).

    python benchmarks/data_parallel.py            # d_model 256, 4 layers, batch 8 per rank, N 256
    python benchmarks/data_parallel.py --quick    # a smaller model, a smoke run

Each configuration runs in its own processes (``mpiexec`` from the mpich wheel for the ranks), so
Numba's and BLAS's threads are set before they start. Prints medians over the timed steps after
warm-up steps (compilation excluded), and the machine's load average.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve()


def _model_and_batches(args, rank):
    import seqattn.nn as nn
    from seqattn.train import TrainingBatch

    layer = nn.TransformerEncoderLayer(args.d_model, args.heads, 4 * args.d_model, dropout=0.0,
                                       activation="gelu", norm_first=True, seed=0)
    model = nn.TransformerEncoder(layer, args.layers)
    rng = np.random.default_rng([1, rank])
    batches = [TrainingBatch(rng.standard_normal((args.batch, args.tokens, args.d_model),
                                                 dtype=np.float32),
                             rng.standard_normal((args.batch, args.tokens, args.d_model),
                                                 dtype=np.float32))
               for _ in range(args.steps)]
    return model, batches


def worker(args):
    """One configuration: rank 0 prints {"seconds_per_step": [...]} as JSON."""
    from seqattn.train import SGD, MSELoss, fit

    distributed = args.ranks > 0
    rank, size = 0, 1
    if distributed:
        from mpi4py import MPI

        rank, size = MPI.COMM_WORLD.Get_rank(), MPI.COMM_WORLD.Get_size()
    model, batches = _model_and_batches(args, rank)
    stamps = []
    fit(model, MSELoss(), SGD(model.parameters(), lr=1e-4), batches[:size * 2], epochs=1,
        progress=False, distributed=distributed or None)  # warm-up: compilation
    for _ in range(args.repeats):
        start = time.perf_counter()
        fit(model, MSELoss(), SGD(model.parameters(), lr=1e-4), batches[:size * args.per_run],
            epochs=1, progress=False, distributed=distributed or None)
        stamps.append((time.perf_counter() - start) / args.per_run)
    if rank == 0:
        print(json.dumps({"seconds_per_step": stamps}))


def allreduce_worker(args):
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    out = {}
    for exponent in range(10, 27, 2):
        data = np.ones(2 ** exponent // 8)
        result = np.empty_like(data)
        comm.Allreduce(data, result)
        times = []
        for _ in range(args.repeats * 3):
            comm.Barrier()
            start = time.perf_counter()
            comm.Allreduce(data, result)
            times.append(time.perf_counter() - start)
        out[2 ** exponent] = statistics.median(times)
    if comm.Get_rank() == 0:
        print(json.dumps(out))


def _launch(args, ranks, threads, mode="worker"):
    env = {**os.environ, "NUMBA_NUM_THREADS": str(threads), "OMP_NUM_THREADS": "1",
           "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    command = [sys.executable, str(HERE), f"--{mode}", "--ranks", str(ranks), *args.passed]
    if ranks:
        launcher = shutil.which("mpiexec", path=f"{Path(sys.executable).parent}:{env['PATH']}")
        command = [launcher, "-n", str(ranks), *command]
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--allreduce", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--ranks", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    args.passed = [a for a in sys.argv[1:] if a in ("--quick",)] + ["--repeats",
                                                                     str(args.repeats)]
    args.d_model, args.heads, args.layers, args.batch, args.tokens = \
        (64, 4, 2, 8, 64) if args.quick else (256, 8, 4, 8, 256)
    args.per_run = 3
    args.steps = 3 * args.per_run
    if args.worker:
        return worker(args)
    if args.allreduce:
        return allreduce_worker(args)
    cores = os.cpu_count()
    print(f"model d_model {args.d_model}, {args.layers} layers, batch {args.batch} per rank, "
          f"N {args.tokens}; load average before {os.getloadavg()[0]:.1f}")
    rows = [("1 process, all threads", 0, cores), ("1 rank, 1 thread", 1, 1),
            (f"{cores} ranks, 1 thread each", cores, 1)]
    baseline = None
    for name, ranks, threads in rows:
        step = statistics.median(_launch(args, ranks, threads)["seconds_per_step"])
        samples = args.batch * max(ranks, 1) / step
        baseline = baseline or samples
        print(f"{name:28s} {1 / step:8.2f} steps/s {samples:9.1f} samples/s "
              f"({samples / baseline:.2f}x the first row)")
    print("all-reduce of float64 gradients between 2 ranks (median):")
    for size, seconds in _launch(args, 2, 1, "allreduce").items():
        print(f"  {int(size):>10d} bytes {seconds * 1e6:10.1f} us {int(size) / seconds / 1e9:7.2f} "
              "GB/s")
    print(f"load average after {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
