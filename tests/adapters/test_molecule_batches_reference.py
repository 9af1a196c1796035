"""MoleculeBatches against a straightforward reference: every batch of shuffled epochs over a
selection of random structures, bit for bit, as a per-molecule loop over the raw Dataset
computes it (real atoms first, one-hot types, atom features normalized with the fitted mean and
std, targets less their references over the scale). The batches normalize the Dataset once,
not per batch; this pins that the values stay those of the per-batch computation."""
import numpy as np
import pytest
import xarray as xr

from molecule_helpers import make_structures
from seqattn.adapters.molecule import MoleculeAdapter


def _structures(seed):
    # at most 7 atoms per structure: the reference sums the element references one by one, as
    # NumPy does below 8 terms
    rng = np.random.default_rng(seed)
    sizes = tuple(int(n) for n in rng.integers(1, 8, size=11))
    ds = make_structures(seed=seed, sizes=sizes, pad_at=(2, 5), charges=True)
    real = ds["atomic_number"].values > 0
    shape = real.shape
    ds["hydrogens"] = (("molecule", "atom"), np.where(real, rng.integers(0, 4, shape), 0))
    ds["shell"] = (("molecule", "atom", "shell_dim"),
                   np.where(real[..., None], rng.normal(2.0, 3.0, shape + (2,)), np.nan))
    return ds.assign_coords(temperature=("molecule", rng.uniform(250, 350, len(sizes))))


def _reference(adapter, ds, row):
    """(real atom indices, tokens, positions, types, structure target, forces, charges) of
    structure `row` of `ds`, computed atom by atom."""
    z = ds["atomic_number"].values[row]
    atoms = np.flatnonzero(z > 0)
    types = np.array([adapter.atom_types.index(e) for e in z[atoms]], np.int32)
    stats = adapter.normalizer.stats

    def normalized(name):
        values = ds[name].values[row][atoms].reshape(len(atoms), -1)
        mean, std = stats[name].sel(stat="mean").values, stats[name].sel(stat="std").values
        return (values - mean) / std

    tokens = np.concatenate([np.eye(len(adapter.atom_types), dtype=np.float32)[types]] +
                            [normalized(n).astype(np.float32) for n in adapter.atom_features],
                            axis=1)
    energy = adapter.statistics["energy"]
    offset = 0.0
    for t in types:
        offset += energy["reference"][t][0]
    structure = np.float32((ds["energy"].values[row] - offset) / energy["scale"][0])
    forces = (ds["forces"].values[row][atoms] / energy["scale"][0]).astype(np.float32)
    charges = normalized("charge").astype(np.float32)
    return atoms, tokens, ds["positions"].values[row][atoms].astype(np.float32), types, \
        structure, forces, charges


@pytest.mark.parametrize("seed", [0, 1])
def test_shuffled_batches_match_the_per_molecule_reference_bit_for_bit(seed):
    ds = _structures(seed)
    adapter = MoleculeAdapter(atom_features=["hydrogens", "shell"]).fit(
        ds, targets={"energy": "energy", "forces": "forces", "charge": "atom"},
        where=np.arange(0, 11, 2))
    where = np.array([1, 2, 3, 5, 6, 7, 8, 10])
    selected = ds.isel(molecule=where)
    batches = adapter.batches(ds, where=where, batch_size=3, shuffle=True, seed=seed)
    seen = []
    for epoch in range(3):
        for batch in batches.epoch(epoch):
            rows = batch.placement.starts[:, 0]
            seen.extend(rows)
            references = [_reference(adapter, selected, row) for row in rows]
            N = max(len(r[0]) for r in references)
            assert batch.tokens.shape[:2] == (len(rows), N), "trimmed to the batch's largest"
            for b, (atoms, tokens, positions, types, structure, forces, charges) in \
                    enumerate(references):
                n = len(atoms)
                np.testing.assert_array_equal(batch.key_padding_mask[b],
                                              np.arange(N) >= n)
                np.testing.assert_array_equal(batch.tokens[b, :n], tokens)
                assert (batch.tokens[b, n:] == 0).all()
                np.testing.assert_array_equal(batch.structure.positions[b, :n], positions)
                np.testing.assert_array_equal(batch.structure.types[b, :n], types)
                np.testing.assert_array_equal(batch.coords["atom"][b, :n], atoms)
                np.testing.assert_array_equal(
                    batch.coords["temperature"][b, :n],
                    np.full(n, ds["temperature"].values[where[rows[b]]]))
                assert batch.targets["structure"][b, 0] == structure
                np.testing.assert_array_equal(batch.targets["forces"][b, :n], forces)
                np.testing.assert_array_equal(batch.targets["atoms"][b, :n], charges)
                assert np.isnan(batch.targets["atoms"][b, n:]).all()
    assert sorted(seen) == sorted(list(range(len(where))) * 3), "each structure once per epoch"


def test_batches_leave_the_dataset_as_it_was():
    ds = _structures(2)
    copy = ds.copy(deep=True)
    adapter = MoleculeAdapter(atom_features=["hydrogens", "shell"]).fit(
        ds, targets={"energy": "energy", "charge": "atom"})
    list(adapter.batches(ds, batch_size=4))
    xr.testing.assert_identical(ds, copy)
