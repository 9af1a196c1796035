"""What a recorded call keeps for its backward: enough to allocate a gradient for an input that
is not a Parameter (its device, shape and dtype), never the input's array itself."""
import gc
import weakref

import numpy as np

from seqattn import autodiff
from gradcheck import assert_gradient, numerical_gradient

F64 = np.float64


def _x(*shape, seed=1):
    return np.random.default_rng(seed).normal(size=shape)


def test_weights_that_are_tensors_get_gradients_from_fresh_accumulators():
    """A weight, a bias and a norm weight passed as plain Tensors requiring gradients (not
    Parameters) get theirs in arrays of their own shape, allocated at backward from the
    recorded layout; the bias feeds two ops and gets the sum."""
    x, d = _x(5, 3), _x(5, 4, seed=2)
    values = {"weight": _x(4, 3, seed=3), "bias": _x(4, seed=4), "norm weight": _x(4, seed=5)}

    def forward(v):
        h = autodiff.linear(autodiff.Tensor(x), v["weight"], v["bias"])
        return autodiff.layer_norm(h, v["norm weight"], v["bias"]) * d

    tensors = {name: autodiff.Tensor(a.copy(), requires_grad=True) for name, a in values.items()}
    forward(tensors).sum().backward()
    for name, a in values.items():
        numeric = numerical_gradient(lambda: float(np.sum(forward(values).numpy())), a)
        assert_gradient(name, tensors[name].grad, numeric)


def test_a_recorded_call_keeps_no_reference_to_its_inputs():
    """An intermediate result that no backward needs is freed when its Tensor goes, as
    without a record (Add keeps only shapes)."""
    x = autodiff.Tensor(_x(4, 3), requires_grad=True)
    h = autodiff.linear(x, _x(2, 3, seed=2))
    alive = weakref.ref(h.data)
    out = h + _x(4, 2, seed=3)
    del h
    gc.collect()
    assert alive() is None
    out.sum().backward()
    assert x.grad.shape == (4, 3)
