"""SGD with momentum, Adam and AdamW: torch.optim's update rules, run by the CPU or CUDA update
kernels on each parameter where it lives.

An optimizer holds (name, Parameter) pairs, per-parameter state arrays on the parameters' device
(create it after moving the model), the learning rate (a schedule may set ``lr`` before each
step) and ``steps``, the number of steps taken, which is the schedule's position. Its
``state_dict`` (host arrays plus JSON-able settings) makes checkpoints resume exactly.
"""
import numpy as np

from .. import ops
from ..nn.module import Module
from ..nn.placement import moved
from ..backend import CPU, device_of
from ..ops.optimizers import AdamManyParameters


def _named_parameters(params):
    if isinstance(params, Module):
        return list(params.named_parameters())
    params = list(params)
    if params and not isinstance(params[0], tuple):
        return [(str(i), p) for i, p in enumerate(params)]
    return params


def _zeros_like(data):
    return moved(np.zeros(data.shape, dtype=data.dtype), device_of(data))


class Optimizer:
    """Base: subclasses name their ``slots`` (state arrays per parameter) and ``_update``."""

    slots = ()

    def __init__(self, params, lr):
        if not lr > 0:
            raise ValueError(f"lr must be positive, got {lr!r}")
        self.params = _named_parameters(params)
        if not self.params:
            raise ValueError("the optimizer got no parameters")
        self.lr = float(lr)
        self.steps = 0
        self.state = {name: {slot: _zeros_like(p.data) for slot in self.slots}
                      for name, p in self.params}

    def zero_grad(self):
        for _, p in self.params:
            ops.fill(p.grad, 0.0)

    def step(self, grad_scale=1.0):
        """Update every parameter from its gradient times ``grad_scale`` (a clipping factor)."""
        self.steps += 1
        for name, p in self.params:
            self._update(p, self.state[name], grad_scale)

    def hyperparameters(self):
        return {}

    def state_dict(self):
        """{"settings": JSON-able dict, "arrays": {"<param>.<slot>": host array}}."""
        arrays = {f"{name}.{slot}": np.array(moved(a, CPU))
                  for name, slots in self.state.items() for slot, a in slots.items()}
        settings = {"type": type(self).__name__, "lr": self.lr, "steps": self.steps,
                    **self.hyperparameters()}
        return {"settings": settings, "arrays": arrays}

    def load_state_dict(self, state):
        settings, arrays = state["settings"], state["arrays"]
        if settings["type"] != type(self).__name__:
            raise ValueError(f"the state is a {settings['type']}'s, not a "
                             f"{type(self).__name__}'s")
        expected = {f"{name}.{slot}" for name, slots in self.state.items() for slot in slots}
        if set(arrays) != expected:
            raise KeyError(f"optimizer state does not match the parameters: missing "
                           f"{sorted(expected - set(arrays))}, unexpected "
                           f"{sorted(set(arrays) - expected)}")
        for name, slots in self.state.items():
            for slot, current in slots.items():
                value = np.ascontiguousarray(arrays[f"{name}.{slot}"], dtype=current.dtype)
                if value.shape != tuple(current.shape):
                    raise ValueError(f"{name}.{slot} has shape {value.shape}; expected "
                                     f"{tuple(current.shape)}")
                slots[slot] = moved(value, device_of(current))
        self.lr, self.steps = float(settings["lr"]), int(settings["steps"])
        return self


class SGD(Optimizer):
    """Stochastic gradient descent with optional momentum, Nesterov momentum and L2 weight
    decay, as torch.optim.SGD: ``v = momentum * v + (g + weight_decay * p)``, ``p -= lr * v``.

    Parameters
    ----------
    params : Module or iterable of Parameter
        What to optimize: a model (its named parameters) or its parameters.
    lr : float
        The learning rate (a schedule given to ``fit`` overrides it step by step).
    momentum : float, default 0.0
        Factor of the running velocity.
    weight_decay : float, default 0.0
        L2 penalty added to the gradient.
    nesterov : bool, default False
        Nesterov momentum (needs ``momentum > 0``).
    """

    slots = ("velocity",)

    def __init__(self, params, lr, momentum=0.0, weight_decay=0.0, nesterov=False):
        if nesterov and momentum == 0:
            raise ValueError("nesterov=True needs a momentum > 0")
        self.momentum, self.weight_decay, self.nesterov = momentum, weight_decay, nesterov
        super().__init__(params, lr)

    def hyperparameters(self):
        return {"momentum": self.momentum, "weight_decay": self.weight_decay,
                "nesterov": self.nesterov}

    def _update(self, p, state, grad_scale):
        ops.sgd_step(p.data, p.grad, state["velocity"], lr=self.lr, momentum=self.momentum,
                     weight_decay=self.weight_decay, nesterov=self.nesterov,
                     grad_scale=grad_scale)


