"""The recorded differentiation: custom models that define forward only, against finite
differences; shared weights; arithmetic between layers; refusal of what cannot be recorded."""
import numpy as np
import pytest

import seqattn.nn as nn
from seqattn import autodiff
from gradcheck import check_module_gradients, numerical_gradient, assert_gradient, on_cuda

F64 = np.float64


def _x(*shape, seed=1):
    return np.random.default_rng(seed).normal(size=shape)


class TwoHeadedModel(nn.Module):
    """One Linear used twice (shared weights), a residual sum, a concatenation, slicing, a
    product, a division by a tensor, a mean, and two heads whose outputs are summed."""

    def __init__(self):
        super().__init__()
        self.shared = nn.Linear(4, 4, dtype=F64, seed=0)
        self.norm = nn.LayerNorm(4, dtype=F64)
        self.head_a = nn.Linear(8, 3, dtype=F64, seed=1)
        self.head_b = nn.Linear(4, 3, dtype=F64, seed=2)

    def forward(self, x, y):
        h = self.shared(x)
        h = h + self.shared(self.norm(h))                        # the same weights again
        both = autodiff.concat([h, y * h], axis=-1)              # (B, N, 8)
        a = self.head_a(both)
        b = self.head_b(h[:, :2].mean(axis=1, keepdims=True) / (1.5 + y[:, :1] * y[:, :1]))
        return a - 0.5 * b + a[:, :, :1]


def test_custom_model_gradients_match_finite_differences():
    model = TwoHeadedModel()
    check_module_gradients(model, lambda x, y: model(x, y),
                           lambda d: dict(zip(("x", "y"), model.backward(d))),
                           {"x": _x(2, 3, 4), "y": _x(2, 3, 4, seed=2)})


def test_a_module_called_twice_gets_the_sum_of_both_gradients():
    shared = nn.Linear(4, 4, dtype=F64, seed=0)

    class Twice(nn.Module):
        def __init__(self):
            super().__init__()
            self.shared = shared

        def forward(self, x):
            return self.shared(self.shared(x))

    model, x, d = Twice(), _x(2, 4), _x(2, 4, seed=3)
    model.zero_grad()
    model(x)
    model.backward(d)
    # by hand: y1 = x W^T + b, y2 = y1 W^T + b
    W, b = shared.weight.data, shared.bias.data
    y1 = x @ W.T + b
    expected_dW = d.T @ y1 + (d @ W).T @ x
    expected_db = d.sum(0) + (d @ W).sum(0)
    np.testing.assert_allclose(shared.weight.grad, expected_dW, rtol=1e-12)
    np.testing.assert_allclose(shared.bias.grad, expected_db, rtol=1e-12)


def test_gradients_accumulate_until_zero_grad():
    layer, x, d = nn.Linear(3, 2, dtype=F64, seed=0), _x(4, 3), _x(4, 2, seed=2)
    layer.zero_grad()
    layer(x)
    layer.backward(d)
    once = layer.weight.grad.copy()
    layer(x)
    layer.backward(d)
    np.testing.assert_allclose(layer.weight.grad, 2 * once, rtol=1e-12)
    layer.zero_grad()
    assert not layer.weight.grad.any()


def test_frozen_weights_get_no_gradient_and_their_inputs_still_do():
    """A Parameter with requires_grad False keeps its .grad untouched, and a weight that is a
    plain array (a view of one, say) needs no gradient at all; the inputs still get theirs."""
    linear, norm = nn.Linear(3, 2, dtype=F64, seed=0), nn.LayerNorm(2, dtype=F64)
    linear.zero_grad()
    norm.zero_grad()
    norm.weight.requires_grad = False
    x, d = autodiff.Tensor(_x(4, 3), requires_grad=True), _x(4, 2, seed=2)
    (norm(linear(x)) * d).sum().backward()
    assert not norm.weight.grad.any() and norm.bias.grad.any() and linear.weight.grad.any()
    assert x.grad.any()
    frozen = _x(4, 2, seed=3)[:, :2].T  # (2, 4) view as the weight: a plain array, no gradient
    x2 = autodiff.Tensor(_x(5, 4), requires_grad=True)
    autodiff.linear(x2, frozen).sum().backward()
    np.testing.assert_allclose(x2.grad, np.ones((5, 2)) @ frozen, rtol=1e-12)


