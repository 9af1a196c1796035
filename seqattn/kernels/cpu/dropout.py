"""Inverted dropout on the CPU with a counter-based mask that backward recomputes, never stores.

Arrays are flat. Element i is kept when uniform(seed, i) >= p and then scaled by 1 / (1 - p);
the CUDA twin draws the same mask for the same seed.
"""
from numba import prange

from .. import scalar_math
from .jit_options import njit
from .threads import sized_kernel

# Elements a thread must have before a launch takes it (benchmarks/small_launches.py).
GRAIN = 1 << 13

_uniform = njit(inline="always")(scalar_math.uniform_from_counter)


@sized_kernel(GRAIN)
def dropout_forward(out, x, p, seed):
    keep_scale = 1.0 / (1.0 - p)
    for i in prange(x.size):
        out[i] = x[i] * keep_scale if _uniform(seed, i) >= p else 0.0


@sized_kernel(GRAIN)
def dropout_backward(dx, dout, p, seed):
    # out = x * keep / (1 - p)  ->  dx = dout * keep / (1 - p), with the same keep mask
    keep_scale = 1.0 / (1.0 - p)
    for i in prange(dout.size):
        dx[i] = dout[i] * keep_scale if _uniform(seed, i) >= p else 0.0
