"""Optimizer updates, in place; ``grad_scale`` is the clipping factor. And the global squared
gradient norm that clipping reads."""
import numpy as np

from ..backend import CPU, backend_of, empty_like_on, kernels_for
from .arrays import fill
from .checks import flat, shape_of


def _updatable_flat(device, name, x, like):
    if device != backend_of(**{name: x, "param": like}) or shape_of(x) != shape_of(like):
        raise ValueError(f"{name} has shape {shape_of(x)}; expected the parameter's "
                         f"{shape_of(like)} on its device")
    if device == CPU and not x.flags.c_contiguous:
        why = "the kernels read it as one flat array" if name == "grad" else "it is updated in place"
        raise ValueError(f"{name} must be C-contiguous: {why}")
    return flat(x)


def sgd_step(param, grad, velocity, *, lr, momentum=0.0, weight_decay=0.0, nesterov=False,
             grad_scale=1.0):
    """In place: one SGD step of ``param`` (momentum buffer ``velocity``), as torch.optim.SGD."""
    device = backend_of(param=param, grad=grad, velocity=velocity)
    arrays = [_updatable_flat(device, n, x, param)
              for n, x in (("param", param), ("velocity", velocity), ("grad", grad))]
    if param.size:
        kernels_for(device, "optimizers").sgd_update(*arrays, float(lr), float(momentum),
                                                     float(weight_decay), bool(nesterov),
                                                     float(grad_scale))


def adam_step(param, grad, exp_avg, exp_avg_sq, *, step, lr, betas=(0.9, 0.999), eps=1e-8,
              weight_decay=0.0, decoupled_weight_decay=False, grad_scale=1.0):
    """In place: Adam step number ``step`` (1, 2, ...) of ``param``, as torch.optim.Adam, or
    AdamW with ``decoupled_weight_decay``."""
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
    """Sum of squares of all elements of ``arrays`` (one device), in float64, as a host float:
    the squared global norm that gradient clipping uses."""
    arrays = list(arrays)
    device = backend_of(**{f"arrays[{i}]": x for i, x in enumerate(arrays)})
    total = empty_like_on(device, (1,), np.float64)
    fill(total, 0.0)
    kernels = kernels_for(device, "optimizers")
    for x in arrays:
        if x.size:
            kernels.add_sum_of_squares(total, flat(x))
    return float(total[0] if device == CPU else total.copy_to_host()[0])
