"""Where a first run's seconds go: every Numba compilation of a job run with an empty cache.

Runs a job in a child process whose ``NUMBA_CACHE_DIR`` is a new, empty folder, records each
compilation Numba makes (its ``numba:compile`` events fire on cache misses only), and prints:

* the job's wall time, the time spent compiling (each compilation's own time, its callees'
  compilations subtracted) and importing CUDA modules;
* per kernel family (the module that defines the kernel), per kernel and per signature;
* the kernels compiled twice from one function (the parallel and the ``_serial`` copy of
  :mod:`seqattn.kernels.cpu.threads`), the float64 signatures, the kernels written in LLVM IR
  (modules that use :mod:`seqattn.kernels.cpu.llvm_vectors`) and the CUDA modules imported;
* then the same job once more on the now-filled cache: warm wall time and compilations (0 when
  the cache serves everything).

Every compilation happens in the job's process (``SEQATTN_COMPILE_HELPER=0``) unless
``--helper`` lets the first run hand work to the helper process of seqattn.compile (the tiled
attention backward, the versions of sized kernels that launches miss); the warm run then starts
once the helper has ended, and the report says how long it went on after the cold run. The
helper's compilations are recorded too (a ``sitecustomize`` module on the helper's import path
registers the same recorder there), and both processes' outermost compilations are listed on
one timeline from the job's start: which of them waits for the other, and what both compile.

    python benchmarks/compile_profile.py                       # a small fit (TokenModel)
    python benchmarks/compile_profile.py --top 40
    python benchmarks/compile_profile.py --script examples/advection_forecast.py --quick
    python benchmarks/compile_profile.py --json profile.json   # the raw records too

The child inherits the environment (set ``NUMBA_NUM_THREADS`` there). Timings on a shared
machine are noisy: compare the shares within one run, and quote ``uptime`` with them.
"""
import argparse
import collections
import glob
import json
import os
import platform
import subprocess
import sys
import tempfile
import time

FIT = """
import numpy as np
from seqattn.models import TokenModel, TokenModelConfig
from seqattn.train import AdamW, MSELoss, fit

rng = np.random.default_rng(0)
x = rng.standard_normal((64, 48, 8)).astype(np.float32)
y = x[..., :2] * 0.5
model = TokenModel(TokenModelConfig(in_features=8, out_features=2, d_model=32, nhead=4,
                                    num_layers=2, dim_feedforward=64, max_len=48))
fit(model, MSELoss(), AdamW(model, lr=1e-3), [(x[i:i + 16], y[i:i + 16]) for i in range(0, 64, 16)],
    epochs=2, progress=False)
"""

# Records every compilation of the process that runs it into ``records`` (times from ``start``,
# time.time() of the job's start): the job's child runs it, and so does the helper process.
RECORDER = r"""
import time
from numba.core import event

records, stack = [], []

class Recorder(event.Listener):
    def on_start(self, ev):
        stack.append((time.time(), 0.0))

    def on_end(self, ev):
        began, callees = stack.pop()
        took = time.time() - began
        if stack:
            stack[-1] = (stack[-1][0], stack[-1][1] + took)
        dispatcher = ev.data["dispatcher"]
        func = dispatcher.py_func
        records.append(dict(
            module=func.__module__, name=func.__qualname__,
            signature=", ".join(str(a) for a in ev.data["args"]),
            parallel=bool(dispatcher.targetoptions.get("parallel")),
            cuda=type(dispatcher).__module__.startswith("numba.cuda"),
            own=took - callees, total=took, depth=len(stack), at=began - start))

event.register("numba:compile", Recorder())
"""

