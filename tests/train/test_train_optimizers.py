"""Optimizers, schedules and clipping: several steps against torch.optim on the same gradients
(the op table's NumPy Adam where torch is missing), state dicts, and the optimizers on CUDA
(simulator). The update ops themselves are in the op table (tests/helpers/op_cases.py)."""
import math

import numpy as np
import pytest

from gradcheck import to_host
from reference_ops_optimizers import adam_steps
from seqattn import nn
from seqattn.train import SGD, Adam, AdamW, StepDecay, WarmupCosine, clip_factor, global_grad_norm

STEPS = 4
OPTIMIZERS = {
    "sgd": (SGD, "SGD", dict(lr=0.1)),
    "sgd_momentum_decay": (SGD, "SGD", dict(lr=0.1, momentum=0.9, weight_decay=0.01)),
    "sgd_nesterov": (SGD, "SGD", dict(lr=0.1, momentum=0.9, nesterov=True)),
    "adam": (Adam, "Adam", dict(lr=0.01, betas=(0.8, 0.99), weight_decay=0.1)),
    "adamw": (AdamW, "AdamW", dict(lr=0.01, weight_decay=0.1)),
}


def _gradients(step, shape):
    return np.random.default_rng(step).normal(size=shape)


def _run(optimizer_cls, options, device="cpu", grad_scale=1.0):
    model = nn.Linear(3, 2, dtype=np.float64, seed=0).to(device)
    optimizer = optimizer_cls(model, **options)
    for step in range(STEPS):
        for i, (_, p) in enumerate(model.named_parameters()):
            p.grad = nn.placement.moved(_gradients(10 * step + i, p.shape), device)
        optimizer.step(grad_scale)
    return {k: to_host(p.data) for k, p in model.named_parameters()}, optimizer


@pytest.mark.parametrize("name", OPTIMIZERS)
def test_optimizers_match_torch(name):
    torch = pytest.importorskip("torch")
    cls, torch_name, options = OPTIMIZERS[name]
    ours, _ = _run(cls, options, grad_scale=0.5)
    reference = torch.nn.Linear(3, 2, dtype=torch.float64)
    reference.load_state_dict({k: torch.tensor(v) for k, v in
                               nn.Linear(3, 2, dtype=np.float64, seed=0).state_dict().items()})
    optimizer = getattr(torch.optim, torch_name)(reference.parameters(), **options)
    for step in range(STEPS):
        for i, p in enumerate(reference.parameters()):
            p.grad = torch.tensor(0.5 * _gradients(10 * step + i, tuple(p.shape)))
        optimizer.step()
    for k, p in reference.state_dict().items():
        np.testing.assert_allclose(ours[k], p.numpy(), rtol=1e-12, atol=1e-15, err_msg=k)


def test_adam_matches_numpy_reference():
    """Adam's steps against the NumPy reference of the op table (runs without torch)."""
    ours, _ = _run(Adam, dict(lr=0.01))
    w = nn.Linear(3, 2, dtype=np.float64, seed=0).weight.data
    grads = np.stack([_gradients(10 * step, w.shape) for step in range(STEPS)])
    np.testing.assert_allclose(ours["weight"], adam_steps(w, grads, lr=0.01)[0], rtol=1e-12)


@pytest.mark.parametrize("name", ["sgd_momentum_decay", "adamw"])
def test_cuda_updates_match_cpu(name):
    cls, _, options = OPTIMIZERS[name]
    cpu, _ = _run(cls, options, grad_scale=0.7)
    gpu, _ = _run(cls, options, device="cuda", grad_scale=0.7)
    for k in cpu:
        np.testing.assert_allclose(gpu[k], cpu[k], rtol=1e-12, err_msg=k)


def test_state_dict_round_trip_continues_identically():
    _, optimizer = _run(AdamW, dict(lr=0.01))
    state = optimizer.state_dict()
    assert state["settings"]["steps"] == STEPS
    clone = AdamW(nn.Linear(3, 2, dtype=np.float64, seed=0), lr=0.5).load_state_dict(state)
    assert clone.lr == 0.01 and clone.steps == STEPS
    for name in state["arrays"]:
        param, slot = name.rsplit(".", 1)
        np.testing.assert_array_equal(clone.state[param][slot], state["arrays"][name])
    with pytest.raises(ValueError, match="the state is a AdamW's, not a SGD's"):
        SGD(nn.Linear(3, 2), lr=0.1).load_state_dict(state)


def test_global_norm_and_clipping_match_torch():
    torch = pytest.importorskip("torch")
    model = nn.Linear(4, 3, dtype=np.float64, seed=0)
    grads = [p.grad for p in model.parameters()]
    for i, g in enumerate(grads):
        g[...] = np.random.default_rng(i).normal(size=g.shape)
    norm = global_grad_norm(model.parameters())
    tensors = [torch.tensor(g.copy(), requires_grad=True) for g in grads]
    for t, g in zip(tensors, grads):
        t.grad = torch.tensor(g.copy())
    ref = torch.nn.utils.clip_grad_norm_(tensors, max_norm=0.5)
    np.testing.assert_allclose(norm, ref.item(), rtol=1e-12)
    np.testing.assert_allclose(clip_factor(norm, 0.5) * grads[0], tensors[0].grad.numpy(),
                               rtol=1e-12)
    assert clip_factor(norm, 1e9) == 1.0
    grads[0][0, 0] = np.inf
    assert math.isinf(global_grad_norm(model.parameters()))


def test_schedules():
    schedule = WarmupCosine(1.0, warmup_steps=4, total_steps=14, min_lr=0.1)
    lrs = [schedule(s) for s in range(16)]
    np.testing.assert_allclose(lrs[:4], [0.25, 0.5, 0.75, 1.0])
    np.testing.assert_allclose(lrs[9], 0.55)  # halfway through the cosine
    np.testing.assert_allclose(lrs[14:], [0.1, 0.1])
    assert [StepDecay(1.0, 2, 0.5)(s) for s in range(5)] == [1.0, 1.0, 0.5, 0.5, 0.25]
    with pytest.raises(ValueError, match="warmup_steps < total_steps"):
        WarmupCosine(1.0, 5, 5)
