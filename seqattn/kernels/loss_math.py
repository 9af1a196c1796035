"""Per-element loss formulas shared by the CPU and CUDA loss kernels, written once as plain Python.

Each kernel family compiles them for its target, as ``scalar_math`` does, so both devices
evaluate the same expressions. ``kind`` selects the loss (the codes below); ``delta`` is Huber's
threshold and is ignored by the others.
"""
import math

MSE = 0
MAE = 1
HUBER = 2
BCE_WITH_LOGITS = 3


def pointwise_loss(kind, pred, target, delta):
    diff = pred - target
    if kind == MSE:
        return diff * diff
    if kind == MAE:
        return abs(diff)
    if kind == HUBER:
        if abs(diff) < delta:
            return 0.5 * diff * diff
        return delta * (abs(diff) - 0.5 * delta)
    # max(x, 0) - x y + log(1 + exp(-|x|)): never exponentiates a large positive number
    return max(pred, 0.0) - pred * target + math.log1p(math.exp(-abs(pred)))


def pointwise_loss_grad(kind, pred, target, delta):
    diff = pred - target
    if kind == MSE:
        return 2.0 * diff
    if kind == MAE:
        # sign(0) = 0, as torch's L1 gradient
        return 1.0 if diff > 0 else (-1.0 if diff < 0 else 0.0)
    if kind == HUBER:
        if abs(diff) < delta:
            return diff
        return delta if diff > 0 else -delta
    if pred >= 0:
        sigmoid = 1.0 / (1.0 + math.exp(-pred))
    else:
        e = math.exp(pred)
        sigmoid = e / (1.0 + e)
    return sigmoid - target
