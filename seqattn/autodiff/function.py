"""Function: a differentiable op, as a forward on arrays and a backward on arrays.

A Function subclass defines ``forward(ctx, *inputs, **options)``, which computes its output(s)
from arrays with ``seqattn.ops`` and keeps what the backward needs with ``ctx.save(...)``, and
``backward(ctx, *douts)``, which returns one gradient (or None) per positional input. Positional
inputs are the differentiable ones (Tensors, arrays or None); keyword options are not (masks,
flags, sizes). ``Function.apply`` runs the forward and, while recording is on and some input
requires a gradient, records a :class:`Node` that the backward pass (``autodiff.backward``)
visits in reverse order.
"""
import numpy as np

from ..backend import CPU, device_of, empty_like_on
from .. import ops
from .parameter import Parameter
from .recording import is_recording
from .tensor import Tensor, unwrap


class Context:
    """What one recorded call keeps for its backward: saved arrays and which inputs need
    gradients (``needs_grad[i]``). It keeps no reference to its input arrays unless the
    forward saves them, so intermediate results are freed as early as without a record."""

    def __init__(self, inputs, needs_grad, recorded=True):
        self.needs_grad = needs_grad
        self.saved = {}
        self.accumulated = set()
        self._parameters = {}
        # What accumulator(i) needs to allocate input i's gradient (device, shape, dtype as
        # the array gives them): normalised only when asked for, since a step records hundreds
        # of calls and asks for a handful. A call that is not recorded has no backward.
        self._layouts = {}
        if not recorded:
            return
        for i, x in enumerate(inputs):
            if needs_grad[i] and isinstance(x, Parameter):
                self._parameters[i] = x
                continue
            array = x.data if isinstance(x, Tensor) else x
            if type(array) is np.ndarray:
                self._layouts[i] = (CPU, array.shape, array.dtype)
            elif hasattr(array, "shape"):
                self._layouts[i] = (device_of(array), array.shape, array.dtype)

    def save(self, **arrays):
        self.saved.update(arrays)

    def accumulator(self, i):
        """A zeroed array into which the backward may ADD input i's gradient (the kernels for
        weights accumulate in place). For a Parameter that requires a gradient this is its
        ``.grad`` itself, so weight gradients land without a copy; for anything else (a frozen
        weight, a plain array) a fresh zero array that the backward returns as input i's
        gradient, which the backward pass drops when input i needs none."""
        if i in self._parameters:
            self.accumulated.add(i)
            return self._parameters[i].grad
        device, shape, dtype = self._layouts[i]
        return ops.fill(empty_like_on(device, tuple(int(s) for s in shape), np.dtype(dtype)),
                        0.0)

    def release(self):
        """Drop the saved arrays once the backward has used them (frees memory early)."""
        self.saved = None
        self._parameters = None


class Node:
    """One recorded call: the Function, its context and where each input came from: the
    (node, output index) that produced it, the leaf Tensor itself, or None for inputs that need
    no gradient. Holding producers rather than input Tensors lets their arrays be freed."""

    __slots__ = ("function", "ctx", "inputs", "n_outputs")

    def __init__(self, function, ctx, inputs, n_outputs):
        self.function, self.ctx, self.inputs, self.n_outputs = function, ctx, inputs, n_outputs


def _source(x):
    return x if x._node is None else (x._node, x._index)


class Function:
    # True when backward returns arrays of its own; False when it may pass a dout (or a view
    # of one) straight through, which must then never be accumulated into in place.
    fresh_gradients = True

    @staticmethod
    def forward(ctx, *inputs, **options):
        raise NotImplementedError

    @staticmethod
    def backward(ctx, *douts):
        raise NotImplementedError

    @classmethod
    def apply(cls, *inputs, **options):
        # Every differentiable op of a step passes here: one pass over the inputs finds both
        # the arrays and which inputs are tracked.
        arrays, tracked = [], []
        for x in inputs:
            if isinstance(x, Tensor):
                arrays.append(x.data)
                tracked.append(x.requires_grad)
            else:
                arrays.append(x)
                tracked.append(False)
        tracked = tuple(tracked)
        record = True in tracked and is_recording()
        ctx = Context(inputs, tracked if record else (False,) * len(inputs), recorded=record)
        outputs = cls.forward(ctx, *arrays, **options)
        single = not isinstance(outputs, tuple)
        if not record:
            ctx.release()
            return Tensor(outputs) if single else tuple(Tensor(a) for a in outputs)
        node = Node(cls, ctx, tuple(_source(x) if t else None for x, t in zip(inputs, tracked)),
                    1 if single else len(outputs))
        if single:
            return _recorded_output(outputs, node, 0)
        return tuple(_recorded_output(a, node, index) for index, a in enumerate(outputs))


def _recorded_output(array, node, index):
    t = Tensor(array, requires_grad=True)
    t._node, t._index = node, index
    return t


def zeros_like(x):
    """Zeros with x's shape, dtype and device (a gradient nothing reached)."""
    x = unwrap(x)
    return ops.fill(empty_like_on(device_of(x), tuple(int(s) for s in x.shape),
                                  np.dtype(x.dtype)), 0.0)
