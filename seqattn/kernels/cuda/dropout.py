"""Inverted dropout on the GPU; same launchers, semantics and masks as ``kernels/cpu/dropout``."""
from numba import cuda

from .. import scalar_math
from .grid import THREADS, blocks_for

_uniform = cuda.jit(device=True)(scalar_math.uniform_from_counter)


@cuda.jit(cache=True)
def dropout_forward_kernel(out, x, p, seed):
    i = cuda.grid(1)
    if i < x.size:
        out[i] = x[i] * (1.0 / (1.0 - p)) if _uniform(seed, i) >= p else 0.0


@cuda.jit(cache=True)
def dropout_backward_kernel(dx, dout, p, seed):
    # out = x * keep / (1 - p)  ->  dx = dout * keep / (1 - p), with the same keep mask
    i = cuda.grid(1)
    if i < dout.size:
        dx[i] = dout[i] * (1.0 / (1.0 - p)) if _uniform(seed, i) >= p else 0.0


def dropout_forward(out, x, p, seed):
    dropout_forward_kernel[blocks_for(x.size), THREADS](out, x, p, seed)


def dropout_backward(dx, dout, p, seed):
    dropout_backward_kernel[blocks_for(dout.size), THREADS](dx, dout, p, seed)