# The helper's sitecustomize: in a process serving first-run requests (seqattn.compile --serve),
# the recorder, whose records are written at exit to $SEQATTN_PROFILE_HELPER/<pid>.json.
HELPER_SITE = r"""
import os, sys
if "--serve" in sys.argv and os.environ.get("SEQATTN_PROFILE_HELPER"):
    import atexit, json
    start = float(os.environ["SEQATTN_PROFILE_START"])
    exec(RECORDER)
    def _write():
        path = os.path.join(os.environ["SEQATTN_PROFILE_HELPER"], f"{os.getpid()}.json")
        with open(path + ".part", "w") as f:
            json.dump(records, f)
        os.replace(path + ".part", path)  # read whole or not at all
    atexit.register(_write)
"""

# Runs in the child: records compilations, runs the job, writes the records as JSON.
CHILD = r"""
import json, os, runpy, sys, time
start = time.time()
os.environ["SEQATTN_PROFILE_START"] = repr(start)  # the helper's times count from here too
exec(RECORDER)
job, output, argv = sys.argv[1], sys.argv[2], sys.argv[3:]
if job == "-":
    exec(compile(FIT, "<fit>", "exec"), {"__name__": "__main__"})
else:
    sys.argv = [job] + argv
    runpy.run_path(job, run_name="__main__")
wall = time.time() - start
cuda = sorted(m for m in sys.modules if "cuda" in m.split(".")[-1] or m.startswith("numba.cuda"))
with open(output, "w") as f:
    json.dump(dict(wall=wall, records=records, cuda_modules=cuda), f)
"""


def run_child(job, argv, cache_dir, output, helper, helper_records=None):
    """Run the job in a child process; with ``helper_records`` (a folder), the helper process
    that it starts records its compilations there."""
    env = dict(os.environ, NUMBA_CACHE_DIR=cache_dir, SEQATTN_COMPILE_HELPER=str(int(helper)))
    if helper_records is not None:
        with open(os.path.join(helper_records, "sitecustomize.py"), "w") as f:
            f.write("RECORDER = " + repr(RECORDER) + "\n" + HELPER_SITE)
        env["PYTHONPATH"] = os.pathsep.join(
            [helper_records] + [p for p in [os.environ.get("PYTHONPATH")] if p])
        env["SEQATTN_PROFILE_HELPER"] = helper_records
    code = "FIT = " + repr(FIT) + "\nRECORDER = " + repr(RECORDER) + "\n" + CHILD
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", code, job, output, *argv], env=env, check=True,
                   stdout=subprocess.DEVNULL)
    elapsed = time.perf_counter() - started
    with open(output) as f:
        result = json.load(f)
    result["process"] = elapsed
    return result


def wait_for_helper(cache, records=None):
    """Seconds until the helper process that serves ``cache`` has ended (its lock is gone) and,
    with ``records``, has written its records there (at its exit, after the lock)."""
    started = time.perf_counter()
    while glob.glob(os.path.join(cache, "*", "seqattn-compile-helper.lock")):
        time.sleep(0.2)
    helped = glob.glob(os.path.join(cache, "*", "seqattn-compile-helper-requests"))
    while records and helped and not glob.glob(os.path.join(records, "*.json")) \
            and time.perf_counter() - started < 600:
        time.sleep(0.2)
    return time.perf_counter() - started


def helper_records(folder):
    """The compilations that helper processes recorded in ``folder`` (wait_for_helper first)."""
    records = []
    for path in glob.glob(os.path.join(folder, "*.json")):
        with open(path) as f:
            records += json.load(f)
    return records


def timeline(cold, top):
    """Both processes' outermost compilations in the order they started (seconds from the
    job's start): where the run's chain of compilations waits for the helper's."""
    rows = [("job", r) for r in cold["records"] if r["depth"] == 0]
    rows += [("helper", r) for r in cold["helper_records"] if r["depth"] == 0]
    rows.sort(key=lambda row: row[1]["at"])
    print(f"\ntimeline of both processes' outermost compilations (P = parallel; the job ended "
          f"at {cold['wall']:.1f} s):")
    table([[f"{family(r['module'])}.{r['name']}", who, f"{r['at']:.1f}",
            f"{r['at'] + r['total']:.1f}", "P" if r["parallel"] else ""] for who, r in rows[:top]],
          ["kernel", "process", "from", "to", ""])


