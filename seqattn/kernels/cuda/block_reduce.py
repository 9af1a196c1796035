"""Block-wide sums for CUDA kernels that give one block of ROW_THREADS threads to each row."""
from numba import cuda

ROW_THREADS = 64  # a power of two: the tree reduction halves it


@cuda.jit(device=True)
def block_sum(scratch, value):
    """Sum ``value`` over the block's threads; every thread gets the total.

    ``scratch`` is a float64 shared array of ROW_THREADS elements, free for reuse on return.
    """
    t = cuda.threadIdx.x
    scratch[t] = value
    cuda.syncthreads()
    stride = ROW_THREADS // 2
    while stride > 0:
        if t < stride:
            scratch[t] += scratch[t + stride]
        cuda.syncthreads()
        stride //= 2
    total = scratch[0]
    cuda.syncthreads()
    return total