class Adam(Optimizer):
    """Adam (Kingma and Ba) with bias correction, as torch.optim.Adam.

    Parameters
    ----------
    params : Module or iterable of Parameter
        What to optimize: a model (its named parameters) or its parameters.
    lr : float, default 1e-3
        The learning rate (a schedule given to ``fit`` overrides it step by step).
    betas : tuple of float, default (0.9, 0.999)
        Decay rates of the running mean and mean square of the gradients.
    eps : float, default 1e-8
        Added to the root mean square in the denominator.
    weight_decay : float, default 0.0
        L2 penalty added to the gradient (see :class:`AdamW` for decoupled decay).
    """

    slots = ("exp_avg", "exp_avg_sq")
    decoupled = False

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0):
        self.betas, self.eps, self.weight_decay = tuple(betas), eps, weight_decay
        self._many = None  # the one-launch update, built at the first step (_together)
        super().__init__(params, lr)

    def hyperparameters(self):
        return {"betas": list(self.betas), "eps": self.eps, "weight_decay": self.weight_decay}

    def step(self, grad_scale=1.0):
        """Update every parameter from its gradient times ``grad_scale`` (a clipping factor):
        in one launch where parameters, states and gradients are NumPy arrays of one float
        dtype (C-contiguous), else one per parameter; the same bits either way."""
        together = self._together()
        grads = [p.grad for _, p in self.params]
        if together is None or not together.takes(grads):
            return super().step(grad_scale)
        self.steps += 1
        together.step(grads, step=self.steps, lr=self.lr,
                      betas=self.betas, eps=self.eps, weight_decay=self.weight_decay,
                      decoupled_weight_decay=self.decoupled, grad_scale=grad_scale)

    def _together(self):
        """The one-launch update of all parameters (built again when a parameter or a state
        array was replaced: a moved model, a loaded state), or None where it does not apply."""
        arrays = ([p.data for _, p in self.params],
                  [self.state[name]["exp_avg"] for name, _ in self.params],
                  [self.state[name]["exp_avg_sq"] for name, _ in self.params])
        if self._many is not None and self._many.holds(*arrays):
            return self._many
        dtype = arrays[0][0].dtype
        if not all(isinstance(x, np.ndarray) and x.dtype == dtype and x.flags.c_contiguous
                   for group in arrays for x in group):
            self._many = None
            return None
        self._many = AdamManyParameters(*arrays)
        return self._many

    def _update(self, p, state, grad_scale):
        ops.adam_step(p.data, p.grad, state["exp_avg"], state["exp_avg_sq"], step=self.steps,
                      lr=self.lr, betas=self.betas, eps=self.eps,
                      weight_decay=self.weight_decay,
                      decoupled_weight_decay=self.decoupled, grad_scale=grad_scale)


class AdamW(Adam):
    """Adam with decoupled weight decay (Loshchilov and Hutter), as torch.optim.AdamW: the
    weights shrink by ``p *= 1 - lr * weight_decay`` before each Adam step.

    Parameters
    ----------
    params : Module or iterable of Parameter
        What to optimize: a model (its named parameters) or its parameters.
    lr : float, default 1e-3
        The learning rate (a schedule given to ``fit`` overrides it step by step).
    betas : tuple of float, default (0.9, 0.999)
        Decay rates of the running mean and mean square of the gradients.
    eps : float, default 1e-8
        Added to the root mean square in the denominator.
    weight_decay : float, default 0.01
        The decoupled decay rate.
    """

    decoupled = True

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01):
        super().__init__(params, lr, betas, eps, weight_decay)
