"""The protein-ligand example on the committed docked complexes: the published split kept, the
baselines computed from training and validation complexes only and checked against hand
computations, and a quick run that scores every predictor on the test complexes."""
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))

import protein_ligand as example  # noqa: E402

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


def test_the_quick_run_scores_every_predictor_on_the_test_complexes():
    table = example.run(CONFIG)
    assert {"seqattn", "mean per target", "vina rescaled", "fingerprint ridge",
            "contact counts ridge"} <= set(table)
    for name, per in table.items():
        assert np.isfinite(per["all"][0]), name
