"""How every seqattn CPU kernel is compiled: ``njit`` and the ``jit_options`` of an @overload.

Beside each @njit function Numba compiles a C-callable wrapper, for calls through a function
pointer (first-class function values, ``cfunc`` callbacks). seqattn calls its kernels from
Python, through the CPython wrapper, or from other kernels, directly; never through a pointer.
The C wrapper was compiled, optimized and emitted for nothing (a first run's compilation
measured with and without it: BENCHMARKS.md, "Kernels without Numba's C-callable wrapper").
Here it is left out. The C functions of called_by_name.py are ``numba.cfunc`` and keep
theirs, which is what they are for.
"""
import numba

_WITHOUT_C_WRAPPER = {"no_cfunc_wrapper": True}

# jit_options of an @overload whose implementation is cached on disk like the kernels
CACHED = {"cache": True, **_WITHOUT_C_WRAPPER}


def njit(*args, **options):
    """numba.njit (as a decorator, bare or with options) without the C-callable wrapper."""
    return numba.njit(*args, **_WITHOUT_C_WRAPPER, **options)
