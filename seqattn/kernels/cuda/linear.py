"""Linear map y = x W^T + b on the GPU; same launchers and semantics as ``kernels/cpu/linear``.

Shapes: x (R, K), weight (O, K), bias (O,), y (R, O). The GEMM is a shared-memory tiled kernel:
each block computes a TILE x TILE tile of the output, staging TILE-wide slabs of both operands in
shared memory so that each global element is read once per tile instead of once per product.
"""
import functools

import numpy as np
from numba import cuda, from_dtype

from ..cuda_grid import THREADS, blocks_for
from .reductions import sum_over_rows

TILE = 16


@functools.lru_cache(maxsize=None)
def gemm_kernel_for(dtype):
    """The GEMM kernel for one dtype (shared arrays need their element type at compile time)."""
    element = from_dtype(np.dtype(dtype))

    @cuda.jit
    def gemm_kernel(c, a, b, a_transposed, b_transposed, accumulate):
        """c (M, N) = op(a) (M, K) @ op(b) (K, N), added to c when ``accumulate``."""
        a_tile = cuda.shared.array((TILE, TILE + 1), element)  # +1 column: no bank conflicts
        b_tile = cuda.shared.array((TILE, TILE + 1), element)
        ty = cuda.threadIdx.y
        tx = cuda.threadIdx.x
        row = cuda.blockIdx.y * TILE + ty
        col = cuda.blockIdx.x * TILE + tx
        M, N = c.shape
        K = a.shape[0] if a_transposed else a.shape[1]
        acc = element(0)
        for k0 in range(0, K, TILE):
            ka = k0 + tx
            kb = k0 + ty
            if row < M and ka < K:
                a_tile[ty, tx] = a[ka, row] if a_transposed else a[row, ka]
            else:
                a_tile[ty, tx] = 0
            if col < N and kb < K:
                b_tile[ty, tx] = b[col, kb] if b_transposed else b[kb, col]
            else:
                b_tile[ty, tx] = 0
            cuda.syncthreads()
            for kk in range(TILE):
                acc += a_tile[ty, kk] * b_tile[kk, tx]
            cuda.syncthreads()
        if row < M and col < N:
            if accumulate:
                c[row, col] += acc
            else:
                c[row, col] = acc

    return gemm_kernel


def gemm(c, a, b, a_transposed, b_transposed, accumulate):
    """c = op(a) @ op(b) (+ c); op transposes when the flag is set."""
    M, N = c.shape
    if M == 0 or N == 0:
        return
    grid = ((N + TILE - 1) // TILE, (M + TILE - 1) // TILE)
    gemm_kernel_for(c.dtype)[grid, (TILE, TILE)](c, a, b, a_transposed, b_transposed, accumulate)


@cuda.jit(cache=True)
def add_bias_kernel(out, bias):
    i = cuda.grid(1)
    if i < out.size:
        O = bias.size
        out[i // O, i % O] += bias[i % O]


def linear_forward(out, x, weight, bias, has_bias):
    """out (R, O) = x (R, K) @ weight (O, K)^T (+ bias (O,))."""
    gemm(out, x, weight, False, True, False)
    if has_bias:
        add_bias_kernel[blocks_for(out.size), THREADS](out, bias)


def linear_backward(dx, dweight, dbias, dout, x, weight, need_dx, has_bias):
    """Gradients of linear_forward; dweight and dbias are accumulated (+=), dx is overwritten."""
    # out = x W^T  ->  dx = dout W
    if need_dx:
        gemm(dx, dout, weight, False, False, False)
    # out = x W^T  ->  dW += dout^T x
    gemm(dweight, dout, x, True, False, True)
    # out += b  ->  db += sum of dout over rows
    if has_bias:
        sum_over_rows(dbias, dout, True)
