"""Every CUDA kernel seqattn launches, with every argument signature it launches it with,
compiled by the real numba-cuda compiler (no GPU needed), with ptxas's register and spill count.

numba.cuda is either the simulator or the real compiler for the life of a process, so this runs
as two commands, each in a process of its own:

    NUMBA_ENABLE_CUDASIM=1 python tests/helpers/cuda_kernel_census.py census LAUNCHES.pkl
    NUMBA_ENABLE_CUDASIM=0 python tests/helpers/cuda_kernel_census.py compile LAUNCHES.pkl REPORT.json \
        --cc 9.0 --representative-cc 8.0

``census`` runs :func:`workload` (every case of tests/helpers/op_cases.py through ``seqattn.ops`` on the
simulator, in float32 and float64, and attention with every option and at every head-dim
variant) and records each launch: where its kernel comes from (a module attribute, or a cached
kernel factory and the arguments it was called with) and the numba types of its arguments. It
fails if a ``@cuda.jit`` kernel found in the source of ``seqattn/kernels/cuda`` was never
launched, or a kernel with float arrays was not launched in both float32 and float64, so no
kernel can be silently left out. ``compile`` rebuilds each kernel from where it came from,
compiles it for every recorded signature with numba-cuda's compiler and the kernel's own options
(fastmath, launch bounds) for each ``--cc``, and for each ``--representative-cc`` one signature per
kernel only (a float32 one where there is one): numba types and lowers a kernel once per
signature, the slow part; each further compute capability costs NVVM and ptxas again, which for
every signature would add about a quarter to the run for little news (the kernel bodies are the
same, and each of them is compiled for it). Then ptxas runs on each PTX.
"""
import argparse
import ast
import collections
import concurrent.futures
import importlib
import json
import os
import pathlib
import pickle
import re
import subprocess
import sys
import tempfile

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent.parent
KERNEL_PACKAGE = "seqattn.kernels.cuda"
KERNEL_DIR = ROOT / "seqattn" / "kernels" / "cuda"
FLOATS = ("float32", "float64")

Launch = collections.namedtuple("Launch", "kernel locator argtypes")


# --- which kernels the source defines ------------------------------------------------------

def _is_kernel_decorator(node):
    """True for ``@cuda.jit`` / ``@cuda.jit(...)`` without ``device=True``."""
    call = node if isinstance(node, ast.Call) else None
    target = call.func if call else node
    if not (isinstance(target, ast.Attribute) and target.attr == "jit"
            and isinstance(target.value, ast.Name) and target.value.id == "cuda"):
        return False
    return not any(k.arg == "device" and isinstance(k.value, ast.Constant) and k.value.value
                   for k in (call.keywords if call else ()))


def kernels_in_source():
    """{(module, function name)} of every @cuda.jit kernel, nested ones in factories too."""
    found = set()
    for path in sorted(KERNEL_DIR.glob("*.py")):
        module = f"{KERNEL_PACKAGE}.{path.stem}"
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef) and any(map(_is_kernel_decorator,
                                                             node.decorator_list)):
                found.add((module, node.name))
    return found


def kernel_modules():
    """The modules that define kernels (others, like the memory pool, may need a real GPU)."""
    return sorted({module for module, _ in kernels_in_source()})


# --- census: the simulator records every launch --------------------------------------------

