"""MoleculeAdapter's targets beyond energies and forces: kinds declared at fit (extensive or
intensive per structure, per atom), classes per structure and per atom as labels with
probabilities, predict's choice of variables, and encode -> decode exact for any sizes."""
import numpy as np
import pytest
import xarray as xr
from hypothesis import given, settings
from hypothesis import strategies as st

import seqattn
from molecule_helpers import make_structures
from seqattn.adapters import MoleculeAdapter
from seqattn.data.targets import MISSING_CLASS


def _with_properties(seed=0):
    """Structures with an intensive value (a mean over atoms, in 'g/L'), a class per molecule
    (text, one label missing) and a class per atom (its element as text)."""
    ds = make_structures(sizes=(3, 5, 2, 4, 6), pad_at=(1,), seed=seed, charges=True)
    z = ds["atomic_number"].where(ds["atomic_number"] > 0)
    ds["density"] = (z.mean("atom") / 8.0).assign_attrs(units="g/L")
    ds["shape"] = ("molecule", np.array(["chain", "ring", None, "ring", "chain"], dtype=object))
    names = {1: "H", 6: "C", 8: "O"}
    symbol = np.vectorize(lambda e: names.get(e, ""), otypes=[object])
    ds["element"] = (("molecule", "atom"), symbol(ds["atomic_number"].values))
    return ds


TARGETS = {"density": "intensive", "shape": "intensive", "element": "atom"}


class Fixed:
    """A stand-in model with given outputs."""

    def __init__(self, outputs):
        self.outputs = outputs

    def predict(self, tokens, key_padding_mask, structure):
        return {k: v(tokens, key_padding_mask, structure) for k, v in self.outputs.items()}


def test_a_value_per_structure_must_be_declared_and_kinds_must_fit_the_data():
    ds = _with_properties()
    with pytest.raises(ValueError, match="'density' has one value per structure: declare"):
        MoleculeAdapter().fit(ds, targets="density")
    with pytest.raises(ValueError, match="'shape' holds classes, which cannot be 'extensive'"):
        MoleculeAdapter().fit(ds, targets={"shape": "extensive"})
    with pytest.raises(ValueError, match="'charge' has dims .* kind 'intensive' is for "
                                         "per-structure"):
        MoleculeAdapter().fit(ds, targets={"charge": "intensive"})
    adapter = MoleculeAdapter().fit(ds, targets=["shape", "charge"])
    assert {n: e["kind"] for n, e in adapter.layout.items()} == {"shape": "intensive",
                                                                  "charge": "atom"}


def test_intensive_values_are_standardized_and_decoded_back():
    ds = _with_properties()
    adapter = MoleculeAdapter().fit(ds, targets={"density": "intensive"})
    config = adapter.model_config(d_model=8)
    assert config.structure_pooling == ("mean",) and not config.forces
    batch = adapter.encode(ds)
    y = ds["density"].values
    np.testing.assert_allclose(batch.targets["structure"][:, 0], (y - y.mean()) / y.std(),
                               rtol=1e-5)
    decoded = adapter.decode(batch, {"structure": batch.targets["structure"]})
    np.testing.assert_allclose(decoded["density"], y, rtol=1e-6)
    assert decoded["density"].attrs == {"units": "g/L"}


def test_classes_per_structure_and_per_atom_in_batches():
    ds = _with_properties()
    adapter = MoleculeAdapter().fit(ds, targets=TARGETS)
    assert adapter.target_specs[1].classes == ("chain", "ring")
    assert adapter.target_specs[2].classes == ("C", "H", "O"), "padding is not a class"
    config = adapter.model_config()
    assert (config.structure_classes, config.atom_classes) == ((2,), (3,))
    assert config.structure_outputs == 1 and config.atom_outputs == 0
    batch = adapter.encode(ds)
    np.testing.assert_array_equal(batch.targets["structure_classes"][:, 0],
                                  [0, 1, MISSING_CLASS, 1, 0])
    labels = batch.targets["atom_classes"][..., 0]
    assert (labels[batch.key_padding_mask] == MISSING_CLASS).all()
    symbols = np.array(["C", "H", "O"])[labels[~batch.key_padding_mask]]
    z = np.array(adapter.atom_types)[batch.structure.types[~batch.key_padding_mask]]
    np.testing.assert_array_equal(symbols, np.vectorize({1: "H", 6: "C", 8: "O"}.get)(z))
    with pytest.raises(ValueError, match="'shape' has label 'star', which fit never saw"):
        adapter.encode(ds.assign(shape=ds["shape"].where(ds["molecule"] != "m0", "star")))


