"""Arithmetic a model writes between layers, on the GPU; same launchers and semantics as
``kernels/cpu/arithmetic`` (flat elementwise arrays with ``b`` repeated over ``a``'s leading
rows; 3-D (P, L, Q) views for the axis kernels)."""
from numba import cuda

from .grid import THREADS, blocks_for


@cuda.jit(cache=True)
def multiply_forward_kernel(out, a, b):
    i = cuda.grid(1)
    if i < a.size:
        out[i] = a[i] * b[i % b.size]


@cuda.jit(cache=True)
def affine_forward_kernel(out, x, scale, shift):
    i = cuda.grid(1)
    if i < x.size:
        out[i] = x[i] * scale + shift


@cuda.jit(cache=True)
def reciprocal_forward_kernel(out, x):
    i = cuda.grid(1)
    if i < x.size:
        out[i] = 1 / x[i]


@cuda.jit(cache=True)
def concat_forward_kernel(out, x, offset):
    i = cuda.grid(1)
    P, L, Q = x.shape
    if i < P * L * Q:
        p, rest = i // (L * Q), i % (L * Q)
        out[p, offset + rest // Q, rest % Q] = x[p, rest // Q, rest % Q]


@cuda.jit(cache=True)
def concat_backward_kernel(dx, dout, offset):
    i = cuda.grid(1)
    P, L, Q = dx.shape
    if i < P * L * Q:
        p, rest = i // (L * Q), i % (L * Q)
        dx[p, rest // Q, rest % Q] = dout[p, offset + rest // Q, rest % Q]


@cuda.jit(cache=True)
def mean_forward_kernel(out, x, scale):
    # one thread per output element, summing its column of the axis
    i = cuda.grid(1)
    P, L, Q = x.shape
    if i < P * Q:
        p, q = i // Q, i % Q
        total = x[p, 0, q] * 0
        for l in range(L):
            total += x[p, l, q]
        out[p, q] = total * scale


@cuda.jit(cache=True)
def mean_backward_kernel(dx, dout, scale):
    i = cuda.grid(1)
    P, L, Q = dx.shape
    if i < P * L * Q:
        p, rest = i // (L * Q), i % (L * Q)
        dx[p, rest // Q, rest % Q] = scale * dout[p, rest % Q]


def multiply_forward(out, a, b):
    multiply_forward_kernel[blocks_for(a.size), THREADS](out, a, b)


def affine_forward(out, x, scale, shift):
    affine_forward_kernel[blocks_for(x.size), THREADS](out, x, scale, shift)


def reciprocal_forward(out, x):
    reciprocal_forward_kernel[blocks_for(x.size), THREADS](out, x)


def concat_forward(out, x, offset):
    concat_forward_kernel[blocks_for(x.size), THREADS](out, x, offset)


def concat_backward(dx, dout, offset):
    concat_backward_kernel[blocks_for(dx.size), THREADS](dx, dout, offset)


def mean_forward(out, x, scale):
    mean_forward_kernel[blocks_for(out.size), THREADS](out, x, scale)


def mean_backward(dx, dout, scale):
    mean_backward_kernel[blocks_for(dx.size), THREADS](dx, dout, scale)
