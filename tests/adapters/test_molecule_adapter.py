"""MoleculeAdapter: the Dataset layout, batches (padding, types, cells, targets), the
normalization round trip, decoding back onto the Dataset, epochs, storage, from_ase and the
errors for bad structures. Intensive targets and classes: test_molecule_targets.py."""
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

import seqattn
from molecule_helpers import make_structures
from seqattn.adapters.molecule import MoleculeAdapter
from seqattn.adapters.molecule_layout import batch_cell, gather
from seqattn.data.protocol import NotFittedError
from seqattn.readers import from_ase, read_structures

ENERGY_FORCES = {"energy": "energy", "forces": "forces"}


def _adapter(ds, targets=(), **options):
    return MoleculeAdapter(**options).fit(ds, targets={**ENERGY_FORCES,
                                                       **{n: "atom" for n in targets}})


def test_a_batch_puts_real_atoms_first_with_their_types_positions_and_indices():
    ds = make_structures(pad_at=(1,))
    adapter = _adapter(ds)
    assert adapter.atom_types == [1, 6, 8]
    batch = adapter.encode(ds)
    z = ds["atomic_number"].values
    for m in range(ds.sizes["molecule"]):
        atoms = np.flatnonzero(z[m] > 0)
        n = len(atoms)
        assert not batch.key_padding_mask[m, :n].any() and batch.key_padding_mask[m, n:].all()
        np.testing.assert_array_equal(batch.coords["atom"][m, :n], atoms)
        assert np.isnan(batch.coords["atom"][m, n:]).all()
        np.testing.assert_array_equal(np.array(adapter.atom_types)[batch.structure.types[m, :n]],
                                      z[m, atoms])
        np.testing.assert_array_equal(batch.tokens[m, :n].argmax(-1), batch.structure.types[m, :n])
        assert (batch.tokens[m, :n].sum(-1) == 1).all() and (batch.tokens[m, n:] == 0).all()
        np.testing.assert_allclose(batch.structure.positions[m, :n],
                                   ds["positions"].values[m, atoms], rtol=1e-6)
    assert batch.tokens.shape[1] == (z > 0).sum(axis=1).max(), "trimmed to the largest"
    assert batch.structure.cell is None


def test_coordinates_of_the_molecules_reach_every_atom_of_the_batch():
    ds = make_structures(pad_at=(1,)).assign_coords(
        temperature=("molecule", [300.0, 310.0, 320.0, 330.0]),
        name=("molecule", ["a", "b", "c", "d"]))
    batch = _adapter(ds).encode(ds, where=[3, 1])
    real = ~batch.key_padding_mask
    assert set(batch.coords) == {"atom", "molecule", "temperature"}, "text names stay out"
    # the rows as `where` orders them; a label's index is the one along the whole Dataset
    for name, want in (("molecule", [3.0, 1.0]), ("temperature", [330.0, 310.0])):
        values = batch.coords[name]
        np.testing.assert_array_equal(np.where(real, values, -1),
                                      np.where(real, np.array(want)[:, None], -1))
        assert np.isnan(values[~real]).all()


def test_decoding_the_normalized_targets_gives_the_dataset_back():
    ds = make_structures(pad_at=(2,), charges=True)
    adapter = _adapter(ds, targets=["charge"])
    batch = adapter.encode(ds)
    assert abs(np.nanmean(batch.targets["atoms"])) < 1e-6, "charges are standardized"
    assert np.sqrt(np.nanmean(batch.targets["forces"] ** 2)) == pytest.approx(1, rel=1e-5)
    decoded = adapter.decode(batch, {"structure": batch.targets["structure"],
                                     "atoms": batch.targets["atoms"],
                                     "forces": batch.targets["forces"]})
    np.testing.assert_allclose(decoded["energy"], ds["energy"].values, rtol=1e-5)
    xr.testing.assert_equal(decoded["molecule"], ds["molecule"])
    real = ds["atomic_number"] > 0
    for name in ("forces", "charge"):  # back at the atoms' own places, padding inside a row
        assert decoded[name].dims == ds[name].dims
        np.testing.assert_allclose(decoded[name].where(real).values,
                                   ds[name].where(real).values, rtol=1e-5, atol=1e-6)
        assert decoded[name].where(~real).isnull().all()
    assert decoded["energy"].attrs["units"] == "eV"


