"""Benchmark graphs at scale: shortest-path pair codes and a graph model's step on 8,192 nodes.

1. Breadth-first search: ``seqattn.graphs.shortest_path_codes`` (Numba, parallel over the
   sources, int8 codes) against scipy.sparse.csgraph.shortest_path (unweighted, C, one thread,
   float64 distances) on the same graph; median of ``--repeats`` alternating rounds after a
   warm-up (compilation) on a small graph.
2. The adapter's encoding of that graph (pair codes, degrees) with the hop codes alone and with
   the edge weights in 4 quantile bins (``edge_weight_bins=4``, random integer weights): what
   the weight bins add to the codes' cost.
3. A GraphModel training step (forward and backward, the global distance bias: every node
   attends to every node with a learnable bias per hop distance) on one graph of 8,192 nodes,
   and the memory it takes: the peak of NumPy allocations above the start (tracemalloc) and the
   growth of the process's peak resident size (VmHWM, reset before the step, above VmRSS then),
   both after a warm-up step on a smaller graph, so compilation is not counted. The pair codes
   are N x N bytes; a dense float32 bias would be 4 N^2 bytes per head, and as much again for
   its gradient.

The graph: a ring (so it is connected) plus random chords, about ``--degree`` neighbours per
node, undirected. Run:  python benchmarks/graphs.py [--nodes 8192 --threads 2 --repeats 3]
"""
import argparse
import os
import statistics
import subprocess
import time
import tracemalloc

import numpy as np
import scipy.sparse as sp


