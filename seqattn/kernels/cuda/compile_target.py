"""What the real CUDA compiler accepts that Numba's CUDA simulator does not.

The simulator (``NUMBA_ENABLE_CUDASIM=1``, used in CI without a GPU) runs kernels as Python and
rejects some compile-time hints of the real compiler; kernels ask here instead of branching.
"""
from numba import cuda
from numba.core import config

ON_SIMULATOR = bool(config.ENABLE_CUDASIM)

# Alignment of shared arrays read with vector loads (16 bytes: one float4 / double2).
VECTOR_ALIGNMENT = None if ON_SIMULATOR else 16


def jit_options(**options):
    """``options`` for ``cuda.jit`` (e.g. ``launch_bounds``), or none under the simulator."""
    return {} if ON_SIMULATOR else options


# The simulator has no warp shuffles, so kernels exchange values between lanes with
# :func:`shuffle_xor`, which there exchanges values through a shared array of one element per
# thread of the block (see :func:`shuffle_scratch_size`; a placeholder of 1 on a GPU).
FULL_WARP = 0xFFFFFFFF  # every lane of the warp takes part in a shuffle


def shuffle_scratch_size(threads):
    """Elements of the shared scratch array a block of ``threads`` gives :func:`shuffle_xor`."""
    return threads if ON_SIMULATOR else 1


if ON_SIMULATOR:
    @cuda.jit(device=True)
    def shuffle_xor(value, lane_mask, scratch):
        """The value of the thread whose index is this one's xor ``lane_mask`` (called by every
        thread of the block: here it waits at two barriers)."""
        t = cuda.threadIdx.x
        scratch[t] = value
        cuda.syncthreads()
        other = scratch[t ^ lane_mask]
        cuda.syncthreads()
        return other
else:
    @cuda.jit(device=True)
    def shuffle_xor(value, lane_mask, scratch):
        """The value of the lane whose index is this one's xor ``lane_mask`` (every lane of the
        warp calls it)."""
        return cuda.shfl_xor_sync(FULL_WARP, value, lane_mask)
