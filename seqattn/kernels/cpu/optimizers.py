"""Optimizer updates on the CPU, in place on flat parameter arrays, and the squared norm that
gradient clipping needs.

Shapes: param, grad and the state arrays (velocity; Adam's first and second moments) are flat
(P,) views of one parameter. ``grad_scale`` multiplies the gradient before anything else (the
clipping factor), so clipping never rewrites the gradients. The formulas are torch.optim's.

:func:`_adam_update_many` updates every parameter of a model in one launch: the arrays are named
by their addresses in a table (so one compiled kernel serves any number of parameters), and the
work is split into pieces of at most PIECE elements of one parameter each. Each element goes
through the same :func:`_adam_element` as in :func:`adam_update`: the same bits either way.
"""
import math

import numpy as np
from numba import carray, prange, types
from numba.extending import intrinsic

from .jit_options import njit
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


@njit(inline="always")
def _adam_element(param, exp_avg, exp_avg_sq, grad, i, lr, beta1, beta2, eps, weight_decay,
                  decoupled, step_size, sqrt_correction2, grad_scale):
    g = grad[i] * grad_scale
    if decoupled:
        param[i] *= 1.0 - lr * weight_decay  # AdamW: decay the weight, not the gradient
    else:
        g += weight_decay * param[i]  # Adam: L2 penalty folded into the gradient
    exp_avg[i] = beta1 * exp_avg[i] + (1.0 - beta1) * g
    exp_avg_sq[i] = beta2 * exp_avg_sq[i] + (1.0 - beta2) * g * g
    param[i] -= step_size * exp_avg[i] / (math.sqrt(exp_avg_sq[i]) / sqrt_correction2 + eps)


@sized_kernel(GRAIN)
def adam_update(param, exp_avg, exp_avg_sq, grad, lr, beta1, beta2, eps, weight_decay,
                decoupled, bias_correction1, bias_correction2, grad_scale):
    step_size = lr / bias_correction1
    sqrt_correction2 = math.sqrt(bias_correction2)
    for i in prange(param.size):
        _adam_element(param, exp_avg, exp_avg_sq, grad, i, lr, beta1, beta2, eps, weight_decay,
                      decoupled, step_size, sqrt_correction2, grad_scale)


# Elements per piece of _adam_update_many's work: whole parameters below it, so a small model's
# update is one piece per parameter; a thread takes a piece at a time.
PIECE = GRAIN
# Columns of _adam_update_many's address table.
PARAM, EXP_AVG, EXP_AVG_SQ, GRAD = range(4)


@intrinsic
def _pointer_at(typingctx, address, like):
    """The integer ``address`` as a pointer to elements of ``like``'s dtype."""
    if not isinstance(like, types.Array) or not isinstance(address, types.Integer):
        return None
    pointer = types.CPointer(like.dtype)

    def codegen(context, builder, signature, args):
        return builder.inttoptr(args[0], context.get_value_type(pointer))
    return pointer(address, like), codegen


@njit(inline="always")
def _array_at(addresses, t, column, size, like):
    return carray(_pointer_at(addresses[t, column], like), size)


@sized_kernel(GRAIN, work=lambda pieces, addresses, sizes, like, elements, *options: elements)
def _adam_update_many(pieces, addresses, sizes, like, elements, lr, beta1, beta2, eps,
                     weight_decay, decoupled, bias_correction1, bias_correction2, grad_scale):
    """adam_update of every parameter t in one launch (CPU only: the GPU's launches take
    their arrays one by one; hence private, called by seqattn.ops.optimizers). addresses (T, 4) int64: the data of
    param, exp_avg, exp_avg_sq and grad of parameter t (C-contiguous, of ``like``'s dtype, as
    many elements as sizes[t], alive for the call); pieces (S, 3) int64: (t, start, stop) of
    each piece of the work; elements: their total (the launch's size)."""
    step_size = lr / bias_correction1
    sqrt_correction2 = math.sqrt(bias_correction2)
    for s in prange(pieces.shape[0]):
        t, start, stop = pieces[s, 0], pieces[s, 1], pieces[s, 2]
        param = _array_at(addresses, t, PARAM, sizes[t], like)
        exp_avg = _array_at(addresses, t, EXP_AVG, sizes[t], like)
        exp_avg_sq = _array_at(addresses, t, EXP_AVG_SQ, sizes[t], like)
        grad = _array_at(addresses, t, GRAD, sizes[t], like)
        _adam_range(param, exp_avg, exp_avg_sq, grad, start, stop, lr, beta1, beta2, eps,
                    weight_decay, decoupled, step_size, sqrt_correction2, grad_scale)


@njit(cache=True)
def _adam_range(param, exp_avg, exp_avg_sq, grad, start, stop, lr, beta1, beta2, eps,
                weight_decay, decoupled, step_size, sqrt_correction2, grad_scale):
    """_adam_element for the elements [start, stop), on views that start there: an index
    start + i, which Numba cannot prove non-negative, gets a wraparound check per element that
    kept the loop off the vector path (3.5x slower, measured)."""
    param, exp_avg = param[start:stop], exp_avg[start:stop]
    exp_avg_sq, grad = exp_avg_sq[start:stop], grad[start:stop]
    for i in range(stop - start):
        _adam_element(param, exp_avg, exp_avg_sq, grad, i, lr, beta1, beta2, eps,
                      weight_decay, decoupled, step_size, sqrt_correction2, grad_scale)


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
