"""The table of layer ops that drives the kernel tests: inputs, forward, reference, backward.

Each :class:`OpCase` says how to build tiny inputs, run the op's forward and backward through
``seqattn.ops`` and compute the float64 reference; the ``check_*`` functions apply the same
checks to every case (reference, finite differences, float32 accuracy, CUDA against CPU).
"""
from dataclasses import dataclass
from typing import Callable

import numpy as np

import reference_layers as ref
from gradcheck import assert_float32_close, assert_gradient, numerical_gradient, on_cuda, to_host
from seqattn import ops


@dataclass
class OpCase:
    name: str
    family: str
    make_inputs: Callable  # (rng) -> dict of float64 arrays (and ints)
    forward: Callable  # (**inputs) -> output
    reference: Callable  # (**inputs) -> float64 output
    backward: Callable = None  # (dout, **inputs) -> {input name: gradient}
    # Inputs whose float32 cast is meaningful for the accuracy check (integers are not cast).
    float_inputs: tuple = ()


def zeros_like(x):
    """Zeros on the device of x (a fresh gradient accumulator)."""
    if hasattr(x, "copy_to_host"):
        from numba import cuda

        return cuda.to_device(np.zeros(x.shape, dtype=x.dtype))
    return np.zeros(x.shape, dtype=x.dtype)


def _linear_backward(dout, x, weight, bias):
    dweight, dbias = zeros_like(weight), zeros_like(bias)
    dx = ops.linear_backward(dout, x, weight, weight_grad=dweight, bias_grad=dbias)
    return {"x": dx, "weight": dweight, "bias": dbias}


def _layer_norm_backward(dout, x, weight, bias):
    _, mean, rstd = ops.layer_norm(x, weight, bias)
    dweight, dbias = zeros_like(weight), zeros_like(bias)
    dx = ops.layer_norm_backward(dout, x, mean, rstd, weight, weight_grad=dweight,
                                 bias_grad=dbias)
    return {"x": dx, "weight": dweight, "bias": dbias}


def _rms_norm_backward(dout, x, weight):
    _, rstd = ops.rms_norm(x, weight)
    dweight = zeros_like(weight)
    dx = ops.rms_norm_backward(dout, x, rstd, weight, weight_grad=dweight)
    return {"x": dx, "weight": dweight}


def _embedding_backward(dout, ids, weight):
    dweight = zeros_like(weight)
    ops.embedding_backward(dout, ids, weight_grad=dweight)
    return {"weight": dweight}


def _additive_backward(dout, qp, kp, v):
    dv = zeros_like(v)
    dqp, dkp = ops.additive_scores_backward(dout, qp, kp, v, v_grad=dv)
    return {"qp": dqp, "kp": dkp, "v": dv}


def _swiglu_backward(dout, gate, up):
    dgate, dup = ops.swiglu_backward(dout, gate, up)
    return {"gate": dgate, "up": dup}


def _angles(rng, N, half):
    theta = rng.uniform(-3, 3, (N, half))
    return {"cos": np.cos(theta), "sin": np.sin(theta)}


def _activation_input(rng):
    # Away from 0, where ReLU has its kink and finite differences straddle it.
    x = rng.normal(size=(2, 3, 5))
    return {"x": np.where(np.abs(x) < 0.05, 0.3, x)}


