"""What the real CUDA compiler accepts that Numba's CUDA simulator does not.

The simulator (``NUMBA_ENABLE_CUDASIM=1``, used in CI without a GPU) runs kernels as Python and
rejects some compile-time hints of the real compiler; kernels ask here instead of branching.
"""
from numba.core import config

ON_SIMULATOR = bool(config.ENABLE_CUDASIM)

# Alignment of shared arrays read with vector loads (16 bytes: one float4 / double2).
VECTOR_ALIGNMENT = None if ON_SIMULATOR else 16


def jit_options(**options):
    """``options`` for ``cuda.jit`` (e.g. ``launch_bounds``), or none under the simulator."""
    return {} if ON_SIMULATOR else options