def ir_kernel_modules():
    """Modules whose kernels are written in LLVM IR: those importing llvm_vectors (read from
    the sources beside this script: run from the repository's root, ``benchmarks/`` and not
    the root is on the import path)."""
    root = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "seqattn",
                        "kernels", "cpu")
    found = set()
    for folder, _, files in os.walk(root):
        for name in files:
            if name.endswith(".py") and name != "llvm_vectors.py":
                with open(os.path.join(folder, name)) as f:
                    if "llvm_vectors" in f.read():
                        relative = os.path.relpath(os.path.join(folder, name[:-3]), root)
                        found.add("seqattn.kernels.cpu." + relative.replace(os.sep, "."))
    return found


def family(module):
    return module.removeprefix("seqattn.kernels.")


def twin_name(name):
    return name.removesuffix("_serial")


def table(rows, header):
    widths = [max(len(str(r[i])) for r in rows + [header]) for i in range(len(header))]
    line = lambda r: "  ".join(str(c).rjust(w) if i else str(c).ljust(w)
                               for i, (c, w) in enumerate(zip(r, widths)))
    print(line(header))
    for r in rows:
        print(line(r))


def report(cold, warm, top):
    records = cold["records"]
    ours = [r for r in records if r["module"].startswith("seqattn")]
    compiling = sum(r["own"] for r in records)
    print(f"cold: {cold['process']:.1f} s (process), {len(records)} compilations "
          f"({len(ours)} of seqattn functions) taking {compiling:.1f} s "
          f"({100 * compiling / cold['process']:.0f} %); the first at "
          f"{min((r['at'] for r in records), default=0):.1f} s")
    if cold["helper_after"] > 0.5:
        print(f"the helper process went on {cold['helper_after']:.1f} s after the cold run")
    helper = cold.get("helper_records", [])
    if helper:
        during = [r for r in helper if r["at"] < cold["wall"]]
        print(f"the helper: {len(helper)} compilations ({len(during)} during the run, "
              f"{sum(r['own'] for r in during):.1f} s of them; "
              f"{sum(r['module'].startswith('seqattn') for r in helper)} of seqattn functions)")
    print(f"warm: {warm['process']:.1f} s (process), {len(warm['records'])} compilations; "
          f"cold/warm {cold['process'] / warm['process']:.2f}")

    print("\nper kernel family (seconds of own compile time, compilations, signatures):")
    families = collections.defaultdict(lambda: [0.0, 0, set()])
    for r in records:
        f = families[family(r["module"])]
        f[0] += r["own"]
        f[1] += 1
        f[2].add((r["name"], r["signature"]))
    rows = sorted(([name, f"{t:.1f}", n, len(s)] for name, (t, n, s) in families.items()),
                  key=lambda row: -float(row[1]))
    table(rows, ["family", "s", "compiles", "sigs"])

    print("\nkernels launched from Python (each with what it compiled inside it: inclusive s):")
    outer = sorted((r for r in records if r["depth"] == 0), key=lambda r: -r["total"])
    table([[f"{family(r['module'])}.{r['name']}", f"{r['total']:.1f}", f"{r['at']:.0f}"]
           for r in outer[:top]], ["kernel", "s", "at s"])

    print(f"\ntop {top} compilations (own seconds; P = parallel):")
    rows = sorted(records, key=lambda r: -r["own"])[:top]
    table([[f"{family(r['module'])}.{r['name']}", f"{r['own']:.2f}", "P" if r["parallel"] else "",
            r["signature"][:70]] for r in rows], ["kernel", "s", "", "signature"])

    by_name = collections.defaultdict(list)
    for r in records:
        by_name[(r["module"], twin_name(r["name"]))].append(r)
    twins = {k: v for k, v in by_name.items()
             if any(r["parallel"] for r in v) and any(r["name"].endswith("_serial") for r in v)}
    serial = sum(r["own"] for v in twins.values() for r in v if r["name"].endswith("_serial"))
    parallel = sum(r["own"] for v in twins.values() for r in v if r["parallel"])
    print(f"\nserial/parallel twins: {len(twins)} kernels compiled both ways: "
          f"parallel copies {parallel:.1f} s, serial copies {serial:.1f} s")
    only = collections.Counter("parallel only" if r["parallel"] else "serial or helper"
                               for v in by_name.values() for r in v)
    print(f"  compilations: {dict(only)}")

    multi = {k: v for k, v in by_name.items() if len({r['signature'] for r in v}) > 1}
    print(f"\nkernels compiled for more than one signature: {len(multi)}")
    by_time = sorted(multi.items(), key=lambda kv: -sum(r["own"] for r in kv[1]))
    for (module, name), v in by_time[:top]:
        sigs = collections.Counter(r["signature"] for r in v)
        print(f"  {family(module)}.{name}: {len(sigs)} signatures, "
              f"{sum(r['own'] for r in v):.1f} s")

    f64 = [r for r in records if "array(float64" in r["signature"]]
    print(f"\nfloat64 array signatures: {len(f64)} compilations, "
          f"{sum(r['own'] for r in f64):.1f} s")
    for r in sorted(f64, key=lambda r: -r["own"])[:10]:
        print(f"  {family(r['module'])}.{r['name']} {r['own']:.2f} s: {r['signature'][:80]}")

    ir = ir_kernel_modules()
    in_ir = [r for r in records if r["module"] in ir]
    print(f"\nkernels in LLVM IR modules ({', '.join(sorted(family(m) for m in ir))}): "
          f"{len(in_ir)} compilations, {sum(r['own'] for r in in_ir):.1f} s")
    on_cuda = [r for r in records if r["cuda"] or ".cuda." in r["module"]]
    print(f"CUDA compilations: {len(on_cuda)}; CUDA modules imported: "
          f"{len(cold['cuda_modules'])} {cold['cuda_modules'][:8]}")
    if cold.get("helper_records"):
        timeline(cold, max(top, 40))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--script", help="a Python script to run instead of the small fit")
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--json", help="write the cold run's records to this file")
    parser.add_argument("--helper", action="store_true",
                        help="let the first run hand work to the helper process "
                             "(seqattn.compile.start_helper; its compilations are recorded "
                             "and shown on a timeline with the job's)")
    args, script_argv = parser.parse_known_args()
    job = args.script or "-"
    print(f"{platform.processor() or platform.machine()}; uptime: "
          f"{open('/proc/loadavg').read().split()[:3]}; NUMBA_NUM_THREADS="
          f"{os.environ.get('NUMBA_NUM_THREADS', 'default')}; job: {args.script or 'small fit'} "
          f"{' '.join(script_argv)}")
    with tempfile.TemporaryDirectory(prefix="seqattn-cold-") as folder:
        cache = os.path.join(folder, "cache")
        os.mkdir(cache)
        output = os.path.join(folder, "records.json")
        records = os.path.join(folder, "helper")
        os.mkdir(records)
        cold = run_child(job, script_argv, cache, output, args.helper,
                         records if args.helper else None)
        cold["helper_after"] = wait_for_helper(cache, records if args.helper else None)
        cold["helper_records"] = helper_records(records)
        warm = run_child(job, script_argv, cache, output, args.helper)
    if args.json:  # before the report, so that the records outlive a failure in it
        with open(args.json, "w") as f:
            json.dump(dict(cold=cold, warm=warm), f)
    report(cold, warm, args.top)
    print(f"uptime after: {open('/proc/loadavg').read().split()[:3]}")


if __name__ == "__main__":
    main()