class _Recorder:
    """Patches the simulator so that every kernel launch is recorded with its argument types."""

    def __init__(self):
        from numba.cuda.simulator.kernel import FakeCUDAKernel

        self.kernel_type = FakeCUDAKernel
        self.locators = {}  # id(kernel) -> locator
        self.kernels = {}  # id(kernel) -> kernel, keeps ids valid
        self.launches = []
        self.unlocated = set()

    def _register(self, kernel, locator):
        if isinstance(kernel, self.kernel_type) and not kernel._device:
            self.locators.setdefault(id(kernel), locator)
            self.kernels[id(kernel)] = kernel

    def _wrap_factory(self, module, name, factory):
        def recording_factory(*args, **kwargs):
            made = factory(*args, **kwargs)
            items = enumerate(made) if isinstance(made, tuple) else [(None, made)]
            for index, item in items:
                self._register(item, ("factory", module.__name__, name, args,
                                      tuple(sorted(kwargs.items())), index))
            return made
        return recording_factory

    def install(self):
        for module_name in kernel_modules():
            module = importlib.import_module(module_name)
            for name, value in list(vars(module).items()):
                if isinstance(value, self.kernel_type):
                    self._register(value, ("attribute", module_name, name))
                elif callable(value) and hasattr(value, "cache_info") \
                        and getattr(value, "__module__", None) == module_name:
                    setattr(module, name, self._wrap_factory(module, name, value))
        recorder, launch = self, self.kernel_type.__call__

        def recording_call(kernel, *args):
            if not kernel._device:
                recorder._record(kernel, args)
            return launch(kernel, *args)

        self.kernel_type.__call__ = recording_call

    def _record(self, kernel, args):
        name = f"{kernel.fn.__module__}.{kernel.fn.__name__}"
        locator = self.locators.get(id(kernel))
        if locator is None:
            self.unlocated.add(name)
            return
        self.launches.append(Launch((kernel.fn.__module__, kernel.fn.__name__), locator,
                                    tuple(_numba_type(a) for a in args)))


def _numba_type(value):
    """The type numba's real dispatcher gives this launch argument (a device array's type is
    that of the host array it mirrors)."""
    import numba

    if getattr(value, "__cuda_ndarray__", False):  # the simulator's device array
        value = value._ary
    return numba.typeof(value, numba.core.typing.typeof.Purpose.argument)


def _on_device(x):
    from numba import cuda

    return cuda.to_device(x) if isinstance(x, np.ndarray) else x


def _cast(inputs, names, dtype):
    return {k: _on_device(v.astype(dtype) if k in names else v) for k, v in inputs.items()}


def _table_ops(dtype):
    """Every case of the op table (layers, arithmetic, losses, pooling, optimizers), forward
    and backward, in ``dtype``."""
    from op_cases import CASES
    from ops_checks import _dout, _inputs

    for case in CASES:
        inputs = _inputs(case)
        dout = _dout(case, inputs).astype(dtype)
        device_inputs = _cast(inputs, case.float_inputs, dtype)
        case.forward(**device_inputs)
        if case.backward is not None:
            case.backward(_on_device(dout), **device_inputs)


ATTENTION_KINDS = ("forward", "weights", "backward", "backward_keys", "backward_dq", "dbias")


def attention_head_dims(dtype):
    """{D: the kernel kinds whose tiles fit at D}, one D for each distinct combination of the
    kinds' tile plans (each plan is a compiled variant; the forward pads D to other widths than
    the backward kernels), as long as at least the forward supports it. Reads the CUDA attention
    module's tile planning (``_plan``, ``LARGEST_HEAD_TILE``): a change there must be followed
    here."""
    from seqattn.kernels.cuda import attention

    dims = {}
    for D in range(1, attention.LARGEST_HEAD_TILE + 1):
        plans = {}
        for kind in ATTENTION_KINDS:
            try:
                plans[kind] = attention._plan(kind, np.dtype(dtype).name, D)
            except ValueError:
                pass
        if "forward" in plans:
            dims.setdefault(tuple(sorted(plans.items())), (D, set(plans)))
    return dict(dims.values())


# One head of 3 tokens: each attention kernel runs one block on the simulator (its cost), and
# the argument types, not the sizes, make the signatures.
HEADS = 1


def _attention(dtype, D, options, kinds=ATTENTION_KINDS):
    """The attention ops whose kernels ``kinds`` name, at head dim D."""
    import seqattn

    rng = np.random.default_rng(D)
    q, k, v = (_on_device(rng.normal(size=(1, HEADS, 3, D)).astype(dtype)) for _ in range(3))
    options = {n: _on_device(x) if isinstance(x, np.ndarray) else x
               for n, x in options.items()}
    out, lse = seqattn.attention(q, k, v, return_lse=True, **options)
    dout = _on_device(rng.normal(size=(1, HEADS, 3, D)).astype(dtype))
    bias_grad = "bias" in options and "dbias" in kinds
    # deterministic=True runs the kinds backward_keys and backward_dq; False runs backward.
    for deterministic, needs in ((True, {"backward_keys", "backward_dq"}), (False, {"backward"})):
        if needs <= set(kinds):
            seqattn.attention_backward(dout, q, k, v, out, lse, bias_requires_grad=bias_grad,
                                       deterministic=deterministic, **options)
            bias_grad = False  # once is enough
    if "weights" in kinds:
        seqattn.attention_weights(q, k, **options)


