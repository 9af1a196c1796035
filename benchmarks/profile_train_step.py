"""Where a small model's training step spends its time: kernels, ops' checks and dispatch,
allocation, the autodiff record, the modules' Python, the loss and optimizer's Python.

At the sizes the examples train (d_model 16-64, 1-2 layers, N 8-300, batch 16-128, padding
masks), Python around the kernels, not the kernels' FLOPs, may set the step time. This script
times every call into each layer of the stack with exclusive timers (a call's time less that of
the calls it makes into other timed layers), so each category holds only its own work:

* kernels: whatever an op launches from the kernel module that ``kernels_for`` hands it (a
  launcher, a compiled kernel), Numba's calls included; one such call is one launch, counted
  per step. Choosing a launch's threads (``free_threads``) counts as ops.
* checks: ``seqattn.ops.checks`` (devices, dtypes, contiguity, shapes) and ``backend_of``.
* allocation: ``empty_like_on`` (the host pool and NumPy's allocator).
* ops: the rest of each ``seqattn.ops`` function (dispatch, reshapes, argument assembly).
* autodiff: ``Function.apply``, the Functions' forward/backward glue, the backward pass's
  topological order and gradient sums, ``Module.backward``.
* modules: ``Module.__call__`` and the layers' ``forward`` bodies (leaf wrapping, checks).
* loss and optimizer: the Python of the loss, clipping and AdamW around their kernels.
* step glue: what is left of the step (this script's own calls).

Times are CPU seconds of the calling thread (``time.thread_time``), not wall time: on a shared
machine with more runnable processes than cores, a wall-clock timer charges whichever call was
running when the scheduler took the core away, milliseconds at a time, and the shares become
noise. So by default the kernels run serial on the calling thread (``--threads 1``), where that
thread's CPU time is all the step's work; with more threads the kernels' share only shrinks.

The timers cost time of their own (about a microsecond a call), which lands in the layer that
makes the call; the script prints the step's CPU time without them beside the profiled one, so
the inflation can be read off. Each configuration runs a few steps first (compilation), then
``--steps`` profiled steps alternating with as many plain ones.

    python benchmarks/profile_train_step.py              # the grid below, serial kernels
    python benchmarks/profile_train_step.py --steps 5    # a smoke run
    python benchmarks/profile_train_step.py --only "d64 L2 N64" --detail 20
    python benchmarks/profile_train_step.py --example examples/digits.py --quick

With ``--example``, the example's whole run is profiled instead (the arguments after the
script go to it): the same categories and three more for the work around the model, each
holding the functions and methods defined in its packages,

* readers: ``seqattn.readers`` (files, SMILES and conformers, networkx graphs to Datasets);
* data path: ``seqattn.adapters``, ``seqattn.data``, ``seqattn.graphs`` and
  ``seqattn.train.batches`` (encoding, batch assembly, graph encodings, the fit loop's batch
  conversion, decoding predictions);
* evaluation and baselines: ``seqattn.evaluation`` and ``seqattn.baselines``;

and what none of the layers holds (the example's own Python and the libraries it calls
directly, imports) as "outside the stack"; launches counted over the run. CPU time of the main
thread, as above; work an example hands to other threads or processes (BLAS threads among
them) is not seen.
"""
import argparse
import functools
import importlib
import inspect
import os
import pkgutil
import platform
import statistics
import sys
import time
from collections import defaultdict

import numpy as np

# (name, model, d_model, layers, heads, FFN, N, batch): the examples' range
GRID = [
    ("token d16 L1 N32 B64", "token", 16, 1, 2, 32, 32, 64),
    ("token d32 L2 N64 B32", "token", 32, 2, 4, 64, 64, 32),
    ("token d64 L2 N64 B16", "token", 64, 2, 4, 128, 64, 16),
    ("token d64 L2 N8 B128", "token", 64, 2, 4, 128, 8, 128),
    ("token d32 L2 N300 B16", "token", 32, 2, 4, 64, 300, 16),
    ("sequence d32 L2 N64 B32", "sequence", 32, 2, 4, 64, 64, 32),
    ("sequence d64 L1 N128 B16", "sequence", 64, 1, 4, 128, 128, 16),
    # benchmarks/train.py's rows furthest from issue 44's 1.5x torch
    ("token d64 L2 N512 B16", "token", 64, 2, 4, 128, 512, 16),
    ("sequence d64 L1 N128 B128", "sequence", 64, 1, 4, 128, 128, 128),
]
CATEGORIES = ["kernels", "checks", "allocation", "ops", "autodiff", "modules",
              "loss and optimizer", "step glue"]
