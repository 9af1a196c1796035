"""The molecule path end to end: structures Dataset -> MoleculeAdapter fitted on the training
structures -> build(adapter.model_config(...)) -> fit on energies and forces (with validation)
-> seqattn.predict back onto the Dataset -> seqattn.save / load of model and adapter -> the same
predictions; fit's checkpoint too."""
from dataclasses import replace

import numpy as np
import xarray as xr

import seqattn
from molecule_helpers import make_structures
from seqattn.adapters import MoleculeAdapter, predict
from seqattn.models import MoleculeModel, build
from seqattn.train import AdamW, EnergyForceLoss, evaluate, fit
from train_tasks import one_numba_thread  # noqa: F401  (tiny shapes run faster on one thread)


def test_structures_fit_predict_save_load(tmp_path):
    ds = make_structures(sizes=(3, 5, 2, 4, 5, 3), elements=(1, 8), periodic=(1, 4),
                         cell_length=7.0, pad_at=(2,), charges=True)
    train, validation = {"molecule": slice(0, 4)}, {"molecule": slice(4, None)}
    adapter = MoleculeAdapter().fit(
        ds, targets={"energy": "energy", "forces": "forces", "charge": "atom"}, where=train)
    model = build(adapter.model_config(d_model=16, nhead=2, num_layers=1, dim_feedforward=16,
                                       bins=16, r_max=3.5, cutoff=3.2))
    loss = EnergyForceLoss(energy_weight=1.0, forces_weight=1.0, atoms_weight=1.0)
    batches = adapter.batches(ds, where=train, batch_size=2, shuffle=True, seed=0)
    before = evaluate(model, loss, batches)["loss"]
    history = fit(model, loss, AdamW(model, lr=1e-2), batches, epochs=4,
                  validation=adapter.batches(ds, where=validation, batch_size=2),
                  checkpoint=tmp_path / "run", progress=False)
    assert history["loss"][-1] < before and len(history["val_loss"]) == 4

    out = adapter.predict(model, ds, batch_size=4)
    assert set(out.data_vars) == {"energy", "forces", "charge"}
    xr.testing.assert_identical(predict(model, ds, adapter, batch_size=4), out)
    xr.testing.assert_identical(ds.seqattn.predict(model, adapter, batch_size=3), out)
    only_energy = predict(model, ds, adapter, variables=["energy"])
    assert list(only_energy.data_vars) == ["energy"]
    xr.testing.assert_identical(only_energy["energy"], out["energy"])
    xr.testing.assert_identical(adapter.predict(model, ds, where=validation),
                                out.isel(molecule=slice(4, None)))
    for name in out.data_vars:
        assert out[name].dims == ds[name].dims and out[name].attrs == ds[name].attrs
        xr.testing.assert_equal(out[name].isnull(), ds[name].isnull())
    seqattn.save(model, tmp_path / "model")
    seqattn.save(adapter, tmp_path / "adapter")
    model_again = seqattn.load(tmp_path / "model")
    adapter_again = seqattn.load(tmp_path / "adapter")
    xr.testing.assert_identical(adapter_again.predict(model_again, ds, batch_size=4), out)
    xr.testing.assert_identical(adapter.predict(seqattn.load(tmp_path / "run"), ds,
                                                batch_size=4), out)
    # decoded forces are minus the gradient of the decoded energy (units and scales agree);
    # in float64, where a small step's difference is exact enough
    exact = MoleculeModel(replace(model.config, dtype="float64"))
    exact.load_state_dict(model.state_dict())
    described = adapter.to_dict()
    described["config"]["dtype"] = "float64"
    adapter = MoleculeAdapter.from_dict(described)
    forces = adapter.predict(exact, ds)["forces"][0, 1, 2]
    step = 1e-5
    moved = ds["positions"].copy()
    moved[0, 1, 2] += step
    up = adapter.predict(exact, ds.assign(positions=moved))["energy"][0]
    moved[0, 1, 2] -= 2 * step
    down = adapter.predict(exact, ds.assign(positions=moved))["energy"][0]
    np.testing.assert_allclose(-(up - down) / (2 * step), forces, rtol=1e-4)
    assert abs(float(forces)) > 1e-4
