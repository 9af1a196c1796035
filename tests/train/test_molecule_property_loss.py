"""PropertyLoss: the loss of per-structure values (extensive per atom, intensive as they are),
per-atom values and classes against a hand computation, and the parameter gradient that its
training step adds against float64 finite differences of the whole loss."""
import numpy as np
import pytest

from gradcheck import assert_gradient
from molecule_helpers import make_structures
from seqattn.adapters import MoleculeAdapter
from seqattn.data.targets import MISSING_CLASS
from seqattn.models import build
from seqattn.train import PropertyLoss
from seqattn.train.batches import as_training_batch

CHECKED = ("embed.weight", "layers.0.self_attn.distance_bias.table",
           "layers.1.feed_forward.linear1.weight", "structure_head.weight", "atom_head.bias")


def _batch():
    ds = make_structures(sizes=(4, 3, 5, 2), elements=(1, 8), charges=True, seed=2)
    n = (ds["atomic_number"] > 0).sum("atom")
    ds["total"] = ds["energy"] * 1.0  # extensive
    ds["mean_z"] = ds["atomic_number"].where(ds["atomic_number"] > 0).mean("atom")
    ds["big"] = ("molecule", np.where(n.values > 3, "yes", "no").astype(object))
    adapter = MoleculeAdapter(dtype="float64").fit(
        ds, targets={"total": "extensive", "mean_z": "intensive", "big": "intensive",
                     "charge": "atom"})
    model = build(adapter.model_config(d_model=8, nhead=2, num_layers=2, dim_feedforward=16,
                                       bins=8, r_max=3.5, cutoff=3.2))
    rng = np.random.default_rng(1)
    for name, p in model.named_parameters():
        if name.endswith("distance_bias.table"):
            p.data[...] = rng.normal(0, 1.5, p.shape)
    return adapter, model, as_training_batch(adapter.encode(ds))


def test_the_loss_is_per_atom_for_extensive_values_and_cross_entropy_for_classes():
    adapter, model, batch = _batch()
    assert model.config.structure_pooling == ("sum", "mean") and not model.config.forces
    loss = PropertyLoss(values_weight=1.0, atoms_weight=0.5, classes_weight=2.0)
    value, pred, targets = loss.batch_loss(model, batch)
    n = (~batch.key_padding_mask).sum(axis=1)
    error = pred["structure"] - targets["structure"]
    values = np.mean(np.concatenate([error[:, 0] / n, error[:, 1]]) ** 2)
    atoms = np.nanmean((pred["atoms"] - targets["atoms"]) ** 2)
    logits = pred["structure_logits"]
    log_p = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
    labels = targets["structure_classes"][:, 0]
    cross_entropy = -np.mean(log_p[np.arange(len(labels)), labels])
    assert value == pytest.approx(values + 0.5 * atoms + 2.0 * cross_entropy, rel=1e-10)
    unlabelled = dict(targets, structure_classes=np.full_like(targets["structure_classes"],
                                                              MISSING_CLASS))
    assert loss(pred, unlabelled, batch.key_padding_mask, model.config) == pytest.approx(
        values + 0.5 * atoms, rel=1e-10)
    assert "structure_logits" not in loss.backward(), "no labelled class, no gradient"


def test_the_training_gradient_matches_finite_differences_of_the_loss():
    adapter, model, batch = _batch()
    loss = PropertyLoss(values_weight=1.0, atoms_weight=1.0, classes_weight=1.0)
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
        assert_gradient(name, p.grad, numeric, rtol=1e-5, atol=1e-8)


def test_bad_weights_and_a_model_without_the_outputs_are_named():
    with pytest.raises(ValueError, match="classes_weight must be a number >= 0"):
        PropertyLoss(classes_weight=-1)
    _, model, batch = _batch()
    pred = model.predict(batch.inputs, batch.key_padding_mask, structure=batch.structure)
    del pred["structure_logits"]
    with pytest.raises(ValueError, match="targets have 'structure_classes' but the model"):
        PropertyLoss()(pred, batch.targets, batch.key_padding_mask, model.config)
