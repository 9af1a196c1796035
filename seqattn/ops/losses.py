"""Loss ops. A loss op returns (sum of weighted element losses, sum of weights) as host floats,
so its caller can form a weighted mean; its backward takes ``scale`` = dLoss / (that first sum).
"""
import numpy as np

from ..backend import CPU, empty_like_on, kernels_for
from ..kernels import loss_math
from .arrays import fill, sum_leading
from .checks import expect_positive, expect_probability, expect_shape, flat, prepared, rows, shape_of


POINTWISE_LOSSES = {"mse": loss_math.MSE, "mae": loss_math.MAE, "huber": loss_math.HUBER,
                    "bce_with_logits": loss_math.BCE_WITH_LOGITS}


def _loss_sums(device, terms):
    """The column sums of terms (R, K) as K host floats."""
    sums = sum_leading(terms, (shape_of(terms)[1],))
    if device != CPU:
        sums = sums.copy_to_host()
    return tuple(float(total) for total in sums)


def _pointwise_loss_args(pred, target, kind, weight):
    if kind not in POINTWISE_LOSSES:
        raise ValueError(f"kind must be one of {sorted(POINTWISE_LOSSES)}, got {kind!r}")
    device, a = prepared({"pred": pred, "target": target, "weight": weight})
    expect_shape("target", a["target"], shape_of(a["pred"]), "pred.shape")
    if weight is not None:
        expect_shape("weight", a["weight"], shape_of(a["pred"]), "pred.shape")
        weight = flat(a["weight"])
    else:
        weight = empty_like_on(device, (1,), a["pred"].dtype)
    return device, flat(a["pred"]), flat(a["target"]), weight


def pointwise_loss(pred, target, kind, *, weight=None, delta=1.0, skip_nan=False):
    """Sums of an elementwise loss of ``pred`` against ``target`` (same shapes), weighted.

    With ``skip_nan``, elements whose target is NaN count with weight 0.

    Parameters
    ----------
    pred : array
        Predictions (logits for ``"bce_with_logits"``), on the CPU (NumPy) or the GPU
        (numba.cuda device array).
    target : array
        Targets, shaped like ``pred``.
    kind : str
        ``"mse"``, ``"mae"``, ``"huber"`` or ``"bce_with_logits"``.
    weight : array, optional
        A weight per element, shaped like ``pred``.
    delta : float, default 1.0
        Huber's threshold between quadratic and linear.
    skip_nan : bool, default False
        Give NaN targets weight 0.

    Returns
    -------
    loss_sum, weight_sum : float
        The sum of weighted losses and the sum of weights (their ratio is the mean).
    """
    expect_positive("delta", delta)
    device, pred, target, weight_flat = _pointwise_loss_args(pred, target, kind, weight)
    terms = empty_like_on(device, (int(pred.size), 2), pred.dtype)
    if pred.size:
        kernels_for(device, "losses").pointwise_loss_forward(
            terms, pred, target, weight_flat, weight is not None, POINTWISE_LOSSES[kind],
            float(delta), bool(skip_nan))
    return _loss_sums(device, terms)


def pointwise_loss_backward(pred, target, kind, *, scale, weight=None, delta=1.0,
                            skip_nan=False):
    """``dpred = scale * d(sum of weighted losses)/dpred`` of :func:`pointwise_loss`.

    Parameters
    ----------
    pred, target : arrays of one shape
        The forward call's inputs.
    kind : str
        As in the forward call.
    scale : float
        The factor (1 / weight_sum for the gradient of the mean).
    weight : array, optional
        As in the forward call.
    delta : float, default 1.0
        As in the forward call.
    skip_nan : bool, default False
        As in the forward call.

    Returns
    -------
    array
        dpred, shaped like ``pred``.
    """
    device, pred_flat, target, weight_flat = _pointwise_loss_args(pred, target, kind, weight)
    dpred = empty_like_on(device, shape_of(pred), pred_flat.dtype)
    if pred_flat.size:
        kernels_for(device, "losses").pointwise_loss_backward(
            flat(dpred), pred_flat, target, weight_flat, weight is not None,
            POINTWISE_LOSSES[kind], float(delta), bool(skip_nan), float(scale))
    return dpred


