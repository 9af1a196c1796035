"""The protein-ligand example on the committed docked complexes: the published split kept, the
baselines computed from training and validation complexes only and checked against hand
computations, and a quick run that scores every predictor on the test complexes."""
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))

import protein_ligand as example  # noqa: E402

pytestmark = pytest.mark.slow  # minutes in all: the file runs first (tests/conftest.py)

CONFIG = example.ExampleConfig(**example.QUICK)


@pytest.fixture(scope="module")
def ds():
    return example.complexes()


def test_the_split_is_the_published_one_and_validation_comes_from_training(ds):
    train, valid, test = example.splits(ds, CONFIG)
    split = ds["split"].values
    assert set(split[test]) == {"test"} and set(split[np.concatenate([train, valid])]) == {"train"}
    assert len(np.intersect1d(train, valid)) == 0
    assert len(train) + len(valid) + len(test) == ds.sizes["complex"]


def test_contact_counts_match_a_count_by_hand(ds):
    counts = example.contact_counts(ds.isel(complex=[0]))[0]
    lig = ds["ligand_element"].values[0]
    poc = ds["pocket_element"].values[0]
    gap = np.linalg.norm(ds["ligand_xyz"].values[0][lig != ""][:, None]
                         - ds["pocket_xyz"].values[0][poc != ""][None], axis=-1)
    # every ligand-pocket pair closer than the last shell is counted once
    assert counts.sum() == (gap < example.SHELLS[-1]).sum()
    carbon_pairs = (np.array(lig[lig != ""]) == "C")[:, None] & \
        (np.array(poc[poc != ""]) == "C")[None]
    first = example.CONTACT_ELEMENTS.index("C") * len(example.CONTACT_ELEMENTS)
    shells = len(example.SHELLS) - 1
    assert counts[first * shells] == (carbon_pairs & (gap < example.SHELLS[1])).sum()


def test_baselines_never_see_the_test_labels(ds):
    train, valid, test = example.splits(ds, CONFIG)
    before = example.baselines(ds, train, valid, test, CONFIG)
    changed = ds.copy(deep=True)
    changed["affinity"][test] = changed["affinity"][test] + 5.0
    after = example.baselines(changed, train, valid, test, CONFIG)
    for name in before:
        np.testing.assert_allclose(after[name], before[name], err_msg=name)
    y = ds["affinity"].values.astype(np.float64)
    target = ds["target"].values
    fitted = np.concatenate([train, valid])
    for name in np.unique(target[test]):
        own = fitted[target[fitted] == name]
        assert before["mean per target"][test][target[test] == name] == pytest.approx(
            y[own].mean())


def test_the_linear_path_alone_is_the_fingerprint_ridge_baseline(ds):
    train, valid, test = example.splits(ds, CONFIG)
    y = ds["affinity"].values.astype(np.float64)
    prints = example.fingerprints(ds["smiles"].values, bits=CONFIG.bits)
    alphas = example.validated_alphas(prints, y, ds["target"].values, train, valid,
                                      CONFIG.alphas)
    both = np.concatenate([train, valid])
    adapter, model, epochs = example.train_model(ds, both, None, "linear path", alphas, CONFIG,
                                                 epochs=1)
    assert epochs == 0
    ours = example.seqattn.predict(model, ds, adapter)["affinity"].values
    ridge = example.baselines(ds, train, valid, test, CONFIG)["fingerprint ridge"]
    # float32 model against float64 ridge: the fingerprint's few hundred terms in float32
    np.testing.assert_allclose(ours, ridge, rtol=0, atol=1e-4)


def test_the_quick_run_beats_the_structure_based_baselines_and_draws_the_contributions(
        tmp_path):
    figure = tmp_path / "contributions.png"
    table = example.main(["--quick", "--plot", str(figure)])
    ours = [name for name in table if name.startswith("seqattn (")]
    assert len(ours) == 1
    assert ("seqattn attention, no fingerprint" in table) == ("attention" in CONFIG.variants)
    assert {"mean per target", "vina rescaled", "fingerprint ridge",
            "contact counts ridge"} <= set(table)
    rmse, rho = table[ours[0]]["all"]
    for name in ("mean per target", "vina rescaled", "contact counts ridge"):
        assert rmse < table[name]["all"][0], name
    for name in ("vina rescaled", "contact counts ridge"):
        assert rho > table[name]["all"][1], name
    assert figure.stat().st_size > 0