def test_predicted_classes_come_back_as_labels_with_probabilities(tmp_path):
    ds = _with_properties()
    adapter = MoleculeAdapter().fit(ds, targets=TARGETS)

    def per_structure(tokens, mask, structure):  # "ring" wins for structures of > 3 atoms
        n = (~mask).sum(axis=1)
        return np.stack([np.zeros(len(n)), n - 3.5], axis=1)

    def per_atom(tokens, mask, structure):  # the atom's own element, confidently
        order = np.array([adapter.atom_types.index(e) for e in (6, 1, 8)])
        return 10.0 * np.eye(3)[np.argsort(order)][structure.types]

    model = Fixed({"structure": lambda t, m, s: np.zeros((len(m), 1)),
                   "structure_logits": per_structure, "atom_logits": per_atom})
    out = seqattn.predict(model, ds.drop_vars(list(TARGETS)), adapter, batch_size=2)
    n = (ds["atomic_number"] > 0).sum("atom").values
    np.testing.assert_array_equal(out["shape"].values, np.where(n > 3, "ring", "chain"))
    probability = out["shape_probability"]
    assert probability.dims == ("molecule", "shape_class"), "two class targets, two dims"
    assert list(probability["shape_class"].values) == ["chain", "ring"]
    np.testing.assert_allclose(probability.sel({"shape_class": "ring"}),
                               1 / (1 + np.exp(-(n - 3.5))), rtol=1e-5)
    real = ds["atomic_number"] > 0
    np.testing.assert_array_equal(out["element"].where(real, "").values,
                                  ds["element"].values)
    assert out["element_probability"].dims == ("molecule", "atom", "element_class")
    assert out["element_probability"].where(~real).isnull().all()
    only = seqattn.predict(model, ds, adapter, variables=["shape"])
    assert set(only.data_vars) == {"shape", "shape_probability"}
    with pytest.raises(ValueError, match=r"variables \['charge'\] are not targets"):
        adapter.predict(model, ds, variables=["charge"])
    seqattn.save(adapter, tmp_path / "adapter")
    xr.testing.assert_identical(seqattn.predict(model, ds, seqattn.load(tmp_path / "adapter")),
                                seqattn.predict(model, ds, adapter))


def test_batches_for_some_targets_leave_the_others_missing():
    ds = _with_properties()
    adapter = MoleculeAdapter().fit(ds, targets=TARGETS)
    batch = next(iter(adapter.batches(ds, targets="density", batch_size=5)))
    assert np.isfinite(batch.targets["structure"]).all()
    assert (batch.targets["structure_classes"] == MISSING_CLASS).all()
    assert (batch.targets["atom_classes"] == MISSING_CLASS).all()
    assert next(iter(adapter.batches(ds, targets=(), batch_size=5))).targets is None
    assert next(iter(adapter.batches(ds.drop_vars(list(TARGETS)), batch_size=5))).targets is None


@settings(max_examples=25, deadline=None)
@given(sizes=st.lists(st.integers(1, 5), min_size=1, max_size=5), seed=st.integers(0, 100),
       pad_first=st.booleans(), batch_size=st.integers(1, 4))
def test_encode_then_decode_gives_every_target_back(sizes, seed, pad_first, batch_size):
    """Any sizes and padding places: the batches' own targets decode to the Dataset's values
    (float64, so the round trip is exact up to rounding), batch by batch in Dataset order."""
    ds = make_structures(sizes=tuple(sizes), seed=seed, charges=True,
                         pad_at=(0,) if pad_first and sizes[0] > 1 else ())
    ds["size"] = (ds["atomic_number"] > 0).sum("atom").astype(float) * 0.5
    targets = {"energy": "energy", "forces": "forces", "charge": "atom", "size": "intensive"}
    adapter = MoleculeAdapter(dtype="float64").fit(ds, targets=targets)
    parts = [adapter.decode(b, b.targets) for b in adapter.batches(ds, batch_size=batch_size)]
    decoded = xr.concat(parts, dim="molecule")
    for name in targets:
        np.testing.assert_allclose(decoded[name].transpose(*ds[name].dims).values,
                                   ds[name].values, rtol=1e-10, atol=1e-12, err_msg=name)
        np.testing.assert_array_equal(decoded[name].isnull(), ds[name].isnull())
