"""The loss of a molecule model's property targets: per-structure values (extensive or
intensive), per-atom values and classes, on the dicts of normalized arrays that
:class:`seqattn.adapters.MoleculeAdapter` batches carry and molecule models predict.

``fit`` hands each batch to :meth:`PropertyLoss.training_step` (and, for validation, to
:meth:`PropertyLoss.batch_loss`), which run the model themselves: one forward and one backward
per step. Energies trained with their forces need :class:`~seqattn.train.EnergyForceLoss`.
"""
import numpy as np

from ..data.targets import MISSING_CLASS
from ..kernels.cpu.gemm.blas_library import single_threaded_blas


def masked_mse(pred, target, divisor=None):
    """(sum of squared errors over known targets, their count, d sum / d pred); `divisor`
    (broadcastable to pred) divides each error first (per-atom energies)."""
    pred = np.asarray(pred, np.float64)
    target = np.asarray(target, np.float64)
    if pred.shape != target.shape:
        raise ValueError(f"predictions have shape {pred.shape} but targets {target.shape}")
    known = np.isfinite(target)
    scale = 1.0 if divisor is None else 1.0 / divisor
    error = np.where(known, (pred - target) * scale, 0.0)
    return float((error ** 2).sum()), int(known.sum()), 2 * error * scale


def masked_cross_entropy(logits, labels, widths):
    """(sum of cross entropies over labelled entries, their count, d sum / d logits): logits
    (..., sum(widths)) hold one block per class target, labels (..., len(widths)) its class
    indices (MISSING_CLASS: unlabelled)."""
    logits = np.asarray(logits, np.float64)
    labels = np.asarray(labels)
    if labels.shape[-1] != len(widths) or logits.shape[-1] != sum(widths) or \
            logits.shape[:-1] != labels.shape[:-1]:
        raise ValueError(f"class logits of shape {logits.shape} do not fit labels of shape "
                         f"{labels.shape} with {list(widths)} classes per target")
    total, count = 0.0, 0
    gradient = np.zeros_like(logits)
    start = 0
    for k, width in enumerate(widths):
        block = logits[..., start:start + width]
        label = labels[..., k]
        known = label != MISSING_CLASS
        shifted = block - block.max(axis=-1, keepdims=True)
        log_p = shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))
        chosen = np.take_along_axis(log_p, np.where(known, label, 0)[..., None], axis=-1)[..., 0]
        total -= float(np.where(known, chosen, 0.0).sum())
        count += int(known.sum())
        d = np.exp(log_p)
        np.put_along_axis(d, np.where(known, label, 0)[..., None],
                          np.take_along_axis(d, np.where(known, label, 0)[..., None], axis=-1)
                          - 1.0, axis=-1)
        gradient[..., start:start + width] = np.where(known[..., None], d, 0.0)
        start += width
    return total, count, gradient


