"""Optimizer updates on the CPU, in place on flat parameter arrays, and the squared norm that
gradient clipping needs.

Shapes: param, grad and the state arrays (velocity; Adam's first and second moments) are flat
(P,) views of one parameter. ``grad_scale`` multiplies the gradient before anything else (the
clipping factor), so clipping never rewrites the gradients. The formulas are torch.optim's.
"""
import math

import numpy as np
from numba import prange

from .threads import sized_kernel

# Elements a thread must have before a launch takes it (benchmarks/small_launches.py).
GRAIN = 1 << 13


@sized_kernel(GRAIN)
def sgd_update(param, velocity, grad, lr, momentum, weight_decay, nesterov, grad_scale):
    for i in prange(param.size):
        g = grad[i] * grad_scale + weight_decay * param[i]
        if momentum != 0.0:
            # torch starts the buffer at the first gradient: with zeros and no dampening the
            # first update m * 0 + g is the same.
            velocity[i] = momentum * velocity[i] + g
            g = g + momentum * velocity[i] if nesterov else velocity[i]
        param[i] -= lr * g


@sized_kernel(GRAIN)
def adam_update(param, exp_avg, exp_avg_sq, grad, lr, beta1, beta2, eps, weight_decay,
                decoupled, bias_correction1, bias_correction2, grad_scale):
    step_size = lr / bias_correction1
    sqrt_correction2 = math.sqrt(bias_correction2)
    for i in prange(param.size):
        g = grad[i] * grad_scale
        if decoupled:
            param[i] *= 1.0 - lr * weight_decay  # AdamW: decay the weight, not the gradient
        else:
            g += weight_decay * param[i]  # Adam: L2 penalty folded into the gradient
        exp_avg[i] = beta1 * exp_avg[i] + (1.0 - beta1) * g
        exp_avg_sq[i] = beta2 * exp_avg_sq[i] + (1.0 - beta2) * g * g
        param[i] -= step_size * exp_avg[i] / (math.sqrt(exp_avg_sq[i]) / sqrt_correction2 + eps)


@sized_kernel(GRAIN)
def _sum_of_squares(x):
    total = 0.0
    for i in prange(x.size):
        # np.float64, not float(): Numba's float() keeps a float32 a float32
        # (test_sum_of_squares_of_float32_arrays_squares_in_float64)
        value = np.float64(x[i])
        total += value * value
    return total


def add_sum_of_squares(total, x):
    """total (1,) float64 += sum of x (P,) squared."""
    total[0] += _sum_of_squares(x)
