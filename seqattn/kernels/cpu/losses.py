"""Loss terms on the CPU: pointwise regression / binary losses and cross-entropy, with backward.

Forward writes ``terms`` (R, 2): column 0 the weighted loss of element (row) r, column 1 its
weight, so one sum over rows (``ops.sum_leading``) gives the numerator and the denominator of
the weighted mean. A missing target (NaN with ``skip_nan``, or ``ignore_index``) has weight 0.
Cross-entropy's ``terms`` has a third column: 1 where a target is neither ``ignore_index`` nor
a class id in [0, C) (that row counts as ignored), so the caller can report bad targets from the
same sum on either device, without a second pass or a device-to-host copy of the targets.
Backward writes the gradient of ``scale * terms[r, 0]`` with ``scale`` = dLoss / numerator.

Pointwise shapes: pred, target, weight flat (R,) (weight (1,) unused when ``has_weight`` is
False). Cross-entropy shapes: logits (R, C), targets (R,) integers, class_weight (C,), lse (R,).
"""
import math

import numpy as np
from numba import prange

from .. import loss_math
from .jit_options import njit
from .threads import sized_kernel

# Elements a thread must have before a launch takes it: as for GELU (an exp per element),
# measured in benchmarks/small_launches.py.
GRAIN = 1 << 14

_loss = njit(inline="always")(loss_math.pointwise_loss)
_loss_grad = njit(inline="always")(loss_math.pointwise_loss_grad)


@sized_kernel(GRAIN)
def pointwise_loss_forward(terms, pred, target, weight, has_weight, kind, delta, skip_nan):
    for i in prange(pred.size):
        w = weight[i] if has_weight else 1.0
        if skip_nan and math.isnan(target[i]):
            w = 0.0
        terms[i, 0] = w * _loss(kind, pred[i], target[i], delta) if w != 0.0 else 0.0
        terms[i, 1] = w


@sized_kernel(GRAIN)
def pointwise_loss_backward(dpred, pred, target, weight, has_weight, kind, delta, skip_nan,
                            scale):
    for i in prange(pred.size):
        w = weight[i] if has_weight else 1.0
        if skip_nan and math.isnan(target[i]):
            w = 0.0
        dpred[i] = scale * w * _loss_grad(kind, pred[i], target[i], delta) if w != 0.0 else 0.0


def _logits_size(terms, lse, logits, *rest):
    return logits.size


@sized_kernel(GRAIN, work=_logits_size)
def cross_entropy_forward(terms, lse, logits, targets, class_weight, smoothing, ignore_index):
    R, C = logits.shape
    for r in prange(R):
        top = -np.inf
        for c in range(C):
            top = max(top, logits[r, c])
        total = 0.0
        for c in range(C):
            total += math.exp(logits[r, c] - top)
        row_lse = top + math.log(total)
        lse[r] = row_lse
        y = targets[r]
        terms[r, 2] = 0.0
        if y == ignore_index or y < 0 or y >= C:
            terms[r, 0] = 0.0
            terms[r, 1] = 0.0
            # an id outside [0, C) is counted in the third column, for the caller to report
            if y != ignore_index:
                terms[r, 2] = 1.0
            continue
        # torch's label smoothing: (1 - eps) w_y nll_y + eps / C sum_c w_c nll_c
        smooth = 0.0
        for c in range(C):
            smooth += class_weight[c] * (row_lse - logits[r, c])
        w_y = class_weight[y]
        terms[r, 0] = (1.0 - smoothing) * w_y * (row_lse - logits[r, y]) + smoothing / C * smooth
        terms[r, 1] = w_y


@sized_kernel(GRAIN)
def cross_entropy_backward(dlogits, logits, lse, targets, class_weight, smoothing, ignore_index,
                           scale):
    R, C = logits.shape
    for r in prange(R):
        y = targets[r]
        if y == ignore_index or y < 0 or y >= C:
            for c in range(C):
                dlogits[r, c] = 0.0
            continue
        weight_sum = 0.0
        for c in range(C):
            weight_sum += class_weight[c]
        # d nll_c / d z_k = p_k - [c == k], summed with the forward's coefficients
        w_y = (1.0 - smoothing) * class_weight[y]
        p_coefficient = w_y + smoothing / C * weight_sum
        for c in range(C):
            p = math.exp(logits[r, c] - lse[r])
            g = p * p_coefficient - smoothing / C * class_weight[c]
            if c == y:
                g -= w_y
            dlogits[r, c] = scale * g
