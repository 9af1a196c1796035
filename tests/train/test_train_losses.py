"""Losses: values and gradients against torch.nn (where installed), NumPy references for what
torch lacks (NaN-aware and latitude-weighted losses), finite differences for every backward.
The loss ops themselves (every kind, weights, skip_nan, class weights, label smoothing,
ignore_index; their CUDA kernels against the CPU) are in the op table (tests/helpers/op_cases.py)."""
import numpy as np
import pytest

from gradcheck import assert_gradient, numerical_gradient
from seqattn.train import (BCEWithLogitsLoss, CrossEntropyLoss, HuberLoss,
                           LatitudeWeightedMSELoss, MAELoss, MSELoss)

RNG = np.random.default_rng(0)
PRED = RNG.normal(size=(3, 5, 2))
TARGET = RNG.normal(size=(3, 5, 2))
PROBS = RNG.uniform(size=(3, 5, 2))
LOGITS = RNG.normal(size=(4, 6, 5))
IDS = RNG.integers(0, 5, size=(4, 6))
IDS[0, :2] = -100
CLASS_WEIGHT = RNG.uniform(0.5, 2.0, size=5)

REGRESSION = {
    "mse": (lambda: MSELoss(), "MSELoss", {}, TARGET),
    "mae": (lambda: MAELoss(), "L1Loss", {}, TARGET),
    "huber": (lambda: HuberLoss(delta=0.7), "HuberLoss", {"delta": 0.7}, TARGET),
    "bce": (lambda: BCEWithLogitsLoss(), "BCEWithLogitsLoss", {}, PROBS),
}
CROSS_ENTROPY = {
    "plain": {},
    "weighted": {"class_weight": CLASS_WEIGHT},
    "smoothed": {"label_smoothing": 0.1},
    "weighted_smoothed": {"class_weight": CLASS_WEIGHT, "label_smoothing": 0.2},
}


def _value_and_grad(loss, pred, target, **kwargs):
    value = loss(pred, target, **kwargs)
    return value, loss.backward()


def _torch_value_and_grad(torch_loss, pred, target):
    torch = pytest.importorskip("torch")
    p = torch.tensor(pred, requires_grad=True)
    value = torch_loss(p, torch.tensor(target))
    value.backward()
    return value.item(), p.grad.numpy()


def _check_finite_differences(loss, pred, target, **kwargs):
    _, grad = _value_and_grad(loss, pred, target, **kwargs)
    pred = pred.copy()
    numeric = numerical_gradient(lambda: loss(pred, target, **kwargs), pred)
    assert_gradient("dpred", grad, numeric)


@pytest.mark.parametrize("name", REGRESSION)
def test_regression_losses_match_torch(name):
    torch = pytest.importorskip("torch")
    make, torch_name, options, target = REGRESSION[name]
    value, grad = _value_and_grad(make(), PRED, target)
    ref_value, ref_grad = _torch_value_and_grad(getattr(torch.nn, torch_name)(**options), PRED,
                                                target)
    np.testing.assert_allclose(value, ref_value, rtol=1e-12)
    np.testing.assert_allclose(grad, ref_grad, rtol=1e-10, atol=1e-14)


@pytest.mark.parametrize("name", REGRESSION)
def test_regression_loss_gradients(name):
    make, _, _, target = REGRESSION[name]
    _check_finite_differences(make(), PRED, target)


@pytest.mark.parametrize("name", CROSS_ENTROPY)
def test_cross_entropy_matches_torch(name):
    torch = pytest.importorskip("torch")
    options = CROSS_ENTROPY[name]
    value, grad = _value_and_grad(CrossEntropyLoss(**options), LOGITS, IDS)
    torch_options = {k: torch.tensor(v) if k == "class_weight" else v for k, v in options.items()}
    if "class_weight" in torch_options:
        torch_options["weight"] = torch_options.pop("class_weight")
    logits = torch.tensor(LOGITS, requires_grad=True)
    ref = torch.nn.functional.cross_entropy(logits.reshape(-1, 5), torch.tensor(IDS).reshape(-1),
                                            **torch_options)
    ref.backward()
    np.testing.assert_allclose(value, ref.item(), rtol=1e-12)
    np.testing.assert_allclose(grad, logits.grad.numpy(), rtol=1e-10, atol=1e-14)


@pytest.mark.parametrize("name", CROSS_ENTROPY)
def test_cross_entropy_gradients(name):
    _check_finite_differences(CrossEntropyLoss(**CROSS_ENTROPY[name]), LOGITS, IDS)


def test_nan_aware_losses_ignore_missing_targets():
    target = TARGET.copy()
    target[0, :3] = np.nan
    present = ~np.isnan(target)
    for loss, reference in ((MSELoss(skip_nan=True), lambda d: d * d),
                            (MAELoss(skip_nan=True), np.abs)):
        value, grad = _value_and_grad(loss, PRED, target)
        np.testing.assert_allclose(value, reference((PRED - target)[present]).mean())
        assert np.all(grad[~present] == 0) and np.isfinite(grad).all()
    assert np.isnan(MSELoss()(PRED, target))


def test_all_targets_missing_gives_zero_loss_and_gradient():
    loss = HuberLoss(skip_nan=True)
    value, grad = _value_and_grad(loss, PRED, np.full_like(PRED, np.nan))
    assert value == 0.0 and loss.weight_sum == 0.0 and not grad.any()


def test_latitude_weighted_mse():
    lat = RNG.uniform(-90, 90, size=(3, 5))
    weight = np.cos(np.deg2rad(lat))[..., None] * np.ones(2)
    loss = LatitudeWeightedMSELoss()
    value, _ = _value_and_grad(loss, PRED, TARGET, coords={"lat": lat})
    np.testing.assert_allclose(value, (weight * (PRED - TARGET) ** 2).sum() / weight.sum())
    _check_finite_differences(LatitudeWeightedMSELoss(lat=lat), PRED, TARGET)
    with pytest.raises(ValueError, match="needs latitudes"):
        loss(PRED, TARGET)


def test_bad_targets_are_reported():
    with pytest.raises(ValueError, match=r"target has shape \(3, 5\); expected pred.shape"):
        MSELoss()(PRED, TARGET[..., 0])
    with pytest.raises(TypeError, match="targets has dtype float64; expected integer class ids"):
        CrossEntropyLoss()(LOGITS, IDS.astype(float))
    with pytest.raises(ValueError, match=r"targets must lie in \[0, 5\)"):
        CrossEntropyLoss()(LOGITS, IDS + 1)
    with pytest.raises(TypeError, match="target has dtype int64"):
        MSELoss()(PRED, np.ones(PRED.shape, np.int64))


def test_float32_losses_stay_close_to_float64():
    value32, grad32 = _value_and_grad(CrossEntropyLoss(label_smoothing=0.1),
                                      LOGITS.astype(np.float32), IDS)
    value64, grad64 = _value_and_grad(CrossEntropyLoss(label_smoothing=0.1), LOGITS, IDS)
    np.testing.assert_allclose(value32, value64, rtol=1e-6)
    np.testing.assert_allclose(grad32, grad64, rtol=1e-5, atol=1e-7)
