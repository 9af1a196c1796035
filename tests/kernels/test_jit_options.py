"""Every CPU kernel is compiled without Numba's C-callable wrapper (seqattn/kernels/cpu/jit_options.py).

A kernel file that takes ``njit`` from numba instead of jit_options would compile the wrapper
again: the walk over every CPU kernel module's dispatchers below finds it."""
import importlib
import pkgutil

import numba
import numpy as np
from numba.core.registry import CPUDispatcher

import seqattn.kernels.cpu as cpu_kernels
from seqattn.kernels.cpu.jit_options import CACHED, njit
from seqattn.kernels.cpu.threads import SizedKernel


def _cpu_kernel_modules():
    return [importlib.import_module(info.name) for info in
            pkgutil.walk_packages(cpu_kernels.__path__, cpu_kernels.__name__ + ".")]


def _dispatchers(module):
    for name, value in vars(module).items():
        if isinstance(value, CPUDispatcher) and value.py_func.__module__ == module.__name__:
            yield name, value
        elif isinstance(value, SizedKernel):
            yield name + " (parallel)", value.parallel
            yield name + " (serial)", value.serial


def test_every_cpu_kernel_leaves_out_the_c_wrapper():
    checked, with_wrapper = 0, []
    for module in _cpu_kernel_modules():
        for name, dispatcher in _dispatchers(module):
            if dispatcher.targetoptions.get("inline", "never") == "always":
                continue  # inlined into its callers, never compiled on its own
            checked += 1
            if not dispatcher.targetoptions.get("no_cfunc_wrapper"):
                with_wrapper.append(f"{module.__name__}.{name}")
    assert checked > 100, checked  # the walk reached the kernels
    assert with_wrapper == []


def _defined_wrappers(decorator):
    """The wrappers defined in the code of a small function compiled with ``decorator``."""
    @decorator
    def scaled(x):
        return x * 2.0

    assert scaled(np.float32(1.5)) == 3.0
    code = scaled.inspect_llvm(scaled.signatures[0])
    defined = [line for line in code.splitlines() if line.startswith("define")]
    return {kind for kind in ("_ZN7cpython", "cfunc.") if any(kind in d for d in defined)}


def test_a_kernel_compiled_here_has_no_c_wrapper_in_its_code():
    assert _defined_wrappers(numba.njit) == {"_ZN7cpython", "cfunc."}
    # the wrapper Python calls go through stays
    assert _defined_wrappers(njit) == {"_ZN7cpython"}


def test_cached_overloads_leave_it_out_too():
    assert CACHED == {"cache": True, "no_cfunc_wrapper": True}