CASES = [
    OpCase("linear", "linear",
           lambda rng: {"x": rng.normal(size=(2, 3, 5)), "weight": rng.normal(size=(4, 5)),
                        "bias": rng.normal(size=4)},
           ops.linear, ref.linear, _linear_backward, ("x", "weight", "bias")),
    OpCase("layer_norm", "layer_norm",
           lambda rng: {"x": rng.normal(size=(2, 3, 6)) * 3 + 1,
                        "weight": rng.normal(size=6), "bias": rng.normal(size=6)},
           lambda x, weight, bias: ops.layer_norm(x, weight, bias)[0], ref.layer_norm,
           _layer_norm_backward, ("x", "weight", "bias")),
    OpCase("rms_norm", "rms_norm",
           lambda rng: {"x": rng.normal(size=(2, 3, 6)) * 3, "weight": rng.normal(size=6)},
           lambda x, weight: ops.rms_norm(x, weight)[0], ref.rms_norm, _rms_norm_backward,
           ("x", "weight")),
    OpCase("gelu", "activations", _activation_input, ops.gelu, ref.gelu,
           lambda dout, x: {"x": ops.gelu_backward(dout, x)}, ("x",)),
    OpCase("gelu_tanh", "activations", _activation_input,
           lambda x: ops.gelu(x, approximate="tanh"), lambda x: ref.gelu(x, approximate="tanh"),
           lambda dout, x: {"x": ops.gelu_backward(dout, x, approximate="tanh")}, ("x",)),
    OpCase("relu", "activations", _activation_input, ops.relu, ref.relu,
           lambda dout, x: {"x": ops.relu_backward(dout, x)}, ("x",)),
    OpCase("silu", "activations", _activation_input, ops.silu, ref.silu,
           lambda dout, x: {"x": ops.silu_backward(dout, x)}, ("x",)),
    OpCase("swiglu", "activations",
           lambda rng: {"gate": rng.normal(size=(2, 3, 4)), "up": rng.normal(size=(2, 3, 4))},
           ops.swiglu, ref.swiglu, _swiglu_backward, ("gate", "up")),
    OpCase("add_broadcast", "elementwise",
           lambda rng: {"a": rng.normal(size=(2, 3, 4)), "b": rng.normal(size=(3, 4))},
           ops.add, lambda a, b: a + b,
           lambda dout, a, b: {"a": dout, "b": ops.sum_leading(dout, b.shape)}, ("a", "b")),
    OpCase("sum_leading", "reductions",
           lambda rng: {"x": rng.normal(size=(70, 3))},
           lambda x: ops.sum_leading(x, (3,)), lambda x: x.sum(axis=0), None, ("x",)),
    OpCase("embedding", "embedding",
           lambda rng: {"ids": np.array([[0, 2, 2], [1, 0, 3]]), "weight": rng.normal(size=(4, 5))},
           ops.embedding, ref.embedding, _embedding_backward, ("weight",)),
    OpCase("split_heads", "heads",
           lambda rng: {"x": rng.normal(size=(2, 3, 6))},
           lambda x: ops.split_heads(x, 2), lambda x: ref.split_heads(x, 2),
           lambda dout, x: {"x": ops.merge_heads(dout)}, ("x",)),
    OpCase("rope", "rope",
           lambda rng: {"x": rng.normal(size=(2, 2, 3, 6)), **_angles(rng, 3, 3)},
           ops.rope, ref.rope, lambda dout, x, cos, sin: {"x": ops.rope_backward(dout, cos, sin)},
           ("x", "cos", "sin")),
    OpCase("additive_scores", "additive_scores",
           lambda rng: {"qp": rng.normal(size=(2, 3, 4)), "kp": rng.normal(size=(2, 5, 4)),
                        "v": rng.normal(size=4)},
           ops.additive_scores, ref.additive_scores, _additive_backward, ("qp", "kp", "v")),
]


def cases_of(family):
    return [c for c in CASES if c.family == family]


def _inputs(case, seed=0):
    return case.make_inputs(np.random.default_rng(seed))


def _dout(case, inputs, seed=1):
    out = to_host(case.forward(**inputs))
    return np.random.default_rng(seed).normal(size=out.shape)


def check_forward(case):
    inputs = _inputs(case)
    got = case.forward(**inputs)
    np.testing.assert_allclose(got, case.reference(**inputs), rtol=1e-12, atol=1e-12,
                               err_msg=f"{case.name} forward")


def check_backward(case):
    """The backward against central differences of the forward, one assertion per input."""
    inputs = _inputs(case)
    dout = _dout(case, inputs)
    grads = case.backward(dout, **inputs)
    for name, grad in grads.items():
        numeric = numerical_gradient(lambda: float((case.forward(**inputs) * dout).sum()),
                                     inputs[name])
        assert_gradient(f"{case.name}: d{name}", grad, numeric)


def check_float32(case):
    inputs = _inputs(case)
    inputs32 = {k: v.astype(np.float32) if k in case.float_inputs else v
                for k, v in inputs.items()}
    exact = case.reference(**{k: v.astype(np.float64) if k in case.float_inputs else v
                              for k, v in inputs32.items()})
    naive = case.reference(**inputs32)
    assert_float32_close(f"{case.name} float32", case.forward(**inputs32), exact, naive)


def check_cuda_matches_cpu(case):
    """The CUDA kernels (under the simulator in CI) give the CPU's results, forward and backward."""
    inputs = _inputs(case)
    np.testing.assert_allclose(on_cuda(case.forward, **inputs), case.forward(**inputs),
                               rtol=1e-12, atol=1e-12, err_msg=f"{case.name} forward on CUDA")
    if case.backward is None:
        return
    dout = _dout(case, inputs)
    cpu = case.backward(dout, **inputs)
    gpu = on_cuda(lambda d, **kw: tuple(case.backward(d, **kw).values()), dout, **inputs)
    for (name, want), got in zip(cpu.items(), gpu):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12,
                                   err_msg=f"{case.name}: d{name} on CUDA")
