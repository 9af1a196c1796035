"""The backward pass over the recorded ops: reverse topological order, gradients summed where a
tensor was used more than once, parameter gradients added into ``Parameter.grad``."""
import numpy as np

from .. import ops
from ..backend import device_of, empty_like_on
from .parameter import Parameter
from .tensor import Tensor, unwrap


def _topological_order(roots):
    """Nodes reachable from the root tensors, every node after all the nodes it consumes."""
    order, seen = [], set()
    stack = [(t._node, False) for t in roots if t._node is not None]
    while stack:
        node, expanded = stack.pop()
        if expanded:
            order.append(node)
            continue
        if id(node) in seen:
            continue
        seen.add(id(node))
        stack.append((node, True))
        for source in node.inputs:
            if isinstance(source, tuple) and id(source[0]) not in seen:
                stack.append((source[0], False))
    return order


class _Gradients:
    """Gradient arrays by source (a (node, output index) pair or a leaf Tensor), summed on
    arrival. An array that may belong to someone else (a dout passed straight through) is never
    added into in place."""

    def __init__(self):
        # (id(node), output index) for a node's output, id(leaf) for a leaf ->
        # [source, gradient, whether the gradient is ours to add into]
        self._grads = {}

    def add(self, source, g, owned):
        if type(source) is tuple:
            k = (id(source[0]), source[1])
        elif isinstance(source, Parameter):
            ops.add_into(source.grad, g)
            return
        else:
            k = id(source)
        entry = self._grads.get(k)
        if entry is None:
            self._grads[k] = [source, g, owned]
        elif entry[2]:
            ops.add_into(entry[1], g)
        else:
            entry[1], entry[2] = ops.add(entry[1], g), True

    def pop_outputs(self, node):
        """The gradients of ``node``'s outputs (None where none arrived), taken out."""
        n = id(node)
        return [self._grads.pop((n, i), _NONE)[1] for i in range(node.n_outputs)]

    def leaves(self):
        return [(e[0], e[1]) for k, e in self._grads.items() if type(k) is int]


_NONE = (None, None)  # the entry of a gradient that never arrived


def _check_dout(t, dout):
    if dout is None:
        if t.size != 1:
            raise ValueError(f"backward() without a gradient needs a single value, but the "
                             f"output has shape {t.shape}; pass dout of that shape")
        dout = ops.fill(empty_like_on(t.device, t.shape, t.dtype), 1.0)
    dout = unwrap(dout)
    if tuple(int(s) for s in dout.shape) != t.shape:
        raise ValueError(f"dout has shape {tuple(int(s) for s in dout.shape)}; expected the "
                         f"output's shape {t.shape}")
    if device_of(dout) != t.device:
        raise ValueError(f"dout is on the {device_of(dout)} but the output is on the "
                         f"{t.device}; move it there first")
    if np.dtype(dout.dtype) != t.dtype:
        raise TypeError(f"dout has dtype {np.dtype(dout.dtype)}; expected {t.dtype} like the "
                        "output")
    return dout


def backward(outputs, douts, inputs=()):
    """Backpropagate ``douts`` (dLoss/d each output Tensor) through the recorded ops.

    Parameters get their gradients added into ``.grad``; leaf tensors in ``inputs`` get theirs
    returned (a list, zeros where nothing reached them); other leaves that require gradients get
    them added into ``.grad``. Each node's saved arrays are released once used, so a recorded
    forward can be differentiated once.
    """
    grads = _Gradients()
    roots = []
    for t, dout in zip(outputs, douts):
        if not isinstance(t, Tensor) or not t.requires_grad:
            continue
        if t._node is not None and t._node.ctx.saved is None:
            raise RuntimeError("this forward pass was already differentiated (its saved arrays "
                               "are released); run the forward again before another backward")
        grads.add(t if t._node is None else (t._node, t._index), _check_dout(t, dout),
                  owned=False)
        roots.append(t)
    for node in reversed(_topological_order(roots)):
        ctx = node.ctx
        node_douts = grads.pop_outputs(node)
        if all(d is None for d in node_douts):
            ctx.release()
            continue
        input_grads = node.function.backward(ctx, *node_douts)
        if not isinstance(input_grads, tuple):
            input_grads = (input_grads,)
        owned, accumulated = node.function.fresh_gradients, ctx.accumulated
        for i, (x, g) in enumerate(zip(node.inputs, input_grads)):
            if x is not None and g is not None and i not in accumulated:
                grads.add(x, g, owned)
        ctx.release()
    wanted = {id(x) for x in inputs}
    found = {}
    for leaf, g in grads.leaves():
        if id(leaf) in wanted:
            found[id(leaf)] = g
        elif leaf.requires_grad:
            leaf.grad = g if leaf.grad is None else ops.add(leaf.grad, g)
    return [found.get(id(x)) if id(x) in found else _zeros_like(x) for x in inputs]


def _zeros_like(t):
    return ops.fill(empty_like_on(t.device, t.shape, t.dtype), 0.0)