def _structured_biases(dtype):
    """Attention with each structured bias: distances (typed, periodic, cut off) and pair
    codes of every integer dtype the op accepts, and the relative-position form."""
    from seqattn.ops import DistanceBias, PairBias

    rng = np.random.default_rng(5)
    x = _on_device(rng.uniform(0, 2, (1, 3, 3)).astype(dtype))
    table = _on_device(rng.normal(size=(2, 2, HEADS, 4)).astype(dtype))
    types = _on_device(np.array([[0, 1, 1]], np.int32))
    cell = _on_device((2.5 * np.eye(3)).astype(dtype))
    distance = DistanceBias(x=x, table=table, r_max=2.0, types=types, cell=cell, cutoff=1.8,
                            smooth_cutoff=True)
    _attention(dtype, 4, {"distance_bias": distance})
    pair_table = _on_device(rng.normal(size=(HEADS, 5)).astype(dtype))
    for code_dtype in (np.int8, np.int16, np.int32):
        codes = _on_device(rng.integers(-1, 5, (1, 3, 3)).astype(code_dtype))
        _attention(dtype, 4, {"pair_bias": PairBias(pair_table, codes)})
    _attention(dtype, 4, {"pair_bias": PairBias.relative(pair_table)})


def _attention_ops(dtype):
    """Attention forward, backward, bias gradient and weights: every option at one head dim,
    and every head-dim variant once, with the kernels that support it."""
    bias = np.zeros((1, HEADS, 3, 3), dtype)
    everything = dict(causal=True, bias=bias, attn_mask=np.ones((3, 3), bool),
                      key_padding_mask=np.zeros((1, 3), bool),
                      alibi_slopes=np.ones(HEADS, dtype), window=(2, 0))
    _attention(dtype, 4, everything)
    _structured_biases(dtype)
    for D, kinds in attention_head_dims(dtype).items():
        _attention(dtype, D, {"bias": bias}, kinds)


def workload():
    for dtype in FLOATS:
        _table_ops(dtype)
        _attention_ops(dtype)


def census():
    """The launches of :func:`workload`, or an AssertionError naming what it did not cover."""
    sys.path.insert(0, str(HERE))
    import simulator_setup  # the kernels run as the tests run them

    simulator_setup.prepare()
    recorder = _Recorder()
    recorder.install()
    workload()
    assert not recorder.unlocated, (
        f"kernels launched but not found as a module attribute or from a functools.lru_cache "
        f"factory in {KERNEL_PACKAGE}: {sorted(recorder.unlocated)}")
    launched = {launch.kernel for launch in recorder.launches}
    never = kernels_in_source() - launched
    assert not never, (f"@cuda.jit kernels never launched by tests/helpers/cuda_kernel_census.py's "
                       f"workload (add op calls that launch them): {sorted(never)}")
    dtypes = collections.defaultdict(set)
    for launch in recorder.launches:
        dtypes[launch.kernel] |= {str(t.dtype) for t in launch.argtypes
                                  if hasattr(t, "dtype") and str(t.dtype) in FLOATS}
    one_dtype = sorted(k for k, seen in dtypes.items() if seen and seen != set(FLOATS))
    assert not one_dtype, f"kernels launched in only one of {FLOATS}: {one_dtype}"
    return recorder.launches


# --- compile: the real compiler, no GPU ----------------------------------------------------

def _resolve(locator):
    """The real dispatcher a census locator names."""
    module = importlib.import_module(locator[1])
    if locator[0] == "attribute":
        return getattr(module, locator[2])
    _, _, factory, args, kwargs, index = locator
    made = getattr(module, factory)(*args, **dict(kwargs))
    return made if index is None else made[index]