# A whole example's run: the packages around the model, category by category; what is in none
# of them is the example's own (its Python, the libraries it calls directly)
AROUND_THE_MODEL = {
    "readers": ("seqattn.readers",),
    "data path": ("seqattn.adapters", "seqattn.data", "seqattn.graphs", "seqattn.train.batches"),
    "evaluation and baselines": ("seqattn.evaluation", "seqattn.baselines"),
}
EXAMPLE_CATEGORIES = CATEGORIES[:-1] + list(AROUND_THE_MODEL) + ["outside the stack"]
# Methods that Python calls implicitly as class methods, or that wrapping would change
UNTIMED_METHODS = {"__init_subclass__", "__class_getitem__", "__new__", "__getattr__",
                   "__getattribute__", "__setattr__", "__repr__", "__eq__", "__hash__"}


class Ledger:
    """Exclusive seconds and calls per category; a stack of the running timed calls."""

    def __init__(self):
        self.seconds = defaultdict(float)
        self.calls = defaultdict(int)
        self.by_function = defaultdict(float)  # (category, qualified name) -> seconds
        self.launches = 0
        self._children = []   # per running call: the seconds its timed callees took
        self._in_kernel = 0
        self.active = False   # off: a timed call costs one test more than a plain one

    def run(self, category, function, args, kwargs):
        if not self.active:
            return function(*args, **kwargs)
        kernel = category == "kernels"
        if kernel:
            self.launches += self._in_kernel == 0
            self._in_kernel += 1
        self._children.append(0.0)
        start = time.thread_time()
        try:
            return function(*args, **kwargs)
        finally:
            elapsed = time.thread_time() - start
            own = elapsed - self._children.pop()
            self.seconds[category] += own
            name = getattr(function, "__qualname__", getattr(function, "__name__", "?"))
            self.by_function[category, name] += own
            self.calls[category] += 1
            if self._children:
                self._children[-1] += elapsed
            if kernel:
                self._in_kernel -= 1

    def clear(self):
        self.seconds.clear()
        self.calls.clear()
        self.by_function.clear()
        self.launches = 0


LEDGER = Ledger()


def _timed(category, function):
    @functools.wraps(function)
    def timed(*args, **kwargs):
        return LEDGER.run(category, function, args, kwargs)
    return timed


class _TimedKernels:
    """A kernel module whose callables are timed as kernels (one call: one launch)."""

    def __init__(self, module):
        self._module = module
        self._timed = {}

    def __getattr__(self, name):
        value = getattr(self._module, name)
        if not callable(value):
            return value
        if name not in self._timed:
            self._timed[name] = _timed("kernels", value)
        return self._timed[name]


def _kernels_for_timed(kernels_for):
    """``kernels_for`` handing out timed kernel modules: a kernel is whatever an op launches."""
    modules = {}

    @functools.wraps(kernels_for)
    def timed_kernels_for(device, family):
        if (device, family) not in modules:
            modules[device, family] = _TimedKernels(kernels_for(device, family))
        return modules[device, family]
    return timed_kernels_for


def _replace_everywhere(original, replacement):
    """Point every seqattn module's global that names ``original`` at ``replacement``."""
    for name, module in list(sys.modules.items()):
        if name.split(".")[0] != "seqattn" or module is None:
            continue
        for attribute, value in list(vars(module).items()):
            if value is original:
                setattr(module, attribute, replacement)


def _public_functions(module):
    return [f for name, f in vars(module).items()
            if not name.startswith("_") and inspect.isfunction(f)
            and f.__module__ == module.__name__]


def _modules_under(package):
    package = importlib.import_module(package)
    return [importlib.import_module(f"{package.__name__}.{info.name}")
            for info in pkgutil.iter_modules(package.__path__) if not info.ispkg]


def _subclasses(cls):
    for sub in cls.__subclasses__():
        yield sub
        yield from _subclasses(sub)


def _time_method(cls, name, category):
    raw = cls.__dict__[name]
    if isinstance(raw, staticmethod):
        setattr(cls, name, staticmethod(_timed(category, raw.__func__)))
    elif isinstance(raw, classmethod):
        setattr(cls, name, classmethod(_timed(category, raw.__func__)))
    else:
        setattr(cls, name, _timed(category, raw))


def _modules_of(name):
    """The module `name` and, for a package, every module under it (packages included)."""
    module = importlib.import_module(name)
    found = [module]
    if hasattr(module, "__path__"):
        for info in pkgutil.walk_packages(module.__path__, f"{name}."):
            found.append(importlib.import_module(info.name))
    return found


