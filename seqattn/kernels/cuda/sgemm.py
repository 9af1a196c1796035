"""A register-blocked GEMM in numba-cuda: the fallback when no cuBLAS binding is installed.

c (M, N) = op(a) (M, K) @ op(b) (K, N), op transposing an operand when its flag is set; any row
or column strides. One block of THREAD_ROWS x THREAD_COLS threads computes a BLOCK_M x BLOCK_N
tile of c and each thread owns a THREAD_M x THREAD_N sub-tile of it in registers. Per step of
BLOCK_K, the block stages op(a) and op(b) slabs in shared memory, both stored k-major, so a thread
reads its THREAD_M values of a and THREAD_N values of b as contiguous, 16-byte aligned runs (one
vector load each in float32) and does THREAD_M * THREAD_N FMAs with them: 2 shared-memory words
per FMA in the textbook one-output-per-thread kernel, 1/2 here.
"""
import functools

import numpy as np
from numba import cuda, from_dtype

from .compile_target import VECTOR_ALIGNMENT, jit_options

THREAD_M = 4  # rows of c per thread
THREAD_N = 4  # columns of c per thread
THREAD_ROWS = 16
THREAD_COLS = 16
THREADS = THREAD_ROWS * THREAD_COLS
BLOCK_M = THREAD_M * THREAD_ROWS  # 64
BLOCK_N = THREAD_N * THREAD_COLS  # 64
BLOCK_K = 16
# Resident blocks per SM the compiler must leave registers for (ptxas otherwise takes ~150 per
# thread, one block of 8 warps per SM, too few to hide shared-memory latency).
BLOCKS_PER_SM = 2
# Each slab row is padded by 4 elements: rows stay 16-byte aligned for the vector loads, and the
# k-major stores of a row-major operand spread over the banks (2-way instead of 16-way conflicts).
PAD = 4
# Shared-array shapes must be literal tuples at compile time: numba cannot fold (BLOCK_K,
# BLOCK_M + PAD) inside a kernel (tests/kernels/test_cuda_compile.py compiles this for real).
A_SLAB = (BLOCK_K, BLOCK_M + PAD)
B_SLAB = (BLOCK_K, BLOCK_N + PAD)


@functools.lru_cache(maxsize=None)
def sgemm_kernel_for(dtype):
    """The GEMM kernel for one dtype (shared arrays and registers need their type at compile
    time; literals are cast so that float32 code never promotes to float64)."""
    element = from_dtype(np.dtype(dtype))
    zero = np.dtype(dtype).type(0)

    @cuda.jit(device=True, inline="always")
    def stage(slab, width, src, outer0, k0, outer_size, K, k_major):
        """slab[k, o] = op(src)[outer0 + o, k0 + k] for o < width, zero outside (outer_size, K).

        ``k_major``: src is stored (K, outer), so consecutive threads walk the outer dim;
        otherwise src is (outer, K) and they walk k. Either way global reads are coalesced.
        """
        t = cuda.threadIdx.y * THREAD_COLS + cuda.threadIdx.x
        for step in range(width * BLOCK_K // THREADS):
            e = t + step * THREADS
            if k_major:
                o, k = e % width, e // width
            else:
                o, k = e // BLOCK_K, e % BLOCK_K
            go, gk = outer0 + o, k0 + k
            value = zero
            if go < outer_size and gk < K:
                value = src[gk, go] if k_major else src[go, gk]
            slab[k, o] = value

    @cuda.jit(**jit_options(launch_bounds=(THREADS, BLOCKS_PER_SM)))
    def sgemm_kernel(c, a, b, a_transposed, b_transposed, accumulate):
        """Grid (column tiles, row tiles) of (THREAD_COLS, THREAD_ROWS) threads."""
        a_slab = cuda.shared.array(A_SLAB, element, alignment=VECTOR_ALIGNMENT)
        b_slab = cuda.shared.array(B_SLAB, element, alignment=VECTOR_ALIGNMENT)
        acc = cuda.local.array((THREAD_M, THREAD_N), element)
        a_reg = cuda.local.array(THREAD_M, element)
        b_reg = cuda.local.array(THREAD_N, element)
        M, N = c.shape
        K = a.shape[0] if a_transposed else a.shape[1]
        row0 = cuda.blockIdx.y * BLOCK_M
        col0 = cuda.blockIdx.x * BLOCK_N
        tm = cuda.threadIdx.y * THREAD_M  # this thread's first row and column within the tile
        tn = cuda.threadIdx.x * THREAD_N
        for i in range(THREAD_M):
            for j in range(THREAD_N):
                acc[i, j] = zero
        for k0 in range(0, K, BLOCK_K):
            # op(a) (M, K) is stored k-major, (K, M), when transposed; op(b) (K, N) is stored
            # k-major, (K, N), when it is not.
            stage(a_slab, BLOCK_M, a, row0, k0, M, K, a_transposed)
            stage(b_slab, BLOCK_N, b, col0, k0, N, K, not b_transposed)
            cuda.syncthreads()
            for k in range(BLOCK_K):
                for i in range(THREAD_M):
                    a_reg[i] = a_slab[k, tm + i]
                for j in range(THREAD_N):
                    b_reg[j] = b_slab[k, tn + j]
                for i in range(THREAD_M):
                    for j in range(THREAD_N):
                        acc[i, j] += a_reg[i] * b_reg[j]
            cuda.syncthreads()
        for i in range(THREAD_M):
            r = row0 + tm + i
            if r < M:
                for j in range(THREAD_N):
                    col = col0 + tn + j
                    if col < N:
                        if accumulate:
                            c[r, col] += acc[i, j]
                        else:
                            c[r, col] = acc[i, j]

    return sgemm_kernel


def sgemm(c, a, b, a_transposed, b_transposed, accumulate):
    """c = op(a) @ op(b), added to c when ``accumulate``; op transposes when the flag is set."""
    M, N = c.shape
    if M == 0 or N == 0:
        return
    grid = (-(-N // BLOCK_N), -(-M // BLOCK_M))
    sgemm_kernel_for(c.dtype)[grid, (THREAD_COLS, THREAD_ROWS)](
        c, a, b, a_transposed, b_transposed, accumulate)
