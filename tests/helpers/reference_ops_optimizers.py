"""Plain NumPy references for the optimizer updates: torch.optim's SGD, Adam and AdamW rules as
its documentation states them, run over a sequence of gradients; the same steps by torch.optim
itself (where installed); and the squared global norm.

Each takes param (P...) and grads (S, P...), the gradient of each of S steps (each multiplied by
``grad_scale`` first, as clipping does), and returns the state after the last step stacked as
(k, P...): (param, velocity) for SGD, (param, exp_avg, exp_avg_sq) for Adam. They compute in the
dtype of their inputs, like the other references.
"""
import numpy as np


def sgd_steps(param, grads, lr, momentum=0.0, weight_decay=0.0, nesterov=False, grad_scale=1.0):
    param, velocity = param.copy(), np.zeros_like(param)
    for step, grad in enumerate(grads):
        g = grad * grad_scale + weight_decay * param
        if momentum:
            # torch: the buffer starts as the first gradient, then b = momentum b + g
            velocity = g if step == 0 else momentum * velocity + g
            g = g + momentum * velocity if nesterov else velocity
        param = param - lr * g
    return np.stack([param, velocity])


def adam_steps(param, grads, lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0,
               decoupled_weight_decay=False, grad_scale=1.0):
    beta1, beta2 = betas
    param, m, v = param.copy(), np.zeros_like(param), np.zeros_like(param)
    for t, grad in enumerate(grads, start=1):
        g = grad * grad_scale
        if decoupled_weight_decay:
            param = param * (1 - lr * weight_decay)
        else:
            g = g + weight_decay * param
        m = beta1 * m + (1 - beta1) * g
        v = beta2 * v + (1 - beta2) * g * g
        m_hat, v_hat = m / (1 - beta1**t), v / (1 - beta2**t)
        param = param - lr * m_hat / (np.sqrt(v_hat) + eps)
    return np.stack([param, m, v])


def sum_of_squares(a, b):
    """The squared global norm of two arrays, summed in float64 as the op does."""
    return np.array(sum((x.astype(np.float64) ** 2).sum() for x in (a, b)))


def _torch_steps(optimizer_class, state_names, param, grads, grad_scale, **options):
    import torch

    p = torch.nn.Parameter(param.clone())
    optimizer = optimizer_class([p], **options)
    for grad in grads:
        p.grad = grad * grad_scale
        optimizer.step()
    # SGD without momentum keeps no buffer; its velocity stays zero
    state = [optimizer.state[p].get(name) for name in state_names]
    return torch.stack([p.detach()] + [torch.zeros_like(p) if s is None else s for s in state])


def torch_sgd_steps(param, grads, lr, momentum=0.0, weight_decay=0.0, nesterov=False,
                    grad_scale=1.0):
    import torch

    return _torch_steps(torch.optim.SGD, ["momentum_buffer"], param, grads, grad_scale, lr=lr,
                        momentum=momentum, weight_decay=weight_decay, nesterov=nesterov)


def torch_adam_steps(param, grads, lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0,
                     decoupled_weight_decay=False, grad_scale=1.0):
    import torch

    optimizer_class = torch.optim.AdamW if decoupled_weight_decay else torch.optim.Adam
    return _torch_steps(optimizer_class, ["exp_avg", "exp_avg_sq"], param, grads, grad_scale,
                        lr=lr, betas=betas, eps=eps, weight_decay=weight_decay)
