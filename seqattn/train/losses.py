"""Losses for the three task shapes, each a forward that returns the mean loss as a float and a
backward that returns dLoss/dpred on the prediction's device.

Every loss is a weighted mean: sum_i w_i l_i / sum_i w_i, with w_i = 1 unless a weight says
otherwise. A NaN-aware loss (``skip_nan=True``) gives missing targets weight 0, so gaps in
observations neither add to the loss nor pull on the prediction; a batch with no target at all
has loss 0 and zero gradient. ``weight_sum`` after a call is the denominator, which lets the
fit loop average over batches exactly.
"""
import numpy as np

from .. import ops
from ..backend import CPU, device_of


def _on_device_of(array, like):
    """A host array moved next to ``like`` (loss weights built on the host)."""
    if device_of(like) == CPU:
        return array
    from numba import cuda

    return cuda.to_device(np.ascontiguousarray(array))


class Loss:
    """Base: subclasses set ``skips_nan`` and implement ``_sums`` and ``_gradient``."""

    skips_nan = False

    def __call__(self, pred, target, coords=None):
        """Mean loss of pred against target (a float); remembers what backward needs."""
        total, weight_sum, saved = self._sums(pred, target, coords)
        self.weight_sum = weight_sum
        self._saved = (pred, target, saved, 1.0 / weight_sum if weight_sum > 0 else 0.0)
        return total / weight_sum if weight_sum > 0 else 0.0

    def backward(self):
        """dLoss/dpred of the last call, shaped like pred."""
        if getattr(self, "_saved", None) is None:
            raise RuntimeError(f"{type(self).__name__}.backward needs a call of the loss first")
        pred, target, saved, scale = self._saved
        return self._gradient(pred, target, saved, scale)


class PointwiseLoss(Loss):
    """A loss that compares pred and target (same shape) element by element."""

    kind = None

    def __init__(self, skip_nan=False, delta=1.0):
        self.skips_nan = bool(skip_nan)
        self.delta = delta

    def _weight(self, pred, target, coords):
        return None

    def _sums(self, pred, target, coords):
        weight = self._weight(pred, target, coords)
        total, weight_sum = ops.pointwise_loss(pred, target, self.kind, weight=weight,
                                               delta=self.delta, skip_nan=self.skips_nan)
        return total, weight_sum, weight

    def _gradient(self, pred, target, weight, scale):
        return ops.pointwise_loss_backward(pred, target, self.kind, scale=scale, weight=weight,
                                           delta=self.delta, skip_nan=self.skips_nan)


class MSELoss(PointwiseLoss):
    """Mean squared error, as torch.nn.MSELoss, with missing targets optionally skipped.

    Call it as ``loss(pred, target)`` (same shapes) for the mean; ``backward()`` then gives
    dLoss/dpred on the prediction's device.

    Parameters
    ----------
    skip_nan : bool, default False
        Give NaN targets weight 0, so missing observations neither add to the loss nor pull on
        the prediction (a batch with no target at all has loss 0 and zero gradient).
    """

    kind = "mse"

    def __init__(self, skip_nan=False):
        super().__init__(skip_nan)


class MAELoss(PointwiseLoss):
    """Mean absolute error, as torch.nn.L1Loss, with missing targets optionally skipped.

    Parameters
    ----------
    skip_nan : bool, default False
        Give NaN targets weight 0, so missing observations neither add to the loss nor pull on
        the prediction (a batch with no target at all has loss 0 and zero gradient).
    """

    kind = "mae"

    def __init__(self, skip_nan=False):
        super().__init__(skip_nan)


class HuberLoss(PointwiseLoss):
    """Quadratic within ``delta`` of the target, linear beyond, as torch.nn.HuberLoss: less
    pulled by outliers than the squared error.

    Parameters
    ----------
    delta : float, default 1.0
        Where the loss turns from quadratic to linear, in the targets' units.
    skip_nan : bool, default False
        Give NaN targets weight 0, so missing observations neither add to the loss nor pull on
        the prediction (a batch with no target at all has loss 0 and zero gradient).
    """

    kind = "huber"

    def __init__(self, delta=1.0, skip_nan=False):
        super().__init__(skip_nan, delta)


