"""Benchmark the xarray adapters against xbatcher's BatchGenerator.

1. Speed: patches per second turning a (time, lat, lon) Dataset of two variables into (B, N, F)
   token arrays of 4 x 4 patches over 32 x 32 windows. seqattn's GridAdapter.batches (fitted
   with normalize=False, so that its tokens are the data's values, as xbatcher's) against xbatcher.BatchGenerator with the same input_dims/batch_dims followed by the same
   NumPy patching (xbatcher stops at Datasets, so the patching is added to compare like with like).
   Median of several passes; the ratio is printed.
2. Memory: peak resident memory, above the process's footprint before iterating, while iterating a
   zarr dataset several times larger than a memory allowance (each run in a fresh process, so
   the peak, VmHWM, is that run's own).

Run:  python benchmarks/adapters.py [--repeats 5] [--zarr-mb 320 --allowance-mb 80]
Needs the bench extras (xbatcher, psutil) and zarr.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import xarray as xr

VARIABLES = ["t", "u"]
WINDOW = {"lat": 32, "lon": 32}
PATCH = 4
TIME_BLOCK = 16


def make_dataset(time_steps, lat=64, lon=128, seed=0):
    rng = np.random.default_rng(seed)
    shape = (time_steps, lat, lon)
    return xr.Dataset(
        {v: (("time", "lat", "lon"), rng.normal(size=shape).astype("float32")) for v in VARIABLES},
        coords={"time": np.arange(time_steps), "lat": np.linspace(-90, 90, lat),
                "lon": np.arange(lon) * (360.0 / lon)})


def patchify(arrays):
    """(B, lat, lon) per variable -> (B, N, F) tokens of PATCH x PATCH patches, as the adapter."""
    stacked = np.stack(arrays, axis=-1)                      # (B, lat, lon, V)
    b, ny, nx, v = stacked.shape
    tiles = stacked.reshape(b, ny // PATCH, PATCH, nx // PATCH, PATCH, v)
    return np.ascontiguousarray(tiles.transpose(0, 1, 3, 5, 2, 4)).reshape(
        b, (ny // PATCH) * (nx // PATCH), -1)


def seqattn_batches(ds, shuffle=False):
    from seqattn.adapters import GridAdapter

    adapter = GridAdapter(VARIABLES, {"lat": PATCH, "lon": PATCH}, validity_channel=False,
                          normalize=False).fit(ds)
    batches = adapter.batches(ds, input_dims=WINDOW, batch_dims={"time": TIME_BLOCK},
                              batch_size=TIME_BLOCK, shuffle=shuffle, seed=0)
    for batch in batches:
        yield batch.tokens


def xbatcher_batches(ds):
    import xbatcher

    generator = xbatcher.BatchGenerator(ds, input_dims=WINDOW, batch_dims={"time": TIME_BLOCK})
    for window in generator:
        yield patchify([window[v].transpose("time", "lat", "lon").values for v in VARIABLES])


def patches_per_second(contenders, repeats):
    """Median patches/s of each contender; passes alternate between contenders so that load from
    other processes on a shared machine hits all of them alike."""
    rates = {name: [] for name in contenders}
    for _ in range(repeats):
        for name, batches in contenders.items():
            start = time.perf_counter()
            patches = sum(tokens.shape[0] * tokens.shape[1] for tokens in batches())
            rates[name].append(patches / (time.perf_counter() - start))
    return {name: statistics.median(r) for name, r in rates.items()}, patches


def speed(repeats):
    ds = make_dataset(256)
    ours_tokens = next(seqattn_batches(ds))
    theirs_tokens = next(xbatcher_batches(ds))
    # both produce the same tokens for the same window (a check that the comparison is fair)
    np.testing.assert_array_equal(ours_tokens[0], theirs_tokens[0])
    rates, n = patches_per_second({
        "seqattn BatchIterator": lambda: seqattn_batches(ds),
        "seqattn BatchIterator shuffled": lambda: seqattn_batches(ds, shuffle=True),
        "xbatcher BatchGenerator": lambda: xbatcher_batches(ds)}, repeats)
    print(f"speed: {n} patches of {PATCH}x{PATCH} over {WINDOW} windows per pass, "
          f"{TIME_BLOCK} samples per batch, median of {repeats} passes")
    for name, rate in rates.items():
        print(f"  {name:31s} {rate:12,.0f} patches/s")
    ratio = rates["seqattn BatchIterator"] / rates["xbatcher BatchGenerator"]
    print(f"  {'ratio seqattn / xbatcher':31s} {ratio:12.2f}x")


def high_water_mark():
    """Peak resident memory of this process in bytes. VmHWM belongs to the process's own address
    space, unlike ru_maxrss, which Linux carries over exec from the forked parent's image."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmHWM in /proc/self/status (Linux only)")


def memory_child(which, path, passes):
    """Iterate the zarr store `passes` times; print the peak memory above the starting point."""
    import psutil

    ds = xr.open_zarr(path)
    batches = {"seqattn": lambda: seqattn_batches(ds),
               "seqattn-shuffled": lambda: seqattn_batches(ds, shuffle=True),
               "xbatcher": lambda: xbatcher_batches(ds)}[which]
    next(batches())  # imports and first compilation happen before the baseline
    before = psutil.Process().memory_info().rss
    start = time.perf_counter()
    for _ in range(passes):
        for _ in batches():
            pass
    seconds = time.perf_counter() - start
    peak = high_water_mark()
    print(json.dumps({"peak_above_start": peak - before, "seconds": seconds}))


def memory(zarr_mb, allowance_mb, passes):
    steps = int(zarr_mb * 2**20 / (128 * 256 * 4 * len(VARIABLES)))
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "grid.zarr")
        ds = make_dataset(steps, lat=128, lon=256).chunk({"time": TIME_BLOCK})
        ds.to_zarr(path, mode="w")
        size = sum(ds[v].nbytes for v in VARIABLES)
        print(f"memory: zarr dataset {size / 2**20:.0f} MiB ({steps} x 128 x 256 x 2 float32, "
              f"chunks of {TIME_BLOCK} steps), allowance {allowance_mb} MiB "
              f"({size / 2**20 / allowance_mb:.1f}x smaller), {passes} passes each")
        for which in ("seqattn", "seqattn-shuffled", "xbatcher"):
            out = subprocess.run([sys.executable, __file__, "--memory-child", which, path,
                                  "--passes", str(passes)], capture_output=True, text=True,
                                 check=True)
            result = json.loads(out.stdout.strip().splitlines()[-1])
            peak = result["peak_above_start"] / 2**20
            verdict = "within" if peak <= allowance_mb else "OVER"
            print(f"  {which:17s} peak {peak:7.1f} MiB above start ({verdict} the allowance), "
                  f"{size * passes / 2**20 / result['seconds']:7.0f} MiB/s read")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--zarr-mb", type=float, default=320)
    parser.add_argument("--allowance-mb", type=float, default=80)
    parser.add_argument("--passes", type=int, default=2)
    parser.add_argument("--memory-child", nargs=2, metavar=("WHICH", "PATH"))
    args = parser.parse_args()
    if args.memory_child:
        memory_child(*args.memory_child, args.passes)
        return
    print(f"machine: {os.cpu_count()} CPUs, numpy {np.__version__}, xarray {xr.__version__}")
    speed(args.repeats)
    memory(args.zarr_mb, args.allowance_mb, args.passes)


if __name__ == "__main__":
    main()