_COMPILE_OPTIONS = ("fastmath", "launch_bounds", "lineinfo", "debug", "opt")

_PTXAS_USAGE = {
    "registers": r"Used (\d+) registers",
    "spill_stores": r"(\d+) bytes spill stores",
    "spill_loads": r"(\d+) bytes spill loads",
    "stack_bytes": r"(\d+) bytes stack frame",
    "shared_bytes": r"(\d+) bytes smem",
}


def ptxas_usage(ptx, cc):
    """Registers, spills, stack and shared memory of the one kernel in ``ptx``, from ptxas -v."""
    from cuda.pathfinder import find_nvidia_binary_utility

    ptxas = find_nvidia_binary_utility("ptxas")
    if ptxas is None:
        raise RuntimeError("ptxas not found: pip install nvidia-cuda-nvcc")
    with tempfile.NamedTemporaryFile("w", suffix=".ptx") as f:
        f.write(ptx)
        f.flush()
        result = subprocess.run([ptxas, f"-arch=sm_{cc[0]}{cc[1]}", "-v", "-o", os.devnull,
                                 f.name], capture_output=True, text=True)
    if result.returncode:
        raise RuntimeError(f"ptxas failed: {result.stderr[-2000:]}")
    usage = {}
    for key, pattern in _PTXAS_USAGE.items():
        found = re.search(pattern, result.stderr)
        usage[key] = int(found.group(1)) if found else 0
    return usage


class _DeviceToCompileFor:
    """Stands in for the GPU whose compute capability numba reads when it compiles a device
    function called by a kernel (the kernel itself is compiled for the capabilities asked)."""

    def __init__(self, cc):
        self.compute_capability = cc


def _compile_without_gpu(cc):
    """Process initialiser: device functions compile for ``cc`` instead of asking a GPU."""
    from numba.cuda import dispatcher

    dispatcher.get_current_device = lambda: _DeviceToCompileFor(cc)


def _kernel_ptx(dispatcher, argtypes, ccs):
    """{cc: PTX} of one kernel: numba types and lowers it once, NVVM generates code per cc."""
    from numba.cuda import compiler

    options = {k: v for k, v in dispatcher.targetoptions.items() if k in _COMPILE_OPTIONS}
    library, _ = compiler._compile_pyfunc_with_fixup(dispatcher.py_func, argtypes, device=False,
                                                     abi="numba", cc=ccs[0], **options)
    return {cc: library.get_asm_str(cc=cc) for cc in ccs}


# libdevice's float32 sine, cosine and tangent reduce an argument beyond about 1e5 (never the
# case for the cosine cutoff envelope, whose argument is below pi / 2) on a slow path that
# converts a 64-bit integer product to float64 and scales it by pi/2 * 2**-64, this constant.
_TRIG_REDUCTION_SCALE = "0d3BF921FB54442D19"
_TRIG_REDUCTION_STEPS = ("cvt.rn.f64.s64", "mul.f64", "cvt.rn.f32.f64")
# A floating-point atomic add (``red`` where the old value is unused): its sum depends on the
# order the adds land in.
_FLOAT_ATOMIC = re.compile(r"\b(atom|red)(\.\w+)*\.add(\.\w+)*\.f(16|32|64)\b")


def float_atomic_instructions(ptx):
    """The floating-point atomic adds of ``ptx``."""
    return [line.strip() for line in ptx.splitlines() if _FLOAT_ATOMIC.search(line)]


def float64_instructions(ptx):
    """The float64 instructions of ``ptx`` (declarations aside), less libdevice's trigonometric
    slow-path argument reduction (three instructions each time it is inlined)."""
    found = [line.strip() for line in ptx.splitlines()
             if re.search(r"\.f64\b", line) and not line.strip().startswith(".reg")]
    reductions = sum(_TRIG_REDUCTION_SCALE in line for line in found)
    for step in _TRIG_REDUCTION_STEPS:
        for _ in range(reductions):
            found.remove(next(line for line in found if line.startswith(step)))
    return found