def test_numpy_functions_on_recorded_tensors_are_refused():
    class Glued(nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = nn.Linear(3, 3, dtype=F64, seed=0)

        def forward(self, x):
            h = self.linear(x)
            return np.concatenate([h, h], axis=-1)

    with pytest.raises(TypeError, match="autodiff.concat"):
        Glued()(_x(2, 3))
    with pytest.raises(TypeError):
        np.exp(autodiff.Tensor(_x(2), requires_grad=True))


def test_an_array_on_the_left_of_an_operator_is_recorded():
    t = autodiff.Tensor(_x(3), requires_grad=True)
    out = np.full(3, 2.0) * t + np.ones(3)
    assert isinstance(out, autodiff.Tensor)
    out.sum().backward()
    np.testing.assert_allclose(t.grad, np.full(3, 2.0))


def test_eval_and_no_grad_record_nothing():
    layer, x = nn.Linear(3, 2, dtype=F64, seed=0), _x(4, 3)
    trained = layer(x)
    layer.eval()
    np.testing.assert_array_equal(layer(x), trained)
    with pytest.raises(RuntimeError, match="training mode"):
        layer.backward(np.ones((4, 2)))
    layer.train()
    with autodiff.no_grad():
        layer(x)
    with pytest.raises(RuntimeError, match="training mode"):
        layer.backward(np.ones((4, 2)))


def test_one_backward_per_forward():
    layer, x = nn.Linear(3, 2, dtype=F64, seed=0), _x(4, 3)
    layer(x)
    layer.backward(np.ones((4, 2)))
    with pytest.raises(RuntimeError, match="one backward per forward"):
        layer.backward(np.ones((4, 2)))


def test_tensor_arithmetic_gradients_match_finite_differences():
    """Each recorded array op on its own, through Tensor.backward()."""
    rng = np.random.default_rng(0)
    cases = {
        "index": lambda a: a[1:, ::2],
        "fancy index": lambda a: a[[0, 0, 2]],
        "reshape": lambda a: a.reshape(-1, 2) * a.reshape(-1, 2),
        "sum": lambda a: a.sum(axis=0) * a.sum(),
        "mean": lambda a: a.mean(axis=(0, 1), keepdims=True) * a,
        "stack": lambda a: autodiff.stack([a, a * a], axis=1),
        "divide": lambda a: 1.0 / (2.0 + a * a) - a / 3.0,
    }
    for name, f in cases.items():
        a = rng.normal(size=(3, 4))
        t = autodiff.Tensor(a, requires_grad=True)
        out = f(t)
        dout = rng.normal(size=out.shape)
        out.backward(dout)

        def loss():
            with autodiff.no_grad():
                return float((f(autodiff.Tensor(a)).data * dout).sum())

        assert_gradient(f"d{name}", t.grad, numerical_gradient(loss, a, 6, rng))


def test_arithmetic_on_the_gpu_matches_the_cpu():
    from numba import cuda

    a, b = _x(2, 3, 4), _x(3, 4, seed=2)

    def run(a, b):
        ta = autodiff.Tensor(a, requires_grad=True)
        tb = autodiff.Tensor(b, requires_grad=True)
        out = autodiff.concat([ta * tb, ta + tb], axis=-1).mean(axis=1)
        dout = np.ones(out.shape)
        out.backward(cuda.to_device(dout) if out.device == "cuda" else dout)
        return out.data, ta.grad, tb.grad

    expected = run(a, b)
    for got, want in zip(on_cuda(run, a, b), expected):
        np.testing.assert_allclose(got, want, rtol=1e-12)
