"""Conformance rows of MoleculeAdapter: energies with their forces (clusters and periodic cells),
and a class per molecule with an atom feature in the tokens."""
import numpy as np

from conformance import Row
from molecule_helpers import make_structures
from seqattn.adapters import MoleculeAdapter
from seqattn.train import EnergyForceLoss, PropertyLoss

MODEL = dict(d_model=8, nhead=2, num_layers=1, dim_feedforward=16, bins=8, r_max=3.5,
             cutoff=3.2)
CLASSES = ("small", "medium", "large")


def energies_and_forces():
    """Twelve structures of H, C and O with pair-potential energies and forces, three periodic
    (a cell of 7 A, so the 3.2 A cutoff sees each neighbour once), padding inside two rows; the
    first eight (the training part) are smaller than the rest, so their statistics differ."""
    return make_structures(sizes=(2, 3, 2, 4, 3, 2, 3, 4, 6, 5, 7, 6), elements=(1, 6, 8),
                           periodic=(1, 6, 9), cell_length=7.0, pad_at=(3, 10), seed=5,
                           charges=True)


def sizes_as_classes():
    """The structures above with a class per molecule from its number of atoms (text labels)."""
    ds = energies_and_forces()
    n = (ds["atomic_number"].values > 0).sum(axis=1)
    labels = np.array([CLASSES[0] if k <= 2 else CLASSES[1] if k <= 4 else CLASSES[2]
                       for k in n], dtype=object)
    return ds.assign(size_class=("molecule", labels))


def energy_outputs(batch):
    """A molecule model's outputs that are the batch's own targets."""
    return dict(batch.targets)


def class_outputs(batch):
    """Confident logits of each molecule's own class."""
    labels = batch.targets["structure_classes"][:, 0]
    logits = np.full((len(labels), len(CLASSES)), -20.0)
    logits[np.arange(len(labels)), labels] = 20.0
    return {"structure_logits": logits}


BAD_INPUTS = [
    (lambda a, ds: a.batches(ds.drop_vars("positions")), ValueError, "no variable 'positions'"),
    (lambda a, ds: a.batches(ds, targets="charge"), ValueError,
     "'charge', which the adapter was not fitted on"),
    (lambda a, ds: MoleculeAdapter().fit(ds, targets={"energy": "sideways"}), ValueError,
     r"targets\['energy'\] = 'sideways'"),
    (lambda a, ds: MoleculeAdapter().fit(ds, targets="energy"), ValueError,
     "declare whether it grows"),
    (lambda a, ds: MoleculeAdapter().fit(ds, targets={"forces": "forces"}), ValueError,
     "no energy"),
    (lambda a, ds: a.encode(ds.assign(atomic_number=ds["atomic_number"].where(
        ds["molecule"] != "m4", 0))), ValueError, "molecule 'm4' has no atoms"),
    (lambda a, ds: MoleculeAdapter(energy="energy"), TypeError, "declared at fit"),
]

ROWS = [
    Row(name="molecule_energy_forces", make_dataset=energies_and_forces,
        make_adapter=MoleculeAdapter, targets={"energy": "energy", "forces": "forces"},
        prediction_name="energy", train={"molecule": slice(0, 8)},
        test={"molecule": slice(8, None)}, task="regression",
        loss=lambda: EnergyForceLoss(1.0, 1.0), prediction_dims=("molecule",),
        model_options=MODEL, bad_inputs=BAD_INPUTS, outputs=energy_outputs),
    Row(name="molecule_classes", make_dataset=sizes_as_classes,
        make_adapter=lambda: MoleculeAdapter(atom_features=["charge"]),
        targets=["size_class"], prediction_name="size_class",
        train=np.arange(12) % 3 != 2, test=np.arange(12) % 3 == 2, task="classification",
        loss=PropertyLoss, prediction_dims=("molecule",), model_options=MODEL,
        bad_inputs=[(lambda a, ds: a.model_config(task="regression"), ValueError,
                     "task = 'regression'")], outputs=class_outputs),
]
