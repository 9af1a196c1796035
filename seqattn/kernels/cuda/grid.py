"""Launch geometry shared by the CUDA kernel launchers."""

THREADS = 128  # threads per block of the 1-D kernels: enough warps to hide memory latency


def blocks_for(n, threads=THREADS):
    """Blocks needed to give each of n items one thread (at least one block)."""
    return max(1, (n + threads - 1) // threads)
