"""Optimizer updates, in place; ``grad_scale`` is the clipping factor. And the global squared
gradient norm that clipping reads."""
import numpy as np

from ..backend import CPU, backend_of, empty_like_on, kernels_for
from .arrays import fill
from .checks import flat, shape_of


def _updatable_flat(device, name, x, like):
    # the callers' backend_of over all the arrays has put them on one device already
    if shape_of(x) != shape_of(like):
        raise ValueError(f"{name} has shape {shape_of(x)}; expected the parameter's "
                         f"{shape_of(like)} on its device")
    if device == CPU and not x.flags.c_contiguous:
        why = "the kernels read it as one flat array" if name == "grad" else "it is updated in place"
        raise ValueError(f"{name} must be C-contiguous: {why}")
    return flat(x)


def sgd_step(param, grad, velocity, *, lr, momentum=0.0, weight_decay=0.0, nesterov=False,
             grad_scale=1.0):
    """In place: one SGD step of ``param``, as torch.optim.SGD.

    Parameters
    ----------
    param : array
        The parameter, updated in place, on the CPU (NumPy) or the GPU (numba.cuda device array).
    grad : array
        Its gradient.
    velocity : array
        The momentum buffer, updated in place.
    lr : float
        The learning rate.
    momentum : float, default 0.0
        Factor of the running velocity.
    weight_decay : float, default 0.0
        L2 penalty added to the gradient.
    nesterov : bool, default False
        Nesterov momentum.
    grad_scale : float, default 1.0
        Multiplies the gradient first (gradient clipping's factor).
    """
    device = backend_of(param=param, grad=grad, velocity=velocity)
    arrays = [_updatable_flat(device, n, x, param)
              for n, x in (("param", param), ("velocity", velocity), ("grad", grad))]
    if param.size:
        kernels_for(device, "optimizers").sgd_update(*arrays, float(lr), float(momentum),
                                                     float(weight_decay), bool(nesterov),
                                                     float(grad_scale))


def adam_step(param, grad, exp_avg, exp_avg_sq, *, step, lr, betas=(0.9, 0.999), eps=1e-8,
              weight_decay=0.0, decoupled_weight_decay=False, grad_scale=1.0):
    """In place: Adam step number ``step`` of ``param``, as torch.optim.Adam, or AdamW with
    ``decoupled_weight_decay``.

    Parameters
    ----------
    param : array
        The parameter, updated in place, on the CPU (NumPy) or the GPU (numba.cuda device array).
    grad : array
        Its gradient.
    exp_avg, exp_avg_sq : arrays
        The running mean and mean square of the gradient, updated in place.
    step : int
        The step number, 1, 2, ... (for the bias correction).
    lr : float
        The learning rate.
    betas : tuple of float, default (0.9, 0.999)
        Decay rates of the running mean and mean square.
    eps : float, default 1e-8
        Added to the root mean square.
    weight_decay : float, default 0.0
        The decay rate: an L2 penalty, or decoupled with ``decoupled_weight_decay``.
    decoupled_weight_decay : bool, default False
        AdamW's decay: ``param *= 1 - lr * weight_decay`` before the step.
    grad_scale : float, default 1.0
        Multiplies the gradient first (gradient clipping's factor).
    """
    if not isinstance(step, (int, np.integer)) or step < 1:
        raise ValueError(f"step must be the step number 1, 2, ... (bias correction divides by "
                         f"1 - beta ** step), got {step!r}")
    device = backend_of(param=param, grad=grad, exp_avg=exp_avg, exp_avg_sq=exp_avg_sq)
    arrays = [_updatable_flat(device, n, x, param)
              for n, x in (("param", param), ("exp_avg", exp_avg), ("exp_avg_sq", exp_avg_sq),
                           ("grad", grad))]
    beta1, beta2 = (float(b) for b in betas)
    if param.size:
        kernels_for(device, "optimizers").adam_update(
            *arrays, float(lr), beta1, beta2, float(eps), float(weight_decay),
            bool(decoupled_weight_decay), 1.0 - beta1 ** step, 1.0 - beta2 ** step,
            float(grad_scale))


def sum_of_squares(arrays):
    """The sum of squares of all elements of ``arrays``: the squared global norm that gradient
    clipping uses.

    Parameters
    ----------
    arrays : iterable of arrays
        Arrays on one device.

    Returns
    -------
    float
        The sum, accumulated in float64, as a host float.
    """
    arrays = list(arrays)
    device = backend_of(**{f"arrays[{i}]": x for i, x in enumerate(arrays)})
    total = empty_like_on(device, (1,), np.float64)
    fill(total, 0.0)
    kernels = kernels_for(device, "optimizers")
    for x in arrays:
        if x.size:
            kernels.add_sum_of_squares(total, flat(x))
    return float(total[0] if device == CPU else total.copy_to_host()[0])
