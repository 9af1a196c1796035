"""Optimizer updates on the GPU; same launchers and semantics as ``kernels/cpu/optimizers``.

One thread per parameter element; the squared norm sums a strided slice per thread, then a
block-wide tree sum per block, and the block sums are added in block order (no atomics: the
clipping factor, and so the step, is the same every run).
"""
import math

from numba import cuda, float64

from .block_reduce import ROW_THREADS, block_sum
from .grid import THREADS, blocks_for
from .reductions import add_strip_sums, strip_partials

MAX_NORM_BLOCKS = 256  # enough blocks to fill a GPU; each then loops over its stride


@cuda.jit(cache=True)
def sgd_update_kernel(param, velocity, grad, lr, momentum, weight_decay, nesterov, grad_scale):
    i = cuda.grid(1)
    if i >= param.size:
        return
    g = grad[i] * grad_scale + weight_decay * param[i]
    if momentum != 0.0:
        velocity[i] = momentum * velocity[i] + g
        g = g + momentum * velocity[i] if nesterov else velocity[i]
    param[i] -= lr * g


@cuda.jit(cache=True)
def adam_update_kernel(param, exp_avg, exp_avg_sq, grad, lr, beta1, beta2, eps, weight_decay,
                       decoupled, bias_correction1, bias_correction2, grad_scale):
    i = cuda.grid(1)
    if i >= param.size:
        return
    g = grad[i] * grad_scale
    if decoupled:
        param[i] *= 1.0 - lr * weight_decay
    else:
        g += weight_decay * param[i]
    exp_avg[i] = beta1 * exp_avg[i] + (1.0 - beta1) * g
    exp_avg_sq[i] = beta2 * exp_avg_sq[i] + (1.0 - beta2) * g * g
    step_size = lr / bias_correction1
    param[i] -= step_size * exp_avg[i] / (math.sqrt(exp_avg_sq[i]) / math.sqrt(bias_correction2)
                                          + eps)


@cuda.jit(cache=True)
def sum_of_squares_kernel(block_totals, x):
    scratch = cuda.shared.array(ROW_THREADS, float64)
    partial = 0.0
    for i in range(cuda.grid(1), x.size, cuda.gridsize(1)):
        partial += float64(x[i]) * float64(x[i])
    block_total = block_sum(scratch, partial)
    if cuda.threadIdx.x == 0:
        block_totals[cuda.blockIdx.x, 0] = block_total


def sgd_update(param, velocity, grad, lr, momentum, weight_decay, nesterov, grad_scale):
    sgd_update_kernel[blocks_for(param.size), THREADS](param, velocity, grad, lr, momentum,
                                                      weight_decay, nesterov, grad_scale)


def adam_update(param, exp_avg, exp_avg_sq, grad, lr, beta1, beta2, eps, weight_decay,
                decoupled, bias_correction1, bias_correction2, grad_scale):
    adam_update_kernel[blocks_for(param.size), THREADS](
        param, exp_avg, exp_avg_sq, grad, lr, beta1, beta2, eps, weight_decay, decoupled,
        bias_correction1, bias_correction2, grad_scale)


def add_sum_of_squares(total, x):
    """total (1,) float64 += sum of x (P,) squared."""
    blocks = min(MAX_NORM_BLOCKS, blocks_for(x.size, ROW_THREADS))
    block_totals = strip_partials(blocks, 1)
    sum_of_squares_kernel[blocks, ROW_THREADS](block_totals, x)
    add_strip_sums(total, block_totals)
