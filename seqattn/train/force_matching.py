"""Training energies and forces together: a weighted loss on both, and the step that gives its
parameter gradient with first-order backward passes only.

The forces are F = -dE/dx, so a loss on them depends on the parameters through a derivative,
and its parameter gradient is a second derivative, which seqattn's reverse mode does not
record. With v = dLoss/dF held fixed,

    dLoss_F/dθ = sum_i v_i dF_i/dθ = -d/dε [dE/dθ (x + ε v)] at ε = 0
               ≈ -[dE/dθ (x + ε v) - dE/dθ (x - ε v)] / (2 ε),

a directional derivative of the ordinary parameter gradient along the positions. A step then
takes three first-order gradients of the model (:meth:`MoleculeModel.differentiate`):

1. at x, parameters frozen: the outputs and the forces, hence the loss and its gradients
   g (for the energies and other outputs) and v (for the forces);
2. and 3. at x ± ε v, each backward carrying g / 2 for the outputs (their mean is the gradient
   at x up to O(ε²)) and ∓ 1 / (2 ε) for the energy, which together add the whole gradient to
   the parameters' ``.grad``. Both run as one pass over the batch taken twice (its structures
   do not interact), which halves the passes' fixed costs at the small batches of training.

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

from ..kernels.cpu.gemm.blas_library import single_threaded_blas
from .property_loss import PropertyLoss


class EnergyForceLoss(PropertyLoss):
    """``energy_weight`` * MSE of the per-structure values (the energy per atom, (pred -
    target) / n_atoms, and any other per-structure values as :class:`PropertyLoss` weighs them)
    + ``forces_weight`` * MSE of the force components + ``atoms_weight`` * MSE of the per-atom
    values + ``classes_weight`` * cross entropy of class targets, each a mean over the known
    (non-NaN) targets of its kind, on the dicts of normalized arrays that
    :class:`seqattn.adapters.MoleculeAdapter` batches carry and molecule models predict
    (``"structure"``, ``"forces"``, ``"atoms"``, ...).

    Parameters
    ----------
    energy_weight : float, default 1.0
        Weight of the per-structure values' MSE (the energy per atom).
    forces_weight : float, default 10.0
        Weight of the force components' MSE.
    atoms_weight : float, default 1.0
        Weight of the per-atom values' MSE.
    classes_weight : float, default 1.0
        Weight of the class targets' cross entropy.
    """

    def __init__(self, energy_weight=1.0, forces_weight=10.0, atoms_weight=1.0,
                 classes_weight=1.0):
        self.weights = self._checked({"energy": energy_weight, "forces": forces_weight,
                                      "atoms": atoms_weight, "classes": classes_weight})
        self._gradients = None

    def _terms(self):
        return ((("structure", "structure", "energy"),) + self.TERMS[1:]
                + (("forces", "forces", "forces"),))

    def training_step(self, model, batch):
        """The loss of one batch; adds its whole parameter gradient (energies, forces and
        other outputs) into the parameters' ``.grad`` in two passes (module docstring)."""
        with single_threaded_blas():  # once for the passes' launches (PropertyLoss's)
            return self._passes(model, batch)

    def _passes(self, model, batch):
        inputs, mask, structure, targets = self._parts(batch)
        pred = model.predict(inputs, mask, structure=structure)
        value = self(pred, targets, mask, model.config)
        g = self.backward()
        v = g.get("forces")
        largest = 0.0 if v is None else float(np.abs(v).max(initial=0.0))
        if largest == 0.0:  # no force term: one ordinary backward
            return super().training_step(model, batch)

        def douts(share, energy):
            """share * g for the outputs, plus ``energy`` for every structure's energy."""
            def of(per_structure, atoms):
                d_structure, d_atoms = model.output_gradients(
                    {k: share * d for k, d in g.items() if k != "forces"},
                    (per_structure, atoms))
                energy_part = model.energy_gradient(per_structure, atoms, energy)[0]
                return (energy_part if d_structure is None else d_structure + energy_part,
                        d_atoms)
            return of

        epsilon = model.config.force_step / largest
        positions = np.asarray(structure.positions, np.float64)
        shifts = (1.0, -1.0)
        halves = [douts(0.5, -sign / (2 * epsilon)) for sign in shifts]
        B = len(positions)

        def both(per_structure, atoms):
            """The halves' output gradients, joined as the outputs are."""
            parts = [of(*(None if o is None else o[k * B:(k + 1) * B]
                          for o in (per_structure, atoms)))
                     for k, of in enumerate(halves)]
            return tuple(None if part[0] is None else np.concatenate(part)
                         for part in zip(*parts))

        twice = replace(structure.batch_taken(2), positions=np.concatenate(
            [positions + sign * epsilon * v for sign in shifts]))
        model.differentiate(np.concatenate([inputs, inputs]),
                            None if mask is None else np.concatenate([mask, mask]), twice,
                            both, parameters=True, positions=False)
        return value
