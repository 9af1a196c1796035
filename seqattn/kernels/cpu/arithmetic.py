"""Arithmetic a model writes between layers, on the CPU: products, affine maps, reciprocals,
concatenation and means along one axis. Same launchers and semantics as ``kernels/cuda``'s.

Elementwise kernels take flat arrays; ``b`` of size S broadcasts over ``a`` of size G * S
(a[g * S + s] pairs with b[s]). Axis kernels take 3-D views (P, L, Q): P the dims before the
axis, L the axis, Q the dims after it.
"""
from numba import prange

from .threads import sized_kernel

# Elements a thread must have before a launch takes it: as for the add and the head split,
# measured in benchmarks/small_launches.py.
GRAIN = 1 << 16


@sized_kernel(GRAIN)
def multiply_forward(out, a, b):
    """out = a * b, with b repeated over a's leading rows."""
    S = b.size
    for g in prange(a.size // S):
        for s in range(S):
            out[g * S + s] = a[g * S + s] * b[s]


@sized_kernel(GRAIN)
def affine_forward(out, x, scale, shift):
    """out = x * scale + shift."""
    for i in prange(x.size):
        out[i] = x[i] * scale + shift


@sized_kernel(GRAIN)
def reciprocal_forward(out, x):
    """out = 1 / x."""
    for i in prange(x.size):
        out[i] = 1.0 / x[i]


@sized_kernel(GRAIN)
def concat_forward(out, x, offset):
    """out[p, offset + l, q] = x[p, l, q]: one input's block of a concatenation."""
    P, L, Q = x.shape
    for p in prange(P):
        for l in range(L):
            for q in range(Q):
                out[p, offset + l, q] = x[p, l, q]


@sized_kernel(GRAIN)
def concat_backward(dx, dout, offset):
    """dx[p, l, q] = dout[p, offset + l, q]: one input's share of the gradient."""
    P, L, Q = dx.shape
    for p in prange(P):
        for l in range(L):
            for q in range(Q):
                dx[p, l, q] = dout[p, offset + l, q]


def _input_size(out, x, *rest):
    return x.size


@sized_kernel(GRAIN, work=_input_size)
def mean_forward(out, x, scale):
    """out[p, q] = scale * sum over l of x[p, l, q] (scale = 1 / L for a mean, 1 for a sum)."""
    P, L, Q = x.shape
    for p in prange(P):
        for q in range(Q):
            out[p, q] = 0.0
        for l in range(L):
            for q in range(Q):
                out[p, q] += x[p, l, q]
        for q in range(Q):
            out[p, q] *= scale


@sized_kernel(GRAIN)
def mean_backward(dx, dout, scale):
    """dx[p, l, q] = scale * dout[p, q]."""
    P, L, Q = dx.shape
    for p in prange(P):
        for l in range(L):
            for q in range(Q):
                dx[p, l, q] = scale * dout[p, q]