def compile_one(launch, ccs):
    """Reports for one (kernel, signature), one per compute capability: usage, or the error."""
    name = ".".join(launch.kernel)
    signature = ", ".join(str(t) for t in launch.argtypes)
    # A factory's arguments tell its variants apart (the backward with and without dq, say).
    variant = [a if isinstance(a, (str, int, float)) else repr(a)  # as JSON keeps them
               for a in (launch.locator[3] if launch.locator[0] == "factory" else ())]
    reports = [{"kernel": name, "signature": signature, "cc": f"{cc[0]}.{cc[1]}",
                "factory_args": variant} for cc in ccs]
    try:
        ptx = _kernel_ptx(_resolve(launch.locator), launch.argtypes, ccs)
        for report, cc in zip(reports, ccs):
            report.update(ptxas_usage(ptx[cc], cc))
            report["float64_instructions"] = len(float64_instructions(ptx[cc]))
            report["float_atomics"] = len(float_atomic_instructions(ptx[cc]))
            report["float64_in_float32"] = ("float64" not in signature
                                            and report["float64_instructions"] > 0)
    except Exception as error:  # every failure is reported, none stops the others
        for report in reports:
            report["error"] = f"{type(error).__name__}: {error}"[:4000]
    return reports


def _is_float32(launch):
    return any(str(getattr(t, "dtype", "")) == "float32" for t in launch.argtypes)


def compile_all(launches, ccs, representative_ccs, workers):
    """Compile every distinct (kernel, signature) of the census for each of ``ccs``, and one
    signature of each kernel (float32 where it has one) also for each of
    ``representative_ccs``."""
    unique = list({(launch.kernel, launch.locator, launch.argtypes): launch
                   for launch in launches}.values())
    representative = {}
    for launch in sorted(unique, key=lambda launch: not _is_float32(launch)):
        representative.setdefault(launch.kernel, launch)
    chosen = {id(launch) for launch in representative.values()}
    # The slowest first (attention's tile kernels), so that no worker is left with one at the end.
    unique.sort(key=lambda launch: launch.locator[0] != "factory")
    ccs_each = [list(ccs) + (list(representative_ccs) if id(launch) in chosen else [])
                for launch in unique]
    with concurrent.futures.ProcessPoolExecutor(
            max_workers=workers, initializer=_compile_without_gpu, initargs=(ccs[0],)) as pool:
        return [r for reports in pool.map(compile_one, unique, ccs_each) for r in reports]


def format_report(reports):
    lines = [f"{'kernel':58} {'cc':>4} {'regs':>5} {'spill':>6} {'smem':>6}  signature"]
    for r in sorted(reports, key=lambda r: (r["kernel"], r["cc"], r["signature"])):
        if "error" in r:
            lines.append(f"{r['kernel']:58} {r['cc']:>4}  FAILED  {r['error'][:200]}")
            continue
        spill = r["spill_stores"] + r["spill_loads"]
        lines.append(f"{r['kernel']:58} {r['cc']:>4} {r['registers']:>5} {spill:>6} "
                     f"{r['shared_bytes']:>6}  {r['signature'][:120]}")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("census")
    run.add_argument("launches")
    build = commands.add_parser("compile")
    build.add_argument("launches")
    build.add_argument("report")
    build.add_argument("--cc", action="append", default=None,
                       help="for every signature, e.g. 9.0 (repeatable)")
    build.add_argument("--representative-cc", action="append", default=[],
                       help="for one signature per kernel, e.g. 8.0 (repeatable)")
    build.add_argument("--workers", type=int, default=os.cpu_count())
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    if args.command == "census":
        with open(args.launches, "wb") as f:
            pickle.dump(census(), f)
        return 0
    with open(args.launches, "rb") as f:
        launches = pickle.load(f)
    ccs, representative_ccs = ([tuple(int(p) for p in cc.split(".")) for cc in names]
                               for names in (args.cc or ["9.0"], args.representative_cc))
    reports = compile_all(launches, ccs, representative_ccs, args.workers)
    with open(args.report, "w") as f:
        json.dump(reports, f, indent=1)
    print(format_report(reports))
    return 1 if any("error" in r for r in reports) else 0


if __name__ == "__main__":
    sys.exit(main())