def instrument_around_the_model():
    """Time every function and method defined in the packages of ``AROUND_THE_MODEL`` in its
    category (once per process, after :func:`instrument`)."""
    for category, packages in AROUND_THE_MODEL.items():
        for module in [m for name in packages for m in _modules_of(name)]:
            for value in list(vars(module).values()):
                if getattr(value, "__module__", None) != module.__name__:
                    continue  # imported from elsewhere: timed where it is defined
                if inspect.isfunction(value):
                    _replace_everywhere(value, _timed(category, value))
                elif inspect.isclass(value):
                    for name, raw in list(vars(value).items()):
                        function = raw.__func__ if isinstance(raw, (staticmethod, classmethod)) \
                            else raw
                        if inspect.isfunction(function) and name not in UNTIMED_METHODS:
                            _time_method(value, name, category)


def instrument():
    """Wrap every layer of the stack in its category's timer (once per process)."""
    from seqattn import backend
    from seqattn.autodiff.function import Function
    from seqattn.nn.module import Module
    from seqattn.ops import checks
    from seqattn.train import clipping, losses, optimizers

    from seqattn.kernels.cpu import threads

    _replace_everywhere(backend.kernels_for, _kernels_for_timed(backend.kernels_for))
    _replace_everywhere(threads.free_threads, _timed("ops", threads.free_threads))
    for name in ("prepared", "contiguous", "expect_shape", "expect_last_dim",
                 "expect_updatable"):
        _replace_everywhere(getattr(checks, name), _timed("checks", getattr(checks, name)))
    _replace_everywhere(backend.backend_of, _timed("checks", backend.backend_of))
    _replace_everywhere(backend.empty_like_on, _timed("allocation", backend.empty_like_on))
    for module in _modules_under("seqattn.ops"):
        if module.__name__ != checks.__name__:
            for function in _public_functions(module):
                _replace_everywhere(function, _timed("ops", function))
    _time_method(Function, "apply", "autodiff")
    for cls in _subclasses(Function):
        for name in ("forward", "backward"):
            if name in cls.__dict__:
                _time_method(cls, name, "autodiff")
    backward_pass = importlib.import_module("seqattn.autodiff.backward").backward
    _replace_everywhere(backward_pass, _timed("autodiff", backward_pass))
    _time_method(Module, "backward", "autodiff")
    _time_method(Module, "__call__", "modules")
    for cls in [Module, *_subclasses(Module)]:
        if "forward" in cls.__dict__:
            _time_method(cls, "forward", "modules")
    for cls in [losses.Loss, *_subclasses(losses.Loss)]:
        for name in ("__call__", "backward"):
            if name in cls.__dict__:
                _time_method(cls, name, "loss and optimizer")
    for cls in [optimizers.Optimizer, *_subclasses(optimizers.Optimizer)]:
        for name in ("step", "zero_grad"):
            if name in cls.__dict__:
                _time_method(cls, name, "loss and optimizer")
    for name in ("global_grad_norm", "clip_factor"):
        function = getattr(clipping, name)
        _replace_everywhere(function, _timed("loss and optimizer", function))