def _cross_entropy_args(logits, targets, class_weight):
    device, a = prepared({"logits": logits, "targets": targets, "class_weight": class_weight},
                         float_names=("logits", "class_weight"))
    logits, targets = a["logits"], a["targets"]
    if logits.ndim < 2:
        raise ValueError(f"logits has shape {shape_of(logits)}; expected (..., C) classes last")
    C = shape_of(logits)[-1]
    expect_shape("targets", targets, shape_of(logits)[:-1], "logits.shape[:-1]")
    if not np.issubdtype(np.dtype(targets.dtype), np.integer):
        raise TypeError(f"targets has dtype {np.dtype(targets.dtype)}; expected integer class "
                        "ids (use a regression or BCE loss for float targets)")
    if class_weight is None:
        class_weight = empty_like_on(device, (C,), logits.dtype)
        fill(class_weight, 1.0)
    else:
        expect_shape("class_weight", a["class_weight"], (C,), "(C,)")
        class_weight = a["class_weight"]
    return device, rows(logits), flat(targets), class_weight


def cross_entropy(logits, targets, *, class_weight=None, label_smoothing=0.0, ignore_index=-100):
    """Sums of the softmax cross-entropy of logits against integer targets, as
    torch.nn.functional.cross_entropy.

    Parameters
    ----------
    logits : array (..., C)
        Unnormalized class scores, on the CPU (NumPy) or the GPU (numba.cuda device array).
    targets : int array (...)
        Class ids in [0, C), or ``ignore_index``.
    class_weight : array (C,), optional
        A weight per class.
    label_smoothing : float, default 0.0
        Share of the target probability spread evenly over the classes.
    ignore_index : int, default -100
        Targets with this id count for nothing.

    Returns
    -------
    loss_sum, weight_sum : float
        The sum of weighted losses and the sum of the targets' class weights.
    lse : array (R,)
        Each row's log-sum-exp, which :func:`cross_entropy_backward` needs.
    """
    expect_probability("label_smoothing", label_smoothing)
    device, logits, targets, class_weight = _cross_entropy_args(logits, targets, class_weight)
    R, C = shape_of(logits)
    terms = empty_like_on(device, (R, 3), logits.dtype)
    lse = empty_like_on(device, (R,), logits.dtype)
    if R:
        kernels_for(device, "losses").cross_entropy_forward(
            terms, lse, logits, targets, class_weight, float(label_smoothing), int(ignore_index))
    total, weight_sum, outside = _loss_sums(device, terms)
    if outside:
        raise ValueError(f"targets must lie in [0, {C}) (the number of classes) or equal "
                         f"ignore_index = {ignore_index}; {int(outside)} of {R} do not")
    return total, weight_sum, lse


def cross_entropy_backward(logits, lse, targets, *, scale, class_weight=None,
                           label_smoothing=0.0, ignore_index=-100):
    """``dlogits = scale * d(sum of weighted losses)/dlogits`` of :func:`cross_entropy`.

    Parameters
    ----------
    logits : array (..., C)
        The forward call's logits.
    lse : array (R,)
        What :func:`cross_entropy` returned.
    targets : int array (...)
        The forward call's targets.
    scale : float
        The factor (1 / weight_sum for the gradient of the mean).
    class_weight : array (C,), optional
        As in the forward call.
    label_smoothing : float, default 0.0
        As in the forward call.
    ignore_index : int, default -100
        As in the forward call.

    Returns
    -------
    array (..., C)
        dlogits.
    """
    device, logits_rows, targets, class_weight = _cross_entropy_args(logits, targets,
                                                                     class_weight)
    expect_shape("lse", lse, (shape_of(logits_rows)[0],), "(R,)")
    dlogits = empty_like_on(device, shape_of(logits), logits_rows.dtype)
    if logits_rows.size:
        kernels_for(device, "losses").cross_entropy_backward(
            rows(dlogits), logits_rows, lse, targets, class_weight, float(label_smoothing),
            int(ignore_index), float(scale))
    return dlogits
