"""Pooling pieces on the GPU; same launchers and semantics as ``kernels/cpu/pooling``.

One thread per output element; the masked mean loops over the N tokens of its (b, e).
"""
from numba import cuda

from .grid import THREADS, blocks_for


@cuda.jit(cache=True)
def masked_mean_forward_kernel(out, x, padding):
    B, N, E = x.shape
    i = cuda.grid(1)
    if i >= B * E:
        return
    b, e = i // E, i % E
    total = 0.0
    count = 0
    for n in range(N):
        if not padding[b, n]:
            total += x[b, n, e]
            count += 1
    out[b, e] = total / count if count else 0.0


@cuda.jit(cache=True)
def masked_mean_backward_kernel(dx, dout, padding):
    B, N, E = dx.shape
    i = cuda.grid(1)
    if i >= B * N * E:
        return
    b, n, e = i // (N * E), (i // E) % N, i % E
    count = 0
    for m in range(N):
        count += 0 if padding[b, m] else 1
    dx[b, n, e] = 0.0 if padding[b, n] else dout[b, e] / count


@cuda.jit(cache=True)
def prepend_token_forward_kernel(out, x, token):
    B, L, E = out.shape
    i = cuda.grid(1)
    if i >= B * L * E:
        return
    b, n, e = i // (L * E), (i // E) % L, i % E
    out[b, n, e] = token[e] if n == 0 else x[b, n - 1, e]


@cuda.jit(cache=True)
def prepend_token_input_grad_kernel(dx, dout):
    B, N, E = dx.shape
    L = dout.shape[1]
    i = cuda.grid(1)
    if i >= B * N * E:
        return
    b, n, e = i // (N * E), (i // E) % N, i % E
    dx[b, n, e] = dout[b, n + 1, e] if n + 1 < L else 0.0


@cuda.jit(cache=True)
def prepend_token_token_grad_kernel(dtoken, dout):
    e = cuda.grid(1)
    if e >= dtoken.size:
        return
    total = 0.0
    for b in range(dout.shape[0]):
        total += dout[b, 0, e]
    dtoken[e] += total


@cuda.jit(cache=True)
def first_token_forward_kernel(out, x):
    B, N, E = x.shape
    i = cuda.grid(1)
    if i < B * E:
        out[i // E, i % E] = x[i // E, 0, i % E]


@cuda.jit(cache=True)
def first_token_backward_kernel(dx, dout):
    B, N, E = dx.shape
    i = cuda.grid(1)
    if i >= B * N * E:
        return
    b, n, e = i // (N * E), (i // E) % N, i % E
    dx[b, n, e] = dout[b, e] if n == 0 else 0.0


def masked_mean_forward(out, x, padding):
    masked_mean_forward_kernel[blocks_for(out.size), THREADS](out, x, padding)


def masked_mean_backward(dx, dout, padding):
    masked_mean_backward_kernel[blocks_for(dx.size), THREADS](dx, dout, padding)


def prepend_token_forward(out, x, token):
    prepend_token_forward_kernel[blocks_for(out.size), THREADS](out, x, token)


def prepend_token_backward(dx, dtoken, dout):
    """dx (B, N, E) is written; dtoken (E,) is accumulated (+=) over the batch."""
    prepend_token_input_grad_kernel[blocks_for(dx.size), THREADS](dx, dout)
    prepend_token_token_grad_kernel[blocks_for(dtoken.size), THREADS](dtoken, dout)


def first_token_forward(out, x):
    first_token_forward_kernel[blocks_for(out.size), THREADS](out, x)


def first_token_backward(dx, dout):
    first_token_backward_kernel[blocks_for(dx.size), THREADS](dx, dout)
