"""Plain NumPy references for the loss ops, with torch.nn.functional's semantics, and the same
losses computed by torch itself (where installed) to pin those semantics.

Every loss here returns [sum of weighted element losses, sum of weights, their ratio]: the two
sums that ``seqattn.ops`` returns and the weighted mean that a loss module reports (for
cross-entropy the mean is torch's ``reduction="mean"``). The references compute in the dtype of
their inputs (float64: the reference; float32: the naive computation float32 tolerances are
derived from). Backward references give d(sum(out * dout))/dinput.
"""
import numpy as np
from scipy.special import expit, log_softmax, logsumexp, softmax


def _huber(diff, delta):
    small = np.abs(diff) < delta
    return np.where(small, 0.5 * diff * diff, delta * (np.abs(diff) - 0.5 * delta))


# kind -> (element loss of (pred, target, delta), its derivative with respect to pred)
ELEMENT_LOSSES = {
    "mse": (lambda p, t, delta: (p - t) ** 2, lambda p, t, delta: 2 * (p - t)),
    "mae": (lambda p, t, delta: np.abs(p - t), lambda p, t, delta: np.sign(p - t)),
    "huber": (lambda p, t, delta: _huber(p - t, delta),
              lambda p, t, delta: np.clip(p - t, -delta, delta)),
    # log(1 + exp(p)) - p t, the logits form of binary cross-entropy
    "bce_with_logits": (lambda p, t, delta: np.logaddexp(0, p) - p * t,
                        lambda p, t, delta: expit(p) - t),
}


def _sums(weighted_losses, weights):
    total, weight_sum = weighted_losses.sum(), weights.sum()
    return np.array([total, weight_sum, total / weight_sum])


def _element_weights(pred, target, weight, skip_nan):
    """Weights per element (0 where a skipped target is missing) and targets with NaN -> 0."""
    weights = np.ones_like(pred) if weight is None else weight
    if skip_nan:
        weights = np.where(np.isnan(target), 0, weights)
        target = np.where(np.isnan(target), 0, target)
    return weights, target


def pointwise_loss(pred, target, kind, weight=None, delta=1.0, skip_nan=False):
    weights, target = _element_weights(pred, target, weight, skip_nan)
    return _sums(weights * ELEMENT_LOSSES[kind][0](pred, target, delta), weights)


def pointwise_loss_backward(dout, pred, target, kind, weight=None, delta=1.0, skip_nan=False):
    weights, target = _element_weights(pred, target, weight, skip_nan)
    # d(total)/dpred, times dout's weight on the total and on the mean = total / weight sum
    scale = dout[0] + dout[2] / weights.sum()
    return {"pred": scale * weights * ELEMENT_LOSSES[kind][1](pred, target, delta)}


def _target_distributions(logits, targets, class_weight, label_smoothing, ignore_index):
    """Per row, the weighted target distribution a (R, C) with loss_r = sum_c a_rc (-log p_rc):
    (1 - eps) w_y at the target class plus eps / C w_c everywhere (torch's label smoothing),
    zero for an ignored row; and the weight w_y each row adds to the denominator."""
    C = logits.shape[-1]
    targets = targets.reshape(-1)
    weights = np.ones(C, logits.dtype) if class_weight is None else class_weight
    kept = targets != ignore_index
    rows = np.flatnonzero(kept)
    dist = np.zeros((targets.size, C), logits.dtype)
    dist[rows, targets[kept]] = (1 - label_smoothing) * weights[targets[kept]]
    dist[rows] += label_smoothing / C * weights
    return dist, weights[targets[kept]]


def cross_entropy(logits, targets, class_weight=None, label_smoothing=0.0, ignore_index=-100):
    dist, row_weights = _target_distributions(logits, targets, class_weight, label_smoothing,
                                              ignore_index)
    nll = -log_softmax(logits.reshape(dist.shape), axis=-1)
    return _sums(dist * nll, row_weights)


def cross_entropy_backward(dout, logits, targets, class_weight=None, label_smoothing=0.0,
                           ignore_index=-100):
    dist, row_weights = _target_distributions(logits, targets, class_weight, label_smoothing,
                                              ignore_index)
    scale = dout[0] + dout[2] / row_weights.sum()
    p = softmax(logits.reshape(dist.shape), axis=-1)
    # d/dz_k sum_c a_c (lse - z_c) = (sum_c a_c) p_k - a_k
    return {"logits": (scale * (dist.sum(axis=1, keepdims=True) * p - dist)).reshape(
        logits.shape)}


def log_sum_exp(logits):
    """lse (R,) over the classes of logits (..., C): what cross-entropy saves for backward."""
    return logsumexp(logits, axis=-1).reshape(-1)


def torch_pointwise_loss(pred, target, kind, weight=None, delta=1.0, skip_nan=False):
    """The same sums from torch.nn.functional's element losses (tensors in, tensor out)."""
    import torch
    import torch.nn.functional as F

    element = {"mse": F.mse_loss, "mae": F.l1_loss,
               "huber": lambda p, t, reduction: F.huber_loss(p, t, reduction=reduction,
                                                             delta=delta),
               "bce_with_logits": F.binary_cross_entropy_with_logits}[kind]
    present = ~torch.isnan(target) if skip_nan else torch.ones_like(target, dtype=torch.bool)
    weights = torch.ones_like(pred) if weight is None else weight
    losses = element(pred[present], target[present], reduction="none") * weights[present]
    return torch.stack([losses.sum(), weights[present].sum(),
                        losses.sum() / weights[present].sum()])


def torch_cross_entropy(logits, targets, class_weight=None, label_smoothing=0.0,
                        ignore_index=-100):
    """The sums from F.cross_entropy(reduction="none"), and its reduction="mean" itself."""
    import torch
    import torch.nn.functional as F

    logits, targets = logits.reshape(-1, logits.shape[-1]), targets.reshape(-1)
    options = dict(weight=class_weight, label_smoothing=label_smoothing,
                   ignore_index=ignore_index)
    kept = targets[targets != ignore_index]
    weight_sum = (torch.ones(len(kept), dtype=logits.dtype) if class_weight is None
                  else class_weight[kept]).sum()
    return torch.stack([F.cross_entropy(logits, targets, reduction="none", **options).sum(),
                        weight_sum, F.cross_entropy(logits, targets, **options)])