def test_energy_references_are_fitted_per_element():
    # energy = 0.3 z + pair terms: the per-element references take most of it
    ds = make_structures(sizes=(3, 5, 2, 4, 6, 3, 5), seed=3)
    adapter = _adapter(ds)
    reference = np.array(adapter.statistics["energy"]["reference"])[:, 0]
    np.testing.assert_allclose(reference, 0.3 * np.array([1, 6, 8]), atol=0.6)
    batch = adapter.encode(ds)
    residual = batch.targets["structure"][:, 0] * adapter.statistics["energy"]["scale"][0]
    assert np.abs(residual).max() < np.abs(ds["energy"].values).max() / 3


class PositionsModel:
    """A stand-in model whose predictions are known functions of the batch: energy = number of
    atoms, forces = positions, charge = type index."""

    def predict(self, tokens, key_padding_mask, structure):
        real = ~key_padding_mask
        return {"structure": real.sum(axis=1, keepdims=True).astype(float),
                "atoms": structure.types[..., None].astype(float),
                "forces": structure.positions}


def test_predict_puts_values_back_on_the_molecule_and_atom_dims():
    ds = make_structures(pad_at=(0, 3), charges=True)
    adapter = _adapter(ds, targets=["charge"])
    out = adapter.predict(PositionsModel(), ds.drop_vars(["energy", "forces", "charge"]),
                          batch_size=3)
    assert set(out.data_vars) == {"energy", "forces", "charge"}
    assert out["forces"].dims == ("molecule", "atom", "xyz")
    assert out["charge"].dims == ("molecule", "atom") and out["energy"].dims == ("molecule",)
    xr.testing.assert_equal(out["molecule"], ds["molecule"])
    real = ds["atomic_number"] > 0
    scale = adapter.statistics["energy"]["scale"][0]
    np.testing.assert_allclose(out["forces"].where(real).values,
                               (ds["positions"] * scale).where(real).values, rtol=1e-6)
    reference = dict(zip(adapter.atom_types,
                         np.array(adapter.statistics["energy"]["reference"])[:, 0]))
    z = ds["atomic_number"].values
    want = [real.values[m].sum() * scale + sum(reference[e] for e in z[m] if e)
            for m in range(len(z))]
    np.testing.assert_allclose(out["energy"].values, want, rtol=1e-6)
    stats = adapter.normalizer.stats["charge"]
    type_index = {e: i for i, e in enumerate(adapter.atom_types)}
    want_charge = np.where(z > 0, np.vectorize(lambda e: type_index.get(e, 0))(z)
                           * float(stats.sel(stat="std")) + float(stats.sel(stat="mean")), np.nan)
    np.testing.assert_allclose(out["charge"].values, want_charge, rtol=1e-6)


def test_epochs_shuffle_reproducibly_and_cover_every_structure_once():
    ds = make_structures(sizes=(3, 5, 2, 4, 1, 6, 2))
    adapter = _adapter(ds)
    batches = adapter.batches(ds, batch_size=3, shuffle=True, seed=4)
    assert len(batches) == 3

    def rows(epoch):
        return [b.placement.starts[:, 0].tolist() for b in batches.epoch(epoch)]

    assert rows(1) == rows(1) and rows(0) != rows(1)
    assert sorted(sum(rows(2), [])) == list(range(7))
    n = (ds["atomic_number"].values > 0).sum(axis=1)
    for batch in batches.epoch(0):
        assert batch.tokens.shape[1] == n[batch.placement.starts[:, 0]].max()
        assert set(batch.targets) == {"structure", "forces"}


