"""Training on energies and forces: the parameter gradient that EnergyForceLoss.training_step
adds (first-order passes, a central difference along dLoss/dF) against float64 finite
differences of the whole loss, for each term alone and together; and the loss's NaN handling."""
import numpy as np
import pytest

from gradcheck import assert_gradient
from molecule_helpers import make_structures, small_model
from seqattn.adapters import MoleculeAdapter
from seqattn.train import EnergyForceLoss
from seqattn.train.batches import as_training_batch

CHECKED = ("embed.weight", "layers.0.self_attn.distance_bias.table",
           "layers.1.self_attn.in_proj_weight", "layers.1.feed_forward.linear1.weight",
           "layers.0.anchors.weight",
           "structure_head.weight", "atom_head.bias")


def _batch(periodic):
    ds = make_structures(sizes=(4, 3, 5), elements=(1, 8), periodic=periodic, cell_length=7.0,
                         charges=True, seed=1)
    adapter = MoleculeAdapter(dtype="float64").fit(
        ds, targets={"energy": "energy", "forces": "forces", "charge": "atom"})
    return adapter, as_training_batch(adapter.encode(ds))


@pytest.mark.parametrize("weights", [(1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (1.0, 10.0, 1.0)],
                         ids=["energy", "forces", "all"])
@pytest.mark.parametrize("periodic", [(), (0, 2)], ids=["clusters", "periodic"])
def test_the_training_gradient_matches_finite_differences_of_the_loss(weights, periodic):
    adapter, batch = _batch(periodic)
    model = small_model(num_types=adapter.num_types, force_step=1e-6)
    loss = EnergyForceLoss(*weights)
    model.zero_grad()
    value = loss.training_step(model, batch)
    assert value == pytest.approx(loss.batch_loss(model, batch)[0], rel=1e-12)
    parameters = dict(model.named_parameters())
    rng = np.random.default_rng(0)
    for name in CHECKED:
        p = parameters[name]
        numeric = np.full(p.shape, np.nan)
        for flat in rng.choice(p.size, min(3, p.size), replace=False):
            index = np.unravel_index(flat, p.shape)
            original = p.data[index]
            values = []
            for step in (1e-6, -1e-6):
                p.data[index] = original + step
                values.append(loss.batch_loss(model, batch)[0])
            p.data[index] = original
            numeric[index] = (values[0] - values[1]) / 2e-6
        assert_gradient(name, p.grad, numeric, rtol=1e-4, atol=1e-7)


def test_missing_targets_count_for_nothing():
    adapter, batch = _batch(())
    model = small_model(num_types=adapter.num_types)
    loss = EnergyForceLoss(1.0, 1.0, 1.0)
    base = loss.batch_loss(model, batch)[0]
    targets = {k: v.copy() for k, v in batch.targets.items()}
    pred = model.predict(batch.inputs, batch.key_padding_mask, structure=batch.structure)
    targets["forces"][0] = np.nan  # structure 0's forces unknown: its force error drops out
    targets["structure"][1] = np.nan
    value = loss(pred, targets, batch.key_padding_mask)
    gradients = loss.backward()
    assert np.all(gradients["forces"][0] == 0) and np.all(gradients["structure"][1] == 0)
    assert np.isfinite(value) and value != base
    n = (~batch.key_padding_mask).sum(axis=1)
    error = (pred["structure"] - batch.targets["structure"])[[0, 2], 0] / n[[0, 2]]
    force_error = (pred["forces"] - batch.targets["forces"])[1:]
    atom_error = pred["atoms"] - batch.targets["atoms"]
    want = (np.mean(error ** 2) + np.nanmean(force_error ** 2) + np.nanmean(atom_error ** 2))
    assert value == pytest.approx(want, rel=1e-10)