def make_graph(n, degree, seed=0):
    """A connected undirected graph (CSR) of n nodes, about ``degree`` neighbours each."""
    rng = np.random.default_rng(seed)
    ring = np.arange(n)
    chords = rng.integers(0, n, size=(2, n * max(degree - 2, 0) // 2))
    source = np.concatenate([ring, chords[0]])
    target = np.concatenate([(ring + 1) % n, chords[1]])
    a = sp.coo_array((np.ones(len(source)), (source, target)), shape=(n, n)).tocsr()
    a = (a + a.T).tocsr()
    a.data[:] = 1.0
    a.setdiag(0)
    a.eliminate_zeros()
    return a


def resident_mib(field):
    """VmRSS (now) or VmHWM (the peak) of this process, MiB, from /proc (Linux)."""
    with open("/proc/self/status") as f:
        line = next(line for line in f if line.startswith(field + ":"))
    return int(line.split()[1]) / 1024


def reset_peak():
    """Start the peak resident size (VmHWM) afresh at the current size (Linux >= 4.0)."""
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")


def load():
    return os.getloadavg()[0]


def cpu_model():
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    except OSError:
        return "unknown"
    return next((line.split(":", 1)[1].strip() for line in out.splitlines()
                 if line.startswith("Model name")), "unknown")


def time_bfs(adjacency, max_distance, repeats):
    from scipy.sparse.csgraph import shortest_path

    from seqattn.graphs import shortest_path_codes

    shortest_path_codes(make_graph(64, 4), max_distance)  # compile
    ours, ours_cpu, scipy_times = [], [], []
    for _ in range(repeats):
        start, cpu = time.perf_counter(), time.process_time()
        codes = shortest_path_codes(adjacency, max_distance)
        ours.append(time.perf_counter() - start)
        ours_cpu.append(time.process_time() - cpu)
        start = time.perf_counter()
        distances = shortest_path(adjacency, unweighted=True, directed=False)
        scipy_times.append(time.perf_counter() - start)
    expected = np.where(np.isinf(distances), max_distance + 2,
                        np.minimum(distances, max_distance + 1))
    assert np.array_equal(codes, expected), "the codes disagree with scipy's distances"
    return (statistics.median(ours), statistics.median(ours_cpu),
            statistics.median(scipy_times), codes)


def time_encoding(adjacency, max_distance, repeats):
    """Median seconds of GraphAdapter.encode without and with weight bins (fit not timed)."""
    from seqattn.adapters import GraphAdapter
    from seqattn.readers import graph_dataset

    weighted = adjacency.copy()
    weighted.data = np.random.default_rng(1).integers(1, 20, weighted.nnz).astype(np.float64)
    weighted = (weighted + weighted.T).tocsr()  # symmetric: the undirected reading keeps it
    ds = graph_dataset(weighted)
    seconds = {}
    for bins in (None, 4):
        adapter = GraphAdapter(max_distance=max_distance, max_degree=8, edge_weight="weight",
                               edge_weight_bins=bins).fit(ds)
        adapter.encode(graph_dataset(make_graph(64, 4)))  # compile
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            adapter.encode(ds)
            times.append(time.perf_counter() - start)
        seconds[bins] = statistics.median(times)
    return seconds


def model_step(adjacency, max_distance, d_model, nhead):
    """Encode the graph, then one forward + backward of a GraphModel on it; returns (seconds
    and CPU seconds of the forward + backward, batch)."""
    from seqattn.adapters import GraphAdapter
    from seqattn.models import build
    from seqattn.readers import graph_dataset

    ds = graph_dataset(adjacency, nodes={"y": np.zeros(adjacency.shape[0])})
    adapter = GraphAdapter(max_distance=max_distance, max_degree=8).fit(ds, targets="y")
    batch = adapter.encode(ds)
    model = build(adapter.model_config(d_model=d_model, nhead=nhead, num_layers=1,
                                       dim_feedforward=2 * d_model))
    model.train()
    start, cpu = time.perf_counter(), time.process_time()
    out = model(batch.tokens, batch.key_padding_mask, coords=batch.coords,
                structure=batch.structure)
    model.backward(np.ones_like(out))
    return time.perf_counter() - start, time.process_time() - cpu, batch


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", type=int, default=8192)
    parser.add_argument("--degree", type=int, default=8)
    parser.add_argument("--max-distance", type=int, default=6)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--d-model", type=int, default=32)
    parser.add_argument("--nhead", type=int, default=4)
    args = parser.parse_args(argv)
    import numba

    numba.set_num_threads(args.threads)
    print(f"CPU: {cpu_model()}; {args.threads} threads; load average {load():.1f}")
    adjacency = make_graph(args.nodes, args.degree)
    print(f"graph: {args.nodes} nodes, {adjacency.nnz // 2} undirected edges")
    ours, ours_cpu, scipy_seconds, codes = time_bfs(adjacency, args.max_distance, args.repeats)
    print(f"BFS pair codes: seqattn {ours:.2f} s ({ours_cpu:.2f} CPU s; "
          f"{codes.nbytes / 2**20:.0f} MiB {codes.dtype}), "
          f"scipy shortest_path {scipy_seconds:.2f} s (float64, "
          f"{codes.size * 8 / 2**20:.0f} MiB): {scipy_seconds / ours:.2f}x; load {load():.1f}")
    del codes
    encoding = time_encoding(adjacency, args.max_distance, args.repeats)
    print(f"GraphAdapter.encode: hop codes {encoding[None]:.2f} s, with 4 weight bins "
          f"{encoding[4]:.2f} s ({encoding[4] / encoding[None]:.2f}x); load {load():.1f}")
    # warm-up: a graph large enough to take the same kernels (small ones run other variants)
    model_step(make_graph(max(args.nodes // 8, 256), args.degree), args.max_distance,
               args.d_model, args.nhead)
    reset_peak()
    rss_before = resident_mib("VmRSS")
    tracemalloc.start()
    seconds, cpu_seconds, batch = model_step(adjacency, args.max_distance, args.d_model, args.nhead)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    rss_growth = resident_mib("VmHWM") - rss_before
    dense = 4 * args.nhead * args.nodes ** 2 / 2**20
    print(f"GraphModel step, N {args.nodes}, d_model "
          f"{args.d_model}, {args.nhead} heads, 1 layer: {seconds:.1f} s ({cpu_seconds:.1f} "
          f"CPU s) forward + backward; "
          f"peak NumPy allocations {peak / 2**20:.0f} MiB (pair codes "
          f"{batch.structure.pair_codes.nbytes / 2**20:.0f} MiB), peak RSS growth "
          f"{rss_growth:.0f} MiB; a dense float32 bias would be {dense:.0f} MiB "
          f"(and its gradient as much); load {load():.1f}")


if __name__ == "__main__":
    main()