class PropertyLoss:
    """``values_weight`` * MSE of the per-structure values + ``atoms_weight`` * MSE of the
    per-atom values + ``classes_weight`` * cross entropy of the class targets (per structure
    and per atom), each a mean over the known (non-NaN, labelled) targets of its kind.

    An extensive value (pooled by a sum over atoms, like an energy) enters per atom,
    (pred - target) / n_atoms, so large structures do not dominate; an intensive one (pooled by
    a mean) as it is. Which is which is the model's ``config.structure_pooling``, as
    ``MoleculeAdapter.model_config`` set it from the targets' declared kinds.

    Parameters
    ----------
    values_weight : float, default 1.0
        Weight of the per-structure values' MSE.
    atoms_weight : float, default 1.0
        Weight of the per-atom values' MSE.
    classes_weight : float, default 1.0
        Weight of the class targets' cross entropy.
    """

    skips_nan = True
    TERMS = (("structure", "structure", "values"), ("atoms", "atoms", "atoms"),
             ("structure_classes", "structure_logits", "classes"),
             ("atom_classes", "atom_logits", "classes"))

    def __init__(self, values_weight=1.0, atoms_weight=1.0, classes_weight=1.0):
        self.weights = self._checked({"values": values_weight, "atoms": atoms_weight,
                                      "classes": classes_weight})
        self._gradients = None

    @staticmethod
    def _checked(weights):
        for name, w in weights.items():
            if isinstance(w, bool) or not (isinstance(w, (int, float)) and w >= 0):
                raise ValueError(f"{name}_weight must be a number >= 0, got {w!r}")
        return {name: float(w) for name, w in weights.items()}

    def _terms(self):
        return self.TERMS

    def __call__(self, pred, target, key_padding_mask, config=None):
        """The loss of predictions `pred` against `target` (dicts, module docstring) for a
        batch with this `key_padding_mask` (B, N); `config` the model's (its pooling and
        classes; None: every structure value extensive, one class target per group).
        Remembers the gradients for :meth:`backward`."""
        n_atoms = (~np.asarray(key_padding_mask)).sum(axis=1).astype(np.float64)
        total, gradients = 0.0, {}
        for key, output, weight_name in self._terms():
            weight = self.weights[weight_name]
            if key not in target or weight == 0:
                continue
            if output not in pred:
                raise ValueError(f"the targets have {key!r} but the model predicts "
                                 f"{sorted(pred)}; build the model with the adapter's "
                                 "model_config(...)")
            if key.endswith("classes"):
                widths = (pred[output].shape[-1],) if config is None else \
                    getattr(config, key)
                part, count, d = masked_cross_entropy(pred[output], target[key], widths)
            else:
                part, count, d = masked_mse(pred[output], target[key],
                                            self._divisor(key, n_atoms, config))
            if count:
                total += weight * part / count
                gradients[output] = weight * d / count
        self.weight_sum = len(n_atoms)
        self._gradients = gradients
        return total

    @staticmethod
    def _divisor(key, n_atoms, config):
        if key != "structure":
            return None
        if config is None:
            return n_atoms[:, None]
        extensive = np.array([p == "sum" for p in config.pooling()[:config.structure_outputs]])
        return np.where(extensive, n_atoms[:, None], 1.0)

    def backward(self):
        """dLoss/d each prediction of the last call: a dict like the predictions (float64)."""
        if self._gradients is None:
            raise RuntimeError(f"{type(self).__name__}.backward needs a call of the loss first")
        return self._gradients

    # ---- what fit calls ------------------------------------------------------------------

    def _parts(self, batch):
        structure = getattr(batch, "structure", None)
        if structure is None or not isinstance(batch.targets, dict):
            raise ValueError(f"{type(self).__name__} trains on molecule batches: a structure and "
                             "a dict of targets, as MoleculeAdapter.batches gives them")
        return batch.inputs, batch.key_padding_mask, structure, batch.targets

    def batch_loss(self, model, batch):
        """(loss, predictions, targets) of one batch (for evaluate)."""
        inputs, mask, structure, targets = self._parts(batch)
        pred = model.predict(inputs, mask, structure=structure)
        return self(pred, targets, mask, model.config), pred, targets

    def training_step(self, model, batch):
        """The loss of one batch; adds its parameter gradient into the parameters' ``.grad``
        (one forward and one backward: the loss is taken on the recorded forward's outputs)."""
        inputs, mask, structure, targets = self._parts(batch)
        value = {}

        def douts(per_structure, atoms):
            value["loss"] = self(model.named_outputs(per_structure, atoms), targets, mask,
                                 model.config)
            return model.output_gradients(self.backward(), (per_structure, atoms))

        # BLAS held at one thread once for the step's launches (fit holds it for an epoch; a
        # step called on its own paid for setting and restoring it at every launch)
        with single_threaded_blas():
            model.differentiate(inputs, mask, structure, douts, parameters=True,
                                positions=False)
        return value["loss"]
