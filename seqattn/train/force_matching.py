"""Training energies and forces together: a weighted loss on both, and the step that gives its
parameter gradient with first-order backward passes only.

The forces are F = -dE/dx, so a loss on them depends on the parameters through a derivative,
and its parameter gradient is a second derivative, which seqattn's reverse mode does not
record. With v = dLoss/dF held fixed,

    dLoss_F/dθ = sum_i v_i dF_i/dθ = -d/dε [dE/dθ (x + ε v)] at ε = 0
               ≈ -[dE/dθ (x + ε v) - dE/dθ (x - ε v)] / (2 ε),

a directional derivative of the ordinary parameter gradient along the positions. A step is
then three forward and backward passes of the model (:meth:`MoleculeModel.differentiate`):

1. at x, parameters frozen: the outputs and the forces, hence the loss and its gradients
   g (for the energies and other outputs) and v (for the forces);
2. and 3. at x ± ε v, each backward carrying g / 2 for the outputs (their mean is the gradient
   at x up to O(ε²)) and ∓ 1 / (2 ε) for the energy, which together add the whole gradient to
   the parameters' ``.grad``.

ε is chosen so that the largest displacement ε max|v| is the model's ``force_step`` (1e-3
Angstrom by default): small next to the distance bins, large next to float32 rounding of the
positions. tests/train/test_molecule_force_matching.py checks the result against float64 finite
differences of the whole loss. A pair whose distance crosses a bin edge of the linearly
interpolated distance table within ±ε sees a mixture of the two bins' slopes, a small bias.

``fit`` hands a batch to :meth:`EnergyForceLoss.training_step` (and, for validation, to
:meth:`EnergyForceLoss.batch_loss`) instead of running its own forward and backward.
"""
from dataclasses import replace

import numpy as np


def _masked_mse(pred, target, divisor=None):
    """(sum of squared errors over known targets, their count, d sum / d pred); ``divisor``
    (B,) divides each row's error first (per-atom energies)."""
    pred = np.asarray(pred, np.float64)
    target = np.asarray(target, np.float64)
    if pred.shape != target.shape:
        raise ValueError(f"predictions have shape {pred.shape} but targets {target.shape}")
    known = np.isfinite(target)
    scale = 1.0 if divisor is None else 1.0 / divisor.reshape((-1,) + (1,) * (pred.ndim - 1))
    error = np.where(known, (pred - target) * scale, 0.0)
    return float((error ** 2).sum()), int(known.sum()), 2 * error * scale


class EnergyForceLoss:
    """``energy_weight`` * MSE of the per-structure outputs per atom ((pred - target) / n_atoms,
    the energy and any other extensive targets) + ``forces_weight`` * MSE of the force
    components + ``atoms_weight`` * MSE of the per-atom outputs, each a mean over the known
    (non-NaN) targets of its kind, on the dicts of normalized arrays that
    :class:`seqattn.adapters.MoleculeAdapter` batches carry and molecule models predict
    (``"structure"``, ``"forces"``, ``"atoms"``)."""

    skips_nan = True

    def __init__(self, energy_weight=1.0, forces_weight=10.0, atoms_weight=1.0):
        for name, w in (("energy_weight", energy_weight), ("forces_weight", forces_weight),
                        ("atoms_weight", atoms_weight)):
            if not (isinstance(w, (int, float)) and w >= 0):
                raise ValueError(f"{name} must be a number >= 0, got {w!r}")
        self.weights = {"structure": float(energy_weight), "forces": float(forces_weight),
                        "atoms": float(atoms_weight)}
        self._gradients = None

    def __call__(self, pred, target, key_padding_mask):
        """The loss of predictions ``pred`` against ``target`` (dicts as above) for a batch
        with this ``key_padding_mask`` (B, N); remembers the gradients for :meth:`backward`."""
        n_atoms = (~np.asarray(key_padding_mask)).sum(axis=1).astype(np.float64)
        total, gradients = 0.0, {}
        for key, weight in self.weights.items():
            if key not in target or weight == 0:
                continue
            if key not in pred:
                raise ValueError(f"the targets have {key!r} but the model predicts "
                                 f"{sorted(pred)}; build the model with the adapter's "
                                 "model_sizes()")
            sse, count, d = _masked_mse(pred[key], target[key],
                                        n_atoms if key == "structure" else None)
            if count:
                total += weight * sse / count
                gradients[key] = weight * d / count
        self.weight_sum = len(n_atoms)
        self._gradients = gradients
        return total

    def backward(self):
        """dLoss/d each prediction of the last call: a dict like the predictions (float64)."""
        if self._gradients is None:
            raise RuntimeError("EnergyForceLoss.backward needs a call of the loss first")
        return self._gradients

    # ---- what fit calls ------------------------------------------------------------------

    @staticmethod
    def _parts(batch):
        structure = getattr(batch, "structure", None)
        if structure is None or not isinstance(batch.targets, dict):
            raise ValueError("EnergyForceLoss trains on molecule batches: a structure and a "
                             "dict of targets, as MoleculeAdapter.batches gives them")
        return batch.inputs, batch.key_padding_mask, structure, batch.targets

    def batch_loss(self, model, batch):
        """(loss, predictions, targets) of one batch, the forces included (for evaluate)."""
        inputs, mask, structure, targets = self._parts(batch)
        pred = model.predict(inputs, mask, structure=structure)
        return self(pred, targets, mask), pred, targets

    def training_step(self, model, batch):
        """The loss of one batch; adds its whole parameter gradient (energies, forces and
        other outputs) into the parameters' ``.grad`` in three passes (module docstring)."""
        inputs, mask, structure, targets = self._parts(batch)
        pred = model.predict(inputs, mask, structure=structure)
        value = self(pred, targets, mask)
        g = self.backward()

        def douts(share, energy):
            """share * g for the outputs, plus ``energy`` for every structure's energy."""
            def of(per_structure, atoms):
                d_structure = None
                if per_structure is not None:
                    d_structure = model.energy_gradient(per_structure, atoms, energy)[0]
                    if "structure" in g:
                        d_structure = d_structure + share * g["structure"]
                return d_structure, None if "atoms" not in g else share * g["atoms"]
            return of

        v = g.get("forces")
        largest = 0.0 if v is None else float(np.abs(v).max(initial=0.0))
        if largest == 0.0:  # no force term: one ordinary backward
            model.differentiate(inputs, mask, structure, douts(1.0, 0.0), parameters=True)
            return value
        epsilon = model.config.force_step / largest
        positions = np.asarray(structure.positions, np.float64)
        for sign in (1.0, -1.0):
            shifted = replace(structure, positions=positions + sign * epsilon * v)
            model.differentiate(inputs, mask, shifted, douts(0.5, -sign / (2 * epsilon)),
                                parameters=True)
        return value
