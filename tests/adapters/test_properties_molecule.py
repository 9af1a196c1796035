"""MoleculeAdapter over random structures (hypothesis): 1 to 4 molecules of 0 to 4 atoms,
padding rows inside a molecule, molecules in any order, labels that repeat (placed by
position); a per-atom charge of every dtype with NaN scattered, over a whole molecule,
everywhere, or one +inf, as a target (floats) or an atom feature (integers); a real atom without
a position. Either the targets decode to the Dataset on the same molecules and atoms (NaN on
padding and where missing) and a model's per-atom outputs land on their own atoms, or the error
names the molecule, variable or argument at fault - exactly when the case must be refused."""
import numpy as np
import pytest
import xarray as xr
from hypothesis import example, given, settings
from hypothesis import strategies as st

from molecule_helpers import make_structures
from seqattn.adapters import MoleculeAdapter
from property_inputs import (DTYPES, NAN_PATTERNS, absolute_tolerance, as_expected, assert_names,
                             tolerance, values)


@st.composite
def structures(draw):
    sizes = draw(st.lists(st.integers(0, 4), min_size=1, max_size=4))
    pad_at = [m for m in range(len(sizes)) if sizes[m] and draw(st.booleans())]
    ds = make_structures(seed=draw(st.integers(0, 100)), sizes=[max(n, 1) for n in sizes],
                         pad_at=pad_at)
    empty = np.array(sizes) == 0  # emptied afterwards: the maker places at least one atom
    ds["atomic_number"] = ds["atomic_number"].where(~empty[:, None], 0)
    ds["positions"] = ds["positions"].where(~empty[:, None, None])
    ds["forces"] = ds["forces"].where(~empty[:, None, None])
    ds = ds.isel(molecule=list(draw(st.permutations(range(len(sizes))))))
    if len(sizes) > 1 and draw(st.booleans()):
        labels = ds["molecule"].values.copy()
        labels[1] = labels[0]
        ds = ds.assign_coords(molecule=labels)
    real = ds["atomic_number"].values > 0
    dtype = draw(st.sampled_from(DTYPES))
    charge = values(draw, real.shape, dtype, draw(st.sampled_from(NAN_PATTERNS)))
    if charge.dtype.kind == "f":
        charge[~real] = np.nan
    ds["charge"] = (("molecule", "atom"), charge, {"units": "e"})
    if real.any() and draw(st.booleans()):  # a real atom whose position went missing
        m, a = np.argwhere(real)[draw(st.integers(0, int(real.sum()) - 1))]
        positions = ds["positions"].values.copy()
        positions[m, a, draw(st.integers(0, 2))] = np.nan
        ds["positions"] = ds["positions"].copy(data=positions)
    return ds


def refusals(ds):
    """The names an error must mention for this case (none: it must succeed)."""
    real = ds["atomic_number"].values > 0
    labels = [str(v) for v in ds["molecule"].values]
    names = [labels[m] for m in np.flatnonzero(~real.any(axis=1))]  # a molecule of no atoms
    lost = ~np.isfinite(ds["positions"].values).all(axis=-1) & real
    names += [labels[m] for m in np.flatnonzero(lost.any(axis=1))] + (["positions"] if lost.any()
                                                                    else [])
    charge = ds["charge"].values
    if charge.dtype.kind == "f" and not np.isfinite(charge[real]).any() or np.isinf(charge).any():
        names += ["charge"]
    return names


def setup(ds):
    """(adapter, targets): a float charge is a per-atom target, an integer one an atom feature."""
    as_target = ds["charge"].dtype.kind == "f"
    adapter = MoleculeAdapter(atom_features=[] if as_target else ["charge"], dtype="float64")
    targets = {"energy": "energy", "forces": "forces", **({"charge": "atom"} if as_target
                                                          else {})}
    return adapter, targets


def one_infinite_charge():
    """Charges as a per-atom target, finite but for one +inf."""
    ds = make_structures(sizes=(2, 3), charges=True)
    charge = ds["charge"].values.copy()
    charge[1, 0] = np.inf
    return ds.assign(charge=ds["charge"].copy(data=charge))


class PositionsModel:
    """Per-atom outputs that are known functions of each atom: forces = its position."""

    def predict(self, tokens, key_padding_mask, structure):
        return {"structure": np.zeros((len(tokens), 1)),
                "atoms": np.zeros((*tokens.shape[:2], 1)), "forces": structure.positions}


@settings(max_examples=100, deadline=None)
@given(structures())
@example(one_infinite_charge())
def test_molecule_round_trip_or_named_error(ds):
    before = ds.copy(deep=True)
    adapter, targets = setup(ds)
    names = refusals(ds)
    if names:
        with pytest.raises((ValueError, TypeError)) as refused:
            adapter.fit(ds, targets=targets)
        assert_names(refused.value, *names)
        if names == ["charge"] and np.isinf(ds["charge"].values).any():
            assert "finite" in str(refused.value)  # said as such, not "all NaN"
        return
    adapter.fit(ds, targets=targets)
    batch = adapter.encode(ds)
    assert np.isfinite(batch.tokens).all()
    real = ds["atomic_number"] > 0
    decoded = adapter.decode(batch, {k: batch.targets[k] for k in ("structure", "atoms", "forces")
                                     if batch.targets.get(k) is not None})
    np.testing.assert_allclose(decoded["energy"].values, ds["energy"].values, rtol=1e-9)
    np.testing.assert_allclose(decoded["forces"].values, ds["forces"].where(real).values,
                               rtol=1e-9, atol=1e-12)
    if "charge" in targets:
        # normalizing subtracts the mean in the data's own dtype, as for grids and signals:
        # float32 charges of -4.7 and -0.042 bring -0.042 back within about 2e-7, not 4e-8
        dtype = ds["charge"].dtype
        expected = np.where(real, as_expected(ds["charge"].values), np.nan)
        np.testing.assert_allclose(decoded["charge"].values, expected, rtol=tolerance(dtype),
                                   atol=1e-12 if dtype == np.float64
                                   else absolute_tolerance(expected, dtype))
    assert decoded["molecule"].values.tolist() == ds["molecule"].values.tolist()
    predicted = adapter.predict(PositionsModel(), ds, batch_size=2)
    scale = adapter.statistics["energy"]["scale"][0]
    np.testing.assert_allclose(predicted["forces"].values / scale,
                               ds["positions"].where(real).values, rtol=1e-9)
    assert predicted["molecule"].values.tolist() == ds["molecule"].values.tolist()
    xr.testing.assert_identical(ds, before)
