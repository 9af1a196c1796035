"""Block-wide sums for CUDA kernels that give one block to each row (at most ROW_THREADS threads).

A row of E elements gets :func:`row_threads` (E) threads, each summing about two elements before
the tree: a narrow row (a d_model of 8 in the tests, say) does not launch 64 threads of which most
would only add zeros, which under the CUDA simulator, where every thread is a Python thread, cost
most of the time of every layer-norm test.
"""
from numba import cuda

ROW_THREADS = 64  # the widest row block: a power of two, since the tree reduction halves it


def row_threads(E):
    """Threads per row block for rows of E elements: the power of two that gives each thread
    about two elements, at most ROW_THREADS (then each thread strides over E / ROW_THREADS)."""
    threads = 1
    while threads < ROW_THREADS and 2 * threads < E:
        threads *= 2
    return threads


@cuda.jit(device=True)
def block_sum(scratch, value):
    """Sum ``value`` over the block's threads (a power of two, at most ROW_THREADS of them);
    every thread gets the total.

    ``scratch`` is a float64 shared array of ROW_THREADS elements, free for reuse on return.
    """
    t = cuda.threadIdx.x
    scratch[t] = value
    cuda.syncthreads()
    stride = cuda.blockDim.x // 2
    while stride > 0:
        if t < stride:
            scratch[t] += scratch[t + stride]
        cuda.syncthreads()
        stride //= 2
    total = scratch[0]
    cuda.syncthreads()
    return total
