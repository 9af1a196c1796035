"""Loss terms on the GPU; same launchers and semantics as ``kernels/cpu/losses``.

Pointwise kernels give one thread to an element, cross-entropy one thread to a row (class
counts of scientific labels are small; a row of C logits is read three times from cache).
"""
import math

from numba import cuda

from .. import loss_math
from .grid import THREADS, blocks_for

_loss = cuda.jit(device=True)(loss_math.pointwise_loss)
_loss_grad = cuda.jit(device=True)(loss_math.pointwise_loss_grad)


@cuda.jit(cache=True)
def pointwise_loss_forward_kernel(terms, pred, target, weight, has_weight, kind, delta,
                                  skip_nan):
    i = cuda.grid(1)
    if i >= pred.size:
        return
    w = weight[i] if has_weight else 1.0
    if skip_nan and math.isnan(target[i]):
        w = 0.0
    terms[i, 0] = w * _loss(kind, pred[i], target[i], delta) if w != 0.0 else 0.0
    terms[i, 1] = w


@cuda.jit(cache=True)
def pointwise_loss_backward_kernel(dpred, pred, target, weight, has_weight, kind, delta,
                                   skip_nan, scale):
    i = cuda.grid(1)
    if i >= pred.size:
        return
    w = weight[i] if has_weight else 1.0
    if skip_nan and math.isnan(target[i]):
        w = 0.0
    dpred[i] = scale * w * _loss_grad(kind, pred[i], target[i], delta) if w != 0.0 else 0.0


@cuda.jit(cache=True)
def cross_entropy_forward_kernel(terms, lse, logits, targets, class_weight, smoothing,
                                 ignore_index):
    r = cuda.grid(1)
    R, C = logits.shape
    if r >= R:
        return
    top = -math.inf
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
        return
    smooth = 0.0
    for c in range(C):
        smooth += class_weight[c] * (row_lse - logits[r, c])
    w_y = class_weight[y]
    terms[r, 0] = (1.0 - smoothing) * w_y * (row_lse - logits[r, y]) + smoothing / C * smooth
    terms[r, 1] = w_y


@cuda.jit(cache=True)
def cross_entropy_backward_kernel(dlogits, logits, lse, targets, class_weight, smoothing,
                                  ignore_index, scale):
    r = cuda.grid(1)
    R, C = logits.shape
    if r >= R:
        return
    y = targets[r]
    if y == ignore_index or y < 0 or y >= C:
        for c in range(C):
            dlogits[r, c] = 0.0
        return
    weight_sum = 0.0
    for c in range(C):
        weight_sum += class_weight[c]
    w_y = (1.0 - smoothing) * class_weight[y]
    p_coefficient = w_y + smoothing / C * weight_sum
    for c in range(C):
        g = math.exp(logits[r, c] - lse[r]) * p_coefficient - smoothing / C * class_weight[c]
        if c == y:
            g -= w_y
        dlogits[r, c] = scale * g


def pointwise_loss_forward(terms, pred, target, weight, has_weight, kind, delta, skip_nan):
    pointwise_loss_forward_kernel[blocks_for(pred.size), THREADS](
        terms, pred, target, weight, has_weight, kind, delta, skip_nan)


def pointwise_loss_backward(dpred, pred, target, weight, has_weight, kind, delta, skip_nan,
                            scale):
    pointwise_loss_backward_kernel[blocks_for(pred.size), THREADS](
        dpred, pred, target, weight, has_weight, kind, delta, skip_nan, scale)


def cross_entropy_forward(terms, lse, logits, targets, class_weight, smoothing, ignore_index):
    cross_entropy_forward_kernel[blocks_for(logits.shape[0]), THREADS](
        terms, lse, logits, targets, class_weight, smoothing, ignore_index)


def cross_entropy_backward(dlogits, logits, lse, targets, class_weight, smoothing, ignore_index,
                           scale):
    cross_entropy_backward_kernel[blocks_for(logits.shape[0]), THREADS](
        dlogits, logits, lse, targets, class_weight, smoothing, ignore_index, scale)