def build(kind, d_model, layers, heads, ffn, n, batch, seed=0):
    """The model, its loss and optimizer, and one batch with a padding mask (lengths drawn
    between n / 2 and n; True marks padding)."""
    from seqattn.models import (SequenceModel, SequenceModelConfig, TokenModel,
                                TokenModelConfig)
    from seqattn.train import AdamW, MSELoss

    rng = np.random.default_rng(seed)
    common = dict(in_features=4, d_model=d_model, nhead=heads, num_layers=layers,
                  dim_feedforward=ffn, max_len=n, activation="gelu")
    if kind == "token":
        model = TokenModel(TokenModelConfig(out_features=4, **common))
        y = rng.normal(size=(batch, n, 4)).astype(np.float32)
    else:
        model = SequenceModel(SequenceModelConfig(out_features=1, **common))
        y = rng.normal(size=(batch, 1)).astype(np.float32)
    x = rng.normal(size=(batch, n, 4)).astype(np.float32)
    lengths = rng.integers(max(1, n // 2), n + 1, size=batch)
    mask = np.arange(n)[None, :] >= lengths[:, None]
    return model, MSELoss(), AdamW(model, lr=1e-3), x, y, mask


def training_step(model, loss, optimizer, x, y, mask):
    from seqattn.train import clip_factor, global_grad_norm

    value = loss(model(x, mask), y)
    optimizer.zero_grad()
    model.backward(loss.backward())
    optimizer.step(clip_factor(global_grad_norm(model.parameters()), 1.0))
    return value


def profile(config, steps):
    """(plain step seconds, profiled step seconds, seconds per category per step, launches
    per step, calls per category per step, seconds per (category, function) per step) for
    one configuration."""
    _, kind, d_model, layers, heads, ffn, n, batch = config
    parts = build(kind, d_model, layers, heads, ffn, n, batch)
    for _ in range(3):
        training_step(*parts)
    plain, profiled = [], []
    seconds, calls, by_function = defaultdict(float), defaultdict(float), defaultdict(float)
    launches = 0
    for _ in range(steps):  # plain and profiled steps alternate, so load falls on both
        start = time.thread_time()
        training_step(*parts)
        plain.append(time.thread_time() - start)
        LEDGER.clear()
        LEDGER.active = True
        start = time.thread_time()
        LEDGER.run("step glue", training_step, parts, {})
        profiled.append(time.thread_time() - start)
        LEDGER.active = False
        for totals, counted in ((seconds, LEDGER.seconds), (calls, LEDGER.calls),
                                (by_function, LEDGER.by_function)):
            for key, value in counted.items():
                totals[key] += value / steps
        launches += LEDGER.launches
    return (statistics.median(plain), statistics.median(profiled),
            {c: seconds[c] for c in CATEGORIES}, launches / steps, calls, by_function)


def profile_example(path, arguments):
    """(seconds per category, launches, seconds per (category, function)) over one run of the
    example script at ``path``."""
    import runpy

    sys.argv = [path, *arguments]
    LEDGER.clear()
    LEDGER.active = True
    try:
        LEDGER.run("outside the stack", runpy.run_path, (path,), {"run_name": "__main__"})
    finally:
        LEDGER.active = False
    return ({c: LEDGER.seconds[c] for c in EXAMPLE_CATEGORIES}, LEDGER.launches,
            dict(LEDGER.by_function))


def print_top(by_function, count, unit, scale):
    """The ``count`` functions that took the most exclusive time, in ``unit``."""
    top = sorted(by_function.items(), key=lambda item: -item[1])[:count]
    for (category, name), spent in top:
        print(f"    {scale * spent:8.3f} {unit}  {category:25} {name}")


def print_example(path, arguments, threads, detail):
    seconds, launches, by_function = profile_example(path, arguments)
    total = sum(seconds.values())
    print(f"{path} {' '.join(arguments)}: {total:.1f} CPU s of the main thread, {threads} "
          f"threads, {launches} launches")
    for category in EXAMPLE_CATEGORIES:
        share = 100 * seconds[category] / total
        print(f"  {category:25} {seconds[category]:8.2f} s {share:6.1f}%")
    print_top(by_function, detail, "s", 1)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--only", help="run the grid rows whose name contains this")
    parser.add_argument("--detail", type=int, default=0, metavar="K",
                        help="also print calls per category and the K functions that take "
                             "the most exclusive time")
    parser.add_argument("--example", help="profile this example script's whole run instead; "
                        "the arguments after it go to the example")
    args, example_arguments = parser.parse_known_args()
    if example_arguments and args.example is None:
        parser.error(f"unrecognized arguments: {' '.join(example_arguments)}")

    import numba
    from threadpoolctl import threadpool_limits

    numba.set_num_threads(args.threads)
    import seqattn.models  # noqa: F401  (every module imported before instrumenting)
    import seqattn.train  # noqa: F401
    instrument()
    if args.example is not None:
        instrument_around_the_model()
        with threadpool_limits(args.threads):
            print_example(args.example, example_arguments, args.threads, args.detail)
        return
    load_before = os.getloadavg()[0]
    rows = [c for c in GRID if args.only is None or args.only in c[0]]
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
          f"{args.threads} threads; MSE + clipping + AdamW, padding masks; CPU ms of the calling "
          f"thread, median of {args.steps} steps each")
    header = "".join(f"{c[:10]:>11}" for c in CATEGORIES)
    print(f"{'configuration':26}{'plain ms':>9}{'prof. ms':>9}{'launch':>7}{header}  (% of "
          "profiled step)")
    with threadpool_limits(args.threads):
        for config in rows:
            plain, profiled, seconds, launches, calls, by_function = profile(config,
                                                                             args.steps)
            total = sum(seconds.values())
            shares = "".join(f"{100 * seconds[c] / total:10.1f}%" for c in CATEGORIES)
            print(f"{config[0]:26}{1e3 * plain:9.2f}{1e3 * profiled:9.2f}{launches:7.0f}"
                  f"{shares}", flush=True)
            if args.detail:
                print("    calls per step: " + ", ".join(f"{c} {calls[c]:.0f}"
                                                       for c in CATEGORIES if calls[c]))
                print_top(by_function, args.detail, "ms", 1e3)
    print(f"1-min load average {load_before:.1f} before, {os.getloadavg()[0]:.1f} after")


if __name__ == "__main__":
    main()
