"""MSE weighted per sample: a deep mutational scan's variants measured with different errors
count by their inverse variance, 1 / dy**2 (the weights the adapter puts in each batch's
``coords["weight"]``: ``adapter.batches(ds, weights="w")`` with ``ds["w"] = 1 / ds.dy**2``)."""
import numpy as np

from .losses import PointwiseLoss, _on_device_of


class WeightedMSELoss(PointwiseLoss):
    """Mean squared error with each target weighted by its sample's weight: sum w (p - y)^2 /
    sum w.

    The weights come from each batch's ``coords[coord]``: (B, N) per token, the same along a
    sample's tokens for targets per sample (B, T), whose weight is then the first token's.

    Parameters
    ----------
    coord : str, default 'weight'
        The batch coordinate that holds the weights.
    skip_nan : bool, default False
        Give NaN targets weight 0.
    """

    kind = "mse"

    def __init__(self, coord="weight", skip_nan=False):
        super().__init__(skip_nan)
        self.coord = coord

    def _weight(self, pred, target, coords):
        if not coords or self.coord not in coords:
            raise ValueError(f"WeightedMSELoss needs the weights in the batches' coords "
                             f"{self.coord!r}: make the batches with adapter.batches(ds, "
                             "weights=<variable>)")
        weight = np.asarray(coords[self.coord], dtype=np.float64)
        shape = tuple(int(s) for s in target.shape)
        if weight.shape != shape[:weight.ndim]:  # targets per sample: one weight each
            weight = weight[:, 0] if weight.ndim == 2 and weight.shape[0] == shape[0] else None
        if weight is None:
            raise ValueError(f"weights have shape {np.shape(coords[self.coord])}, which fits "
                             f"neither targets per token nor per sample of shape {shape}")
        weight = weight.reshape(weight.shape + (1,) * (len(shape) - weight.ndim))
        weight = np.broadcast_to(weight, shape).astype(np.dtype(pred.dtype))
        return _on_device_of(weight, pred)
