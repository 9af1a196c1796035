"""ComplexModel: gradients of every parameter and of the ligand tokens against float64 finite
differences, and the physics it must respect: a rigid motion of the whole complex changes
nothing, moving the ligand against its pocket does, and pocket atoms beyond the cutoff are not
seen."""
import dataclasses

import numpy as np
import pytest

from complex_helpers import make_complexes
from gradcheck import check_module_gradients
from seqattn.adapters.complex import ComplexAdapter
from seqattn.models import build

SIZES = dict(d_model=8, nhead=2, num_layers=1, dim_feedforward=8, bins=6, r_max=6.0)


def _setup(dtype="float32", **options):
    ds = make_complexes(n=6, seed=2)
    adapter = ComplexAdapter(dtype=dtype).fit(ds, targets="affinity")
    batch = adapter.encode(ds)
    model = build(adapter.model_config(**{**SIZES, **options}))
    return ds, adapter, batch, model


@pytest.mark.parametrize("pooling", ["mean", "sum"])
def test_complex_model_gradients_match_finite_differences(pooling):
    _, _, batch, model = _setup("float64", pooling=pooling)

    def call(inputs):
        return model(inputs, batch.key_padding_mask, structure=batch.structure)

    check_module_gradients(model, call, lambda dout: {"inputs": model.backward(dout)},
                           {"inputs": batch.tokens.astype(np.float64)}, samples=4)


def _moved(structure, ligand=None, pocket=None):
    return dataclasses.replace(
        structure,
        positions=structure.positions if ligand is None else ligand(structure.positions),
        key_positions=structure.key_positions if pocket is None
        else pocket(structure.key_positions))


def _predict(model, batch, structure):
    model.eval()
    return np.asarray(model(batch.tokens, batch.key_padding_mask, structure=structure))


def test_only_distances_matter_and_the_pocket_is_seen():
    _, _, batch, model = _setup("float64")
    rotation, _ = np.linalg.qr(np.random.default_rng(0).standard_normal((3, 3)))

    def rigid(x):
        return x @ rotation.T + np.array([3.0, -1.0, 2.0])

    before = _predict(model, batch, batch.structure)
    after = _predict(model, batch, _moved(batch.structure, rigid, rigid))
    np.testing.assert_allclose(after, before, rtol=1e-9, atol=1e-12)
    shifted = _predict(model, batch, _moved(batch.structure, lambda x: x + 1.5))
    assert np.abs(shifted - before).max() > 1e-4
    far = _predict(model, batch, _moved(batch.structure, pocket=lambda x: x + 100.0))
    gone = dataclasses.replace(batch.structure, pocket_mask=np.ones_like(
        batch.structure.pocket_mask))
    np.testing.assert_allclose(far, _predict(model, batch, gone), rtol=1e-9, atol=1e-12)


def test_contributions_add_up_to_the_prediction():
    ds, adapter, _, model = _setup()
    predicted = adapter.predict(model, ds)["affinity"].values
    terms = adapter.contributions(model, ds)
    np.testing.assert_allclose(terms.sum("ligand_atom").values + adapter.target_scale["mean"],
                               predicted, rtol=1e-5, atol=1e-5)
    assert np.isnan(terms.values[ds["ligand_element"].values == ""]).all()


def test_config_errors_name_the_field():
    _, adapter, _, _ = _setup()
    with pytest.raises(ValueError, match="pooling"):
        build(adapter.model_config(pooling="max"))
    with pytest.raises(ValueError, match="num_layers"):
        build(adapter.model_config(num_layers=0))
