"""The base of every layer: parameters with gradients, submodules, modes, devices, state dicts.

A module defines ``forward`` only. Called on arrays, it runs ``forward`` on Tensors (see
``seqattn.autodiff``): every differentiable op there records itself, submodules called inside
return Tensors, and the module returns arrays again. ``backward(dout)`` then differentiates that
call: it returns the gradient with respect to the array input (a tuple for several positional
array inputs) and adds each parameter's gradient into ``param.grad``. In ``eval()`` mode and in
``autodiff.no_grad()`` nothing is recorded. Attributes holding a :class:`Parameter` or a
:class:`Module` are registered under their attribute names, which follow torch.nn so that state
dicts move between the two.

Threads: each thread keeps its own last recorded call, so a forward in one thread never
replaces what another thread's backward needs. ``train()`` and ``eval()`` set the mode for every
thread; ``with module.mode(False):`` sets it for the calling thread only (predict uses it, so a
model can predict in one thread while ``fit`` trains it in another).
"""
import inspect
import threading
import weakref
from collections import OrderedDict

import numpy as np

from .. import ops
from ..autodiff import Tensor, backward as run_backward
from ..autodiff.recording import (forward_scope, inside_forward, is_recording, mode_here, modes,
                                  recording)
from ..backend import CPU, device_of, is_device_array
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
        # names of the buffers state_dict saves, in the order registered (a dict keeps it)
        object.__setattr__(self, "_persistent", {})
        object.__setattr__(self, "_training", True)

    def __setattr__(self, name, value):
        if isinstance(value, Parameter):
            self._parameters[name] = value
        elif isinstance(value, Module):
            self._modules[name] = value
        object.__setattr__(self, name, value)

    def register_buffer(self, name, array, persistent=False):
        """An array that moves with the module but takes no gradient: a derived one (a
        positional table) is not saved; a ``persistent`` one (data the model holds, such as
        the neighbour path's reference samples) is, in ``state_dict`` beside the parameters."""
        self._buffers[name] = array
        if persistent:
            self._persistent[name] = True
        object.__setattr__(self, name, array)

    # -- running ---------------------------------------------------------------------------

    def __call__(self, *args, **kwargs):
        if inside_forward():  # a submodule: the outer call's scope marks the forward already
            return self.forward(*args, **kwargs)
        if _holds_tensor(args, kwargs):
            with forward_scope():
                return self.forward(*args, **kwargs)
        return self._call_on_arrays(args, kwargs)

    def _call_on_arrays(self, args, kwargs):
        """The outermost call: float array arguments become leaf Tensors (one per distinct
        array, so passing x as query, key and value gives one gradient), the forward runs on
        Tensors, and what it returns comes back as arrays."""
        record = self.training and is_recording()
        leaves = {}

        def leaf(x):
            if _is_float_array(x):
                if id(x) not in leaves:
                    leaves[id(x)] = Tensor(x, requires_grad=record)
                return leaves[id(x)]
            return x

        # bound to forward's signature, so the gradients come in its order however it is called
        bound = _signature_of(self.forward).bind(*args, **kwargs)
        for name, value in bound.arguments.items():
            bound.arguments[name] = leaf(value)
        with forward_scope(), recording(record):
            out = self.forward(*bound.args, **bound.kwargs)
        _records()[self] = (list(leaves.values()), out) if record else _NOT_RECORDED
        return _as_arrays(out)

    def forward(self, *args, **kwargs):
        raise NotImplementedError(f"{type(self).__name__} does not define forward")

    def backward(self, *douts):
        """Differentiate the last training-mode call: ``douts`` are dLoss/d each output (the
        first output only for modules returning (out, weights)). Returns dLoss/d the float array
        argument (a tuple for several, in forward's parameter order; one gradient for an array
        passed twice); parameter gradients are added into ``.grad``."""
        recorded = _records().pop(self, None)
        if recorded is None or recorded is _NOT_RECORDED:
            last = ("the last forward in this thread ran in evaluation mode or no_grad, and "
                    "recorded nothing" if recorded is _NOT_RECORDED else
                    "this thread has run no forward since the last backward, eval() or to()")
            raise RuntimeError(
                f"{type(self).__name__}.backward needs a forward in training mode first, in the "
                f"same thread, and one backward per forward: {last}. Call .train() before the "
                "forward pass; if another thread calls .eval() on this model meanwhile (eval() "
                "is for every thread), have it use `with model.mode(False):` instead, as "
                "seqattn.predict does, or give it a copy (copy.deepcopy(model))")
        inputs, out = recorded
        outputs = [t for t in _flat_tensors(out)][:len(douts)]
        grads = run_backward(outputs, douts, inputs)
        grads = [g.data if isinstance(g, Tensor) else g for g in grads]
        if not grads:
            return None
        return grads[0] if len(grads) == 1 else tuple(grads)

    def check_device(self, **arrays):
        """A clear error when an input is not on this module's device."""
        device = self.device
        if device == CPU and all(type(x.data if isinstance(x, Tensor) else x) is np.ndarray
                                 for x in arrays.values()):
            return  # every input a NumPy array: on the CPU, with no device census
        check_same_device(type(self).__name__, device,
                          **{k: v.data if isinstance(v, Tensor) else v for k, v in arrays.items()})

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

    @property
    def training(self):
        """Training mode (True) or evaluation mode, as this thread sees it."""
        here = mode_here(self)
        return self._training if here is None else here

    @training.setter
    def training(self, mode):
        object.__setattr__(self, "_training", bool(mode))

    def train(self, mode=True):
        """Set training mode (or evaluation mode, ``mode=False``) for every thread."""
        for _, module in self.named_modules():
            object.__setattr__(module, "_training", bool(mode))
            if not mode:
                _records().pop(module, None)
        return self

    def eval(self):
        return self.train(False)

    def mode(self, training):
        """``with model.mode(False):`` runs the block with this module and its submodules in
        evaluation mode (``True``: training mode) in the calling thread only; other threads
        keep theirs."""
        return modes([m for _, m in self.named_modules()], training)

    # -- devices and dtypes ----------------------------------------------------------------

    # device and dtype read the first parameter (or buffer) and stop there: every layer's
    # forward asks for its device, and listing a whole model's parameters each time added up.
    @property
    def device(self):
        for param in self._parameters.values():  # most layers hold a parameter of their own
            return device_of(param.data)
        for _, param in self.named_parameters():
            return device_of(param.data)
        for _, module in self.named_modules():
            for buffer in module._buffers.values():
                return device_of(buffer)
        return CPU

    @property
    def dtype(self):
        for _, param in self.named_parameters():
            return param.dtype
        return None

    def to(self, device=None, dtype=None):
        """Move every parameter, gradient and buffer to ``device`` and/or cast to ``dtype``."""
        for _, module in self.named_modules():
            _records().pop(module, None)
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

    def named_persistent_buffers(self, prefix=""):
        for module_name, module in self.named_modules(prefix):
            for name in module._persistent:
                yield (f"{module_name}.{name}" if module_name else name), module, name

    def state_dict(self):
        """Parameter (and persistent buffer) name -> NumPy array (a host copy), with torch.nn's
        names."""
        state = OrderedDict((name, np.array(moved(p.data, CPU)))
                            for name, p in self.named_parameters())
        for name, module, buffer in self.named_persistent_buffers():
            state[name] = np.array(moved(module._buffers[buffer], CPU))
        return state

    def load_state_dict(self, state, strict=True):
        """Copy arrays (NumPy, or anything np.asarray accepts, e.g. a torch state dict's tensors
        after ``.numpy()``) into the parameters and persistent buffers, keeping this module's
        device and dtype."""
        current = {name: p.data for name, p in self.named_parameters()}
        buffers = {name: (module, buffer)
                   for name, module, buffer in self.named_persistent_buffers()}
        current.update({name: module._buffers[buffer] for name, (module, buffer) in
                        buffers.items()})
        missing = sorted(set(current) - set(state))
        unexpected = sorted(set(state) - set(current))
        if strict and (missing or unexpected):
            raise KeyError(f"state dict does not match {type(self).__name__}: missing "
                           f"{missing}, unexpected {unexpected}")
        params = dict(self.named_parameters())
        for name, value in state.items():
            if name not in current:
                continue
            value = np.asarray(value)
            if value.dtype.kind not in "fiu" or not np.isfinite(value).all():
                raise ValueError(f"{name} in the state dict is not finite numbers ({value.dtype}"
                                 f"{'' if value.dtype.kind not in 'fiu' else ', with inf or NaN'}"
                                 "); weights must be finite")
            if tuple(value.shape) != tuple(current[name].shape):
                raise ValueError(f"{name} has shape {tuple(value.shape)} in the state dict but "
                                 f"{tuple(current[name].shape)} in the module")
            loaded = moved(np.ascontiguousarray(value, dtype=current[name].dtype),
                           device_of(current[name]))
            if name in params:
                params[name].data = loaded
            else:
                module, buffer = buffers[name]
                module.register_buffer(buffer, loaded, persistent=True)
        return self

    def __repr__(self):
        config = ", ".join(f"{k}={v!r}" for k, v in self._config.items()
                           if not isinstance(v, (Module, np.random.Generator)))
        return f"{type(self).__name__}({config})"


