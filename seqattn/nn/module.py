"""The base of every layer: parameters with gradients, submodules, modes, devices, state dicts.

A module's ``forward`` caches what its ``backward`` needs, only in training mode; ``backward``
takes the gradient of the loss with respect to the output, returns the gradients with respect to
the inputs and adds the parameter gradients into ``param.grad``. Attributes holding a
:class:`Parameter` or a :class:`Module` are registered under their attribute names, which follow
torch.nn so that state dicts move between the two.
"""
import inspect
from collections import OrderedDict

import numpy as np

from .. import ops
from ..backend import CPU, device_of
from .parameter import Parameter
from .placement import cast, check_same_device, moved


class Module:
    def __new__(cls, *args, **kwargs):
        module = super().__new__(cls)
        # The constructor arguments, kept so that a saved model can be rebuilt from its config.
        # bind_partial: copy.deepcopy creates instances with no arguments and restores __dict__.
        bound = inspect.signature(cls.__init__).bind_partial(module, *args, **kwargs)
        bound.apply_defaults()
        arguments = dict(bound.arguments)
        arguments.pop("self")
        object.__setattr__(module, "_config", arguments)
        return module

    def __init__(self):
        object.__setattr__(self, "_parameters", OrderedDict())
        object.__setattr__(self, "_modules", OrderedDict())
        object.__setattr__(self, "_buffers", OrderedDict())
        object.__setattr__(self, "training", True)
        object.__setattr__(self, "_saved", None)

    def __setattr__(self, name, value):
        if isinstance(value, Parameter):
            self._parameters[name] = value
        elif isinstance(value, Module):
            self._modules[name] = value
        object.__setattr__(self, name, value)

    def register_buffer(self, name, array):
        """A derived array (a positional table) that moves with the module but is not saved."""
        self._buffers[name] = array
        object.__setattr__(self, name, array)

    # -- running ---------------------------------------------------------------------------

    def __call__(self, *args, **kwargs):
        return self.forward(*args, **kwargs)

    def forward(self, *args, **kwargs):
        raise NotImplementedError(f"{type(self).__name__} does not define forward")

    def backward(self, *grads):
        raise NotImplementedError(f"{type(self).__name__} does not define backward")

    def save_for_backward(self, **arrays):
        """Keep what backward needs, only in training mode (evaluation keeps nothing)."""
        object.__setattr__(self, "_saved", arrays if self.training else None)

    def saved(self):
        """What the last training-mode forward kept; an error if there is none."""
        if self._saved is None:
            raise RuntimeError(f"{type(self).__name__}.backward needs a forward in training mode "
                               "first (call .train() before the forward pass)")
        return self._saved

    def check_device(self, **arrays):
        """A clear error when an input is not on this module's device."""
        check_same_device(type(self).__name__, self.device, **arrays)

    # -- structure -------------------------------------------------------------------------

    def named_modules(self, prefix=""):
        yield prefix, self
        for name, child in self._modules.items():
            yield from child.named_modules(f"{prefix}.{name}" if prefix else name)

    def named_parameters(self, prefix=""):
        for module_name, module in self.named_modules(prefix):
            for name, param in module._parameters.items():
                yield (f"{module_name}.{name}" if module_name else name), param

    def parameters(self):
        return [p for _, p in self.named_parameters()]

    def zero_grad(self):
        for p in self.parameters():
            ops.fill(p.grad, 0.0)

    def train(self, mode=True):
        for _, module in self.named_modules():
            object.__setattr__(module, "training", bool(mode))
            if not mode:
                object.__setattr__(module, "_saved", None)
        return self

    def eval(self):
        return self.train(False)

    # -- devices and dtypes ----------------------------------------------------------------

    @property
    def device(self):
        params = self.parameters()
        if params:
            return device_of(params[0].data)
        buffers = [b for _, m in self.named_modules() for b in m._buffers.values()]
        return device_of(buffers[0]) if buffers else CPU

    @property
    def dtype(self):
        params = self.parameters()
        return params[0].dtype if params else None

    def to(self, device=None, dtype=None):
        """Move every parameter, gradient and buffer to ``device`` and/or cast to ``dtype``."""
        for _, module in self.named_modules():
            module._saved = None
            for p in module._parameters.values():
                for attr in ("data", "grad"):
                    x = getattr(p, attr)
                    x = cast(x, dtype) if dtype is not None else x
                    setattr(p, attr, moved(x, device) if device is not None else x)
            for name, b in module._buffers.items():
                b = cast(b, dtype) if dtype is not None else b
                module.register_buffer(name, moved(b, device) if device is not None else b)
        return self

    # -- state -----------------------------------------------------------------------------

    def state_dict(self):
        """Parameter name -> NumPy array (a host copy), with torch.nn's names."""
        return OrderedDict((name, np.array(moved(p.data, CPU)))
                           for name, p in self.named_parameters())

    def load_state_dict(self, state, strict=True):
        """Copy arrays (NumPy, or anything np.asarray accepts, e.g. a torch state dict's tensors
        after ``.numpy()``) into the parameters, keeping this module's device and dtype."""
        params = dict(self.named_parameters())
        missing = sorted(set(params) - set(state))
        unexpected = sorted(set(state) - set(params))
        if strict and (missing or unexpected):
            raise KeyError(f"state dict does not match {type(self).__name__}: missing "
                           f"{missing}, unexpected {unexpected}")
        for name, value in state.items():
            if name not in params:
                continue
            p = params[name]
            value = np.asarray(value)
            if tuple(value.shape) != p.shape:
                raise ValueError(f"{name} has shape {tuple(value.shape)} in the state dict but "
                                 f"{p.shape} in the module")
            p.data = moved(np.ascontiguousarray(value, dtype=p.dtype), device_of(p.data))
        return self

    def __repr__(self):
        config = ", ".join(f"{k}={v!r}" for k, v in self._config.items()
                           if not isinstance(v, (Module, np.random.Generator)))
        return f"{type(self).__name__}({config})"