def test_a_saved_adapter_encodes_alike(tmp_path):
    ds = make_structures(periodic=(1,), charges=True)
    adapter = _adapter(ds, targets=["charge"])
    seqattn.save(adapter, tmp_path / "adapter")
    again = seqattn.load(tmp_path / "adapter")
    a, b = adapter.encode(ds), again.encode(ds)
    for name in ("tokens", "key_padding_mask"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
    np.testing.assert_array_equal(a.structure.cell, b.structure.cell)
    for key in a.targets:
        np.testing.assert_array_equal(a.targets[key], b.targets[key])


def test_an_atom_feature_with_its_own_dims_gives_a_token_column_per_value(tmp_path):
    """A (molecule, atom, k) feature (a one-hot hybridization, say) adds k token columns, and
    in_features, which models are built with, counts them."""
    ds = make_structures()
    rng = np.random.default_rng(0)
    ds["onehot"] = (("molecule", "atom", "kind"),
                    rng.integers(0, 2, (ds.sizes["molecule"], ds.sizes["atom"], 3)).astype(float))
    adapter = MoleculeAdapter(atom_features=["onehot"]).fit(ds, targets={"energy": "energy"})
    batch = adapter.encode(ds)
    assert adapter.in_features == len(adapter.atom_types) + 3 == batch.tokens.shape[-1]
    seqattn.save(adapter, tmp_path / "adapter")
    assert seqattn.load(tmp_path / "adapter").in_features == adapter.in_features
    with pytest.raises(ValueError, match="'onehot' has 2 values per atom here but 3"):
        adapter.encode(ds.isel(kind=slice(0, 2)))


def _minimum_image_distances(positions, cell):
    """Brute force over the images -1..1 of every lattice vector."""
    shifts = np.array(np.meshgrid(*[[-1, 0, 1]] * 3, indexing="ij")).reshape(3, -1).T @ cell
    r = positions[:, None, None] - positions[None, :, None] + shifts[None, None]
    return np.linalg.norm(r, axis=-1).min(axis=-1)


def test_clusters_and_open_axes_get_cells_whose_minimum_image_is_the_direct_one():
    ds = make_structures(sizes=(4, 5, 3), periodic=(0,), seed=2)
    pbc = ds["pbc"].values.copy()
    cell = ds["cell"].values.copy()
    pbc[2] = [True, True, False]  # a slab: periodic in x and y only
    cell[2] = [[3.5, 0, 0], [1.2, 3.1, 0], [0, 0, 0]]
    ds = ds.assign(pbc=(("molecule", "xyz"), pbc), cell=(("molecule", "cell_vector", "xyz"), cell))
    s = gather(ds)
    cells = batch_cell(s)
    np.testing.assert_array_equal(cells[0], ds["cell"].values[0])
    np.testing.assert_array_equal(cells[2][:2], cell[2][:2])
    assert abs(cells[2][2] @ cells[2][0]) < 1e-9 and abs(cells[2][2] @ cells[2][1]) < 1e-9
    for m in (1, 2):  # the cluster and the slab's open axis
        x = s.positions[m][~s.pad[m]]
        direct = np.linalg.norm(x[:, None] - x[None], axis=-1)
        if m == 1:
            np.testing.assert_allclose(_minimum_image_distances(x, cells[m]), direct)
        else:  # along z no image is nearer than the direct displacement
            slab = _minimum_image_distances(x, cells[m])
            in_plane = _minimum_image_distances(x, np.vstack([cell[2][:2], [0, 0, 1e3]]))
            np.testing.assert_allclose(slab, in_plane)


@pytest.mark.parametrize("break_it, match", [
    (lambda ds: ds.drop_vars("positions"), "no variable 'positions'"),
    (lambda ds: ds.assign(positions=ds["positions"].rename(xyz="k")), "positions.*dims"),
    (lambda ds: ds.assign(atomic_number=ds["atomic_number"].astype(float)), "integers"),
    (lambda ds: ds.assign(atomic_number=ds["atomic_number"].where(
        ds["atomic_number"] == 0, 200)), "molecule 'm0', atom 0: atomic_number 200"),
    (lambda ds: ds.assign(positions=ds["positions"].where(
        (ds["atom"] != 1) | (ds["molecule"] != "m2"))), "molecule 'm2', atom 1 .* no position"),
    (lambda ds: ds.assign(energy=ds["forces"]), "target 'energy' has dims .* per-structure"),
    (lambda ds: ds.assign(forces=ds["forces"].isel(xyz=[0, 1]).rename(xyz="uv")),
     "forces 'forces' have dims"),
    (lambda ds: ds.assign(positions=ds["positions"].where(
        (ds["atom"] != 1) | (ds["molecule"] != "m1"), ds["positions"].isel(atom=0))),
     "molecule 'm1': atoms 0 and 1 .* same place"),
    (lambda ds: ds.assign(cell=ds["cell"] * 0), "molecule 'm0' is periodic .* singular"),
    (lambda ds: ds.assign(atomic_number=ds["atomic_number"].where(
        ds["molecule"] != "m3", 0)), "molecule 'm3' has no atoms"),
])
def test_bad_structures_raise_naming_the_structure(break_it, match):
    ds = make_structures(periodic=(0,))
    adapter = _adapter(ds)
    with pytest.raises((ValueError, TypeError), match=match):
        adapter.encode(break_it(ds))


def test_unknown_elements_and_missing_fit_raise():
    ds = make_structures()
    for call in (lambda a: a.encode(ds), lambda a: a.batches(ds), lambda a: a.model_config(),
                 lambda a: a.predict(None, ds), lambda a: a.num_types):
        with pytest.raises(NotFittedError, match=r"MoleculeAdapter\.\w+ needs .* fit"):
            call(MoleculeAdapter())
    adapter = MoleculeAdapter(elements=[1, 6]).fit(
        ds.assign(atomic_number=ds["atomic_number"].where(ds["atomic_number"] != 8, 6)),
        targets={"energy": "energy"})
    with pytest.raises(ValueError, match=r"element O \(Z=8\) is unknown"):
        adapter.encode(ds)
    with pytest.raises(ValueError, match="declares forces 'forces' but no energy"):
        MoleculeAdapter().fit(ds, targets={"forces": "forces"})
    with pytest.raises(TypeError, match=r"no longer takes \['energy', 'forces'\].*fit"):
        MoleculeAdapter(energy="energy", forces="forces")
    with pytest.raises(AttributeError, match="model_config"):
        adapter.model_sizes()


def test_padding_positions_may_be_anything_and_the_data_stay_as_they_were():
    ds = make_structures(pad_at=(1,))
    copy = ds.copy(deep=True)
    adapter = _adapter(ds)
    filled = ds.assign(positions=ds["positions"].fillna(123.0))
    np.testing.assert_array_equal(adapter.encode(filled).structure.positions,
                                  adapter.encode(ds).structure.positions)
    xr.testing.assert_identical(ds, copy)


def test_from_ase_reads_numbers_positions_cells_energies_and_forces(tmp_path):
    ase = pytest.importorskip("ase")
    from ase.build import bulk, molecule
    from ase.calculators.emt import EMT
    import ase.io

    crystal = bulk("Cu", "fcc", a=3.6, cubic=True) * (2, 1, 1)
    crystal.rattle(0.05, seed=0)
    cluster = ase.Atoms("Cu3", positions=[[0, 0, 0], [2.5, 0, 0], [0, 2.5, 0]])
    for atoms in (crystal, cluster):
        atoms.calc = EMT()
        atoms.get_forces()  # computed now, so that extxyz writes them
    plain = molecule("H2O")  # no calculator: NaN energy and forces
    ase.io.write(tmp_path / "structures.extxyz", [crystal, cluster, plain])
    ds = from_ase(ase.io.read(tmp_path / "structures.extxyz", ":"))
    xr.testing.assert_identical(read_structures(tmp_path / "structures.extxyz"), ds)
    assert ds.sizes == {"molecule": 3, "atom": 8, "xyz": 3, "cell_vector": 3}
    np.testing.assert_array_equal(ds["atomic_number"].values[2, :3], plain.numbers)
    assert (ds["atomic_number"].values[1, 3:] == 0).all()
    close = dict(rtol=1e-6, atol=1e-8)  # extxyz writes 8 decimals
    np.testing.assert_allclose(ds["positions"].values[0], crystal.positions, **close)
    np.testing.assert_allclose(ds["cell"].values[0], crystal.cell[:])
    np.testing.assert_array_equal(ds["pbc"].values, [[True] * 3, [False] * 3, [False] * 3])
    np.testing.assert_allclose(ds["energy"].values[:2], [crystal.get_potential_energy(),
                                                          cluster.get_potential_energy()],
                               **close)
    assert np.isnan(ds["energy"].values[2]) and np.isnan(ds["forces"].values[2]).all()
    np.testing.assert_allclose(ds["forces"].values[1, :3], cluster.get_forces(), **close)
    batch = MoleculeAdapter().fit(ds, targets=ENERGY_FORCES).encode(ds)
    assert batch.structure.cell.shape == (3, 3, 3)


def test_an_adapter_saved_by_seqattn_0_1_loads_and_encodes_as_it_did():
    """data/molecule_adapter_0.1 was written by seqattn 0.1 (MoleculeAdapter(energy="energy",
    forces="forces", targets=["charge"]).fit(ds) on these structures), whose config held the
    targets and statistics; it encodes as the same adapter fitted today."""
    ds = make_structures(periodic=(1,), charges=True, cell_length=7.0)
    old = seqattn.load(Path(__file__).parent / "data" / "molecule_adapter_0.1")
    new = _adapter(ds, targets=["charge"])
    assert old.atom_types == new.atom_types and old.layout == new.layout
    assert old.model_config() == new.model_config()
    a, b = old.encode(ds), new.encode(ds)
    np.testing.assert_array_equal(a.tokens, b.tokens)
    for key in b.targets:
        # normalized targets in float32: an element whose exact value is 0 comes back as
        # rounding noise of either adapter's statistics (7.6e-14 against 1.9e-14 with NumPy's
        # OpenBLAS 0.3.31), so the comparison is relative to the targets' magnitude
        scale = np.nanmax(np.abs(b.targets[key]))
        np.testing.assert_allclose(a.targets[key], b.targets[key], rtol=1e-6, atol=1e-6 * scale,
                                   err_msg=key)
    decoded = old.decode(a, a.targets)
    np.testing.assert_allclose(decoded["energy"], ds["energy"], rtol=1e-5)