# Each thread's last training-mode call per module, kept until its backward; a thread's
# records go with the thread, a module's with the module.
_thread = threading.local()
_NOT_RECORDED = object()  # the last call here ran without recording


def _records():
    if not hasattr(_thread, "records"):
        _thread.records = weakref.WeakKeyDictionary()
    return _thread.records


# forward's function -> the signature of forward bound to an instance: working it out anew
# took a sizeable part of a small model's step
_SIGNATURES = weakref.WeakKeyDictionary()


def _signature_of(method):
    """``inspect.signature(method)``, kept per function for bound methods."""
    function = getattr(method, "__func__", None)
    if function is None:
        return inspect.signature(method)
    signature = _SIGNATURES.get(function)
    if signature is None:
        signature = _SIGNATURES[function] = inspect.signature(method)
    return signature


def _is_float_array(x):
    if isinstance(x, np.ndarray) or is_device_array(x):
        return np.issubdtype(np.dtype(x.dtype), np.floating)
    return False


def _holds_tensor(args, kwargs):
    return any(isinstance(a, Tensor) for a in args) or \
        any(isinstance(v, Tensor) for v in kwargs.values())


def _flat_tensors(out):
    if isinstance(out, Tensor):
        yield out
    elif isinstance(out, (tuple, list)):
        for item in out:
            yield from _flat_tensors(item)


def _as_arrays(out):
    if isinstance(out, Tensor):
        return out.data
    if isinstance(out, tuple):
        return tuple(_as_arrays(x) for x in out)
    if isinstance(out, list):
        return [_as_arrays(x) for x in out]
    return out
