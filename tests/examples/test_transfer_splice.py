"""benchmarks/transfer_splice.py computes its figures honestly: the splice recipe's quick path on
one seed of MAVE-NN's replicate of the splicing assay, read by the example's reader with the
file's own parts; the test sites are read by one evaluate call; the model's R^2 and Spearman
recomputed by hand from seqattn.predict, and the table row carries exactly these numbers and
evaluate's baselines. No assertion that seqattn wins."""
import importlib.util
import json
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import seqattn
from seqattn.adapters import ResidueAdapter
from selection_spy import recorded_selections

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import transfer_splice  # noqa: E402

SEED = 0


@pytest.fixture(scope="module")
def module():
    if importlib.util.find_spec("mavenn") is None:
        pytest.skip("the assay's files are MAVE-NN's resources: pip install --no-deps mavenn")
    return transfer_splice.example("splice_site_mpra")


@pytest.fixture(scope="module")
def quick_seed(module):
    """One quick seed's run, with the records every adapter selection read, in order."""
    with recorded_selections(ResidueAdapter) as read:
        run = transfer_splice.seed_run(module, replace(module.QUICK, seed=SEED))
    return run, read


def test_the_replicate_is_another_file_read_with_its_own_parts(module):
    table = pd.read_csv(module.resources() / transfer_splice.REPLICATE)
    recipe = pd.read_csv(module.resources() / "mpsa_data.csv.gz")
    ds = module.load(transfer_splice.REPLICATE)
    assert ds.sizes["record"] == len(table) == 30697
    np.testing.assert_array_equal(ds["part"].values, table["set"].values)
    np.testing.assert_array_equal(ds["y"].values, table["y"].values)
    # a new measurement of the same library: most sites are shared, the scores are not
    shared = table.merge(recipe, on="x", suffixes=("", "_recipe"))
    assert len(shared) == 29593
    assert not np.allclose(shared["y"], shared["y_recipe"])


def test_quick_seed_reads_the_test_part_once(module, quick_seed):
    run, read = quick_seed
    ds = run["ds"]
    test = set(ds["record"].values[(ds.part == "test").values].tolist())
    assert [records for records in read if records & test] == [test]


def test_quick_seed_figures_by_hand(module, quick_seed):
    from scipy.stats import spearmanr

    run, _ = quick_seed
    ds, scores = run["ds"], run["scores"]
    row = transfer_splice.table_row(True, {SEED: run})
    assert row.seeds == (SEED,) and row.metric == "r2"
    assert "mpsa_replicate_data.csv.gz" in row.transfer_set
    test = ds.part == "test"
    predicted = seqattn.predict(run["model"], ds, run["adapter"], where=test)["y"].values
    measured = ds["y"].values[test.values]
    assert int(scores["n"]) == len(measured) == 6114
    by_hand = 1 - np.sum((predicted - measured) ** 2) / np.sum((measured - measured.mean()) ** 2)
    assert row.model == [pytest.approx(by_hand, abs=1e-6)]
    rho = transfer_splice.metric_of(scores, "spearman")["model"]
    assert rho == pytest.approx(spearmanr(predicted, measured)[0], abs=1e-6)

    # the baselines evaluate fitted (on the training part, chosen on the validation part)
    r2 = transfer_splice.metric_of(scores, "r2")
    fitted = list(scores.predictor.values[1:])
    assert {"additive ridge", "pairwise ridge"} <= set(fitted)
    assert all(json.loads(str(c)) for c in scores["chosen"].values[1:])
    for name in fitted:
        assert row.baselines[transfer_splice.baseline_name(name)] == [r2[name]]
    strongest, means = row.strongest()
    assert means[strongest] == max(means.values())  # R^2: higher is better
