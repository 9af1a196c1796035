"""Elementwise arithmetic on the CPU: residual and broadcast adds, in-place accumulation, fill.

Arrays are flat (the ops layer ravels them). ``b`` of size S broadcasts over a of size G * S:
a[g * S + s] pairs with b[s] (a bias (E,), a positional table (N * E,), or a full residual).
"""
from numba import njit, prange


@njit(parallel=True, cache=True)
def add_forward(out, a, b):
    """out = a + b, with b repeated over a's leading rows."""
    S = b.size
    for i in prange(a.size):
        out[i] = a[i] + b[i % S]


@njit(parallel=True, cache=True)
def add_into(dst, src):
    """dst += src (same size); how gradients that flow along two paths are summed."""
    for i in prange(dst.size):
        dst[i] += src[i]


@njit(parallel=True, cache=True)
def fill(out, value):
    """out[:] = value."""
    for i in prange(out.size):
        out[i] = value
