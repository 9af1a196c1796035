"""Elementwise arithmetic on the CPU: residual and broadcast adds, in-place accumulation, fill,
moving toward another array (weight averaging).

Arrays are flat (the ops layer ravels them). ``b`` of size S broadcasts over a of size G * S:
a[g * S + s] pairs with b[s] (a bias (E,), a positional table (N * E,), or a full residual).
"""
from numba import prange

from .jit_options import njit
from .threads import sized_kernel

# Elements a thread must have before a launch takes it (benchmarks/small_launches.py).
GRAIN = 1 << 16


@njit(cache=True)
def _add_rows(out, a, b, g0, g1):
    S = b.size
    for g in range(g0, g1):
        # Row slices indexed from 0 vectorise; a[i % S] per element costs an integer division.
        out_row = out[g * S:(g + 1) * S]
        a_row = a[g * S:(g + 1) * S]
        for s in range(S):
            out_row[s] = a_row[s] + b[s]


@sized_kernel(GRAIN)
def _add_blocks(out, a, b, blocks):
    for t in prange(blocks):
        _add_rows(out, a, b, t * (a.size // b.size) // blocks,
                  (t + 1) * (a.size // b.size) // blocks)


@sized_kernel(GRAIN)
def _add_same_size(out, a, b):
    for i in prange(a.size):
        out[i] = a[i] + b[i]


def add_forward(out, a, b):
    """out = a + b, with b repeated over a's leading rows."""
    if b.size == a.size:
        _add_same_size(out, a, b)
    else:
        threads = _add_blocks.threads(a.size)
        _add_blocks.run(threads, out, a, b, min(a.size // b.size, threads))


@sized_kernel(GRAIN)
def add_into(dst, src):
    """dst += src (same size); how gradients that flow along two paths are summed."""
    for i in prange(dst.size):
        dst[i] += src[i]


@sized_kernel(GRAIN)
def fill(out, value):
    """out[:] = value."""
    for i in prange(out.size):
        out[i] = value


def move_toward(dst, src, weight):
    """dst += weight * (src - dst) (same size): one step of an exponential moving average.
    NumPy's loops: once a step over the weights, memory-bound, and nothing to compile."""
    dst += dst.dtype.type(weight) * (src - dst)