class BCEWithLogitsLoss(PointwiseLoss):
    """Binary cross-entropy on logits, as torch.nn.BCEWithLogitsLoss (numerically stable for
    large logits).

    The predictions are logits; the targets are probabilities in [0, 1] (labels 0 and 1).

    Parameters
    ----------
    skip_nan : bool, default False
        Give NaN targets weight 0, so missing observations neither add to the loss nor pull on
        the prediction (a batch with no target at all has loss 0 and zero gradient).
    """

    kind = "bce_with_logits"

    def __init__(self, skip_nan=False):
        super().__init__(skip_nan)


class LatitudeWeightedMSELoss(PointwiseLoss):
    """MSE with each token weighted by cos(latitude), so that the crowded cells near the poles
    of a lat/lon grid count by the area they cover (as global weather models are scored).

    The latitudes (degrees) come from ``coords[coord]`` of each batch, shaped like the leading
    dims of the targets (the adapters' per-token (B, N) coordinates), or are fixed by ``lat``
    at construction. They broadcast over the remaining trailing dims (features).

    Parameters
    ----------
    lat : array, optional
        Fixed latitudes in degrees, shaped like the targets' leading dims; by default each
        batch's ``coords[coord]``.
    coord : str, default 'lat'
        The batch coordinate that holds the latitudes.
    skip_nan : bool, default False
        Give NaN targets weight 0 (missing cells, land in an ocean field).
    """

    kind = "mse"

    def __init__(self, lat=None, coord="lat", skip_nan=False):
        super().__init__(skip_nan)
        self.lat, self.coord = lat, coord

    def _weight(self, pred, target, coords):
        lat = self.lat
        if lat is None:
            if not coords or self.coord not in coords:
                raise ValueError(f"LatitudeWeightedMSELoss needs latitudes: pass lat= when "
                                 f"building it or batches whose coords hold {self.coord!r}")
            lat = coords[self.coord]
        lat = np.asarray(lat, dtype=np.float64)
        shape = tuple(int(s) for s in target.shape)
        if lat.shape != shape[:lat.ndim]:
            raise ValueError(f"latitudes have shape {lat.shape}, which is not the leading part "
                             f"of the targets' shape {shape}")
        weight = np.cos(np.deg2rad(lat)).reshape(lat.shape + (1,) * (len(shape) - lat.ndim))
        weight = np.broadcast_to(weight, shape).astype(np.dtype(pred.dtype))
        return _on_device_of(weight, pred)


class CrossEntropyLoss(Loss):
    """Softmax cross-entropy of logits (..., C) against integer class ids (...), as
    torch.nn.CrossEntropyLoss.

    Parameters
    ----------
    class_weight : array (C,), optional
        A weight per class (rare classes up); the loss is the weighted mean.
    label_smoothing : float, default 0.0
        Share of the target probability spread evenly over all classes.
    ignore_index : int, default -100
        The class id of unlabelled positions: they count for nothing, and the mean is over
        the labelled ones.
    """

    def __init__(self, class_weight=None, label_smoothing=0.0, ignore_index=-100):
        self.class_weight = None if class_weight is None else np.asarray(class_weight)
        self.label_smoothing = label_smoothing
        self.ignore_index = ignore_index

    def _class_weight(self, logits):
        if self.class_weight is None:
            return None
        return _on_device_of(self.class_weight.astype(np.dtype(logits.dtype)), logits)

    def _sums(self, logits, targets, coords):
        class_weight = self._class_weight(logits)
        total, weight_sum, lse = ops.cross_entropy(
            logits, targets, class_weight=class_weight, label_smoothing=self.label_smoothing,
            ignore_index=self.ignore_index)
        return total, weight_sum, (lse, class_weight)

    def _gradient(self, logits, targets, saved, scale):
        lse, class_weight = saved
        return ops.cross_entropy_backward(logits, lse, targets, scale=scale,
                                          class_weight=class_weight,
                                          label_smoothing=self.label_smoothing,
                                          ignore_index=self.ignore_index)
