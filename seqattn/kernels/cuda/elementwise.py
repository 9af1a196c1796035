"""Elementwise arithmetic on the GPU; same launchers and semantics as ``kernels/cpu/elementwise``.

Arrays are flat device arrays; ``b`` of size S broadcasts over a of size G * S.
"""
from numba import cuda

from .grid import THREADS, blocks_for


@cuda.jit(cache=True)
def add_forward_kernel(out, a, b):
    i = cuda.grid(1)
    if i < a.size:
        out[i] = a[i] + b[i % b.size]


@cuda.jit(cache=True)
def add_into_kernel(dst, src):
    i = cuda.grid(1)
    if i < dst.size:
        dst[i] += src[i]


@cuda.jit(cache=True)
def fill_kernel(out, value):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = value


@cuda.jit(cache=True)
def move_toward_kernel(dst, src, weight):
    i = cuda.grid(1)
    if i < dst.size:
        dst[i] += weight * (src[i] - dst[i])


def add_forward(out, a, b):
    """out = a + b, with b repeated over a's leading rows."""
    add_forward_kernel[blocks_for(a.size), THREADS](out, a, b)


def add_into(dst, src):
    """dst += src (same size)."""
    add_into_kernel[blocks_for(dst.size), THREADS](dst, src)


def fill(out, value):
    """out[:] = value."""
    fill_kernel[blocks_for(out.size), THREADS](out, value)


def move_toward(dst, src, weight):
    """dst += weight * (src - dst) (same size)."""
    move_toward_kernel[blocks_for(dst.size), THREADS](dst, src, dst.dtype.type(weight))
