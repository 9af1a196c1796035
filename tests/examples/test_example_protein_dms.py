"""examples/protein_dms.py: its splits and ridge features checked by hand on a made-up scan, the
whole path on measured GB1 variants (fit, predict onto the variant dim, save / load), and its
quick run against the additive and pairwise ridge models."""
import importlib.util

import numpy as np
import pytest
import xarray as xr

import seqattn
from seqattn.readers.residues import from_mutations
from test_examples import load_example
from train_tasks import one_numba_thread  # noqa: F401  (tiny shapes run faster on one thread)

needs_mavenn = pytest.mark.skipif(
    importlib.util.find_spec("mavenn") is None,
    reason="the example's data are MAVE-NN's resources: pip install --no-deps mavenn")


@pytest.fixture(scope="module")
def example():
    for package in ("sklearn", "scipy", "matplotlib", "pandas"):
        pytest.importorskip(package)
    return load_example("protein_dms")


def made_up_scan():
    """Variants of MKVL: singles and doubles in each published part."""
    mutations = ["K2A", "V3L", "M1C", "K2A:V3L", "M1C:V3L", "M1C:K2A", "K2R:L4A", "M1A:V3C",
                 "L4W", "K2A:L4W", "V3C:L4W"]
    part = ["training"] * 4 + ["validation", "training", "test", "test", "test", "validation",
                               "training"]
    ds = from_mutations("MKVL", mutations)
    return ds.assign_coords(part=("record", np.array(part, dtype=object)))


def test_harder_split_trains_on_singles_and_few_doubles(example):
    ds = made_up_scan()
    config = example.ExampleConfig(few_doubles=5, seed=1)
    split = example.splits(ds, config)["singles + few doubles"]
    n, part = ds["n_mutations"].values, ds["part"].values
    pool_doubles = (part != "test") & (n == 2)
    np.testing.assert_array_equal(split["test"], (part == "test") & (n == 2))
    assert not (split["training"] & split["validation"]).any()
    assert not ((split["training"] | split["validation"]) & (part == "test")).any()
    assert ((split["training"] & (n == 1)) == ((part != "test") & (n == 1))).all()
    chosen = (split["training"] | split["validation"]) & (n == 2)
    assert chosen.sum() == 5 and not (chosen & ~pool_doubles).any()
    assert split["validation"].sum() == 1 and (n[split["validation"]] == 2).all()
    published = example.splits(ds, config)["published"]
    np.testing.assert_array_equal(published["validation"], part == "validation")


def test_the_recipe_keeps_the_candidate_with_the_best_validation_r2(example, monkeypatch):
    """trained_recipe trains every width on few data and, for a scan with weights, each
    weighted and unweighted (the weights dropped from what train sees), and keeps the best
    validation R^2, the first on a tie."""
    trained = []

    def train(config, ds, wild_type, parts, few, progress):
        trained.append((config.d_model, "weight" in ds))
        return trained[-1], None

    scores = {(16, True): 0.5, (16, False): 0.7, (32, True): 0.7, (32, False): 0.6}
    monkeypatch.setattr(example, "train", train)
    monkeypatch.setattr(example, "validation_r2", lambda model, adapter, ds, parts:
                        scores[model])
    ds = made_up_scan()
    weighted = ds.assign(weight=("record", np.linspace(1.0, 2.0, ds.sizes["record"])))
    config = example.ExampleConfig(few_widths=(16, 32), d_model=24)
    choice = example.trained_recipe(config, weighted, "MKVL", {}, True, False)
    assert choice.model[0] == (16, False) and choice.name == "d_model 16, unweighted"
    np.testing.assert_array_equal(choice.table["r2"].values, list(scores.values()))
    assert trained == list(scores)
    assert "weight" in weighted  # the caller's Dataset keeps its weights
    trained.clear()
    scores[(24, True)], scores[(24, False)] = 0.8, 0.8
    choice = example.trained_recipe(config, weighted, "MKVL", {}, False, False)
    assert choice.model[0] == (24, True)
    assert trained == [(24, True), (24, False)]
    trained.clear()
    example.trained_recipe(config, ds, "MKVL", {}, False, False)  # no weights: one candidate
    assert trained == [(24, False)]


def test_ridge_features_hold_each_mutation_and_each_pair(example):
    ds = made_up_scan()
    wild = example.PROTEIN.codes("MKVL")
    additive = example.features(ds, wild, pairwise=False).toarray()
    names = list(ds["mutations"].values)
    # one column per distinct mutation, one entry per mutation of a variant
    assert additive.shape[1] == len({m for v in names for m in v.split(":")})
    np.testing.assert_array_equal(additive.sum(axis=1), ds["n_mutations"].values)
    k2a = additive[names.index("K2A")]
    np.testing.assert_array_equal(additive[names.index("K2A:V3L")],
                                  k2a + additive[names.index("V3L")])
    pairwise = example.features(ds, wild, pairwise=True).toarray()
    # a double: its 2 mutations, its pair of positions, each mutation with the other's
    # position, and the pair of mutations
    np.testing.assert_array_equal(pairwise.sum(axis=1),
                                  np.where(ds["n_mutations"].values == 2, 6, 1))
    shared = pairwise[names.index("K2A:V3L")] * pairwise[names.index("M1C:V3L")]
    assert shared.sum() == 1  # V3L alone: V3L with position 1 is not V3L with position 2
    both = pairwise[names.index("K2A:V3L")] * pairwise[names.index("K2A:L4W")]
    assert both.sum() == 1


@needs_mavenn
def test_gb1_variants_fit_predict_save_load(example, tmp_path):
    ds, wild_type = example.load("gb1", subsample=(600, 200, 200), seed=0)
    assert wild_type == "QYKLILNGKTLKGETTTEAVDAATAEKVFKQYANDNGVDGEWTYDDATKTFTVTE"
    assert (ds["n_mutations"] == 2).all() and ds.sizes["record"] == 1000
    first = from_mutations(wild_type, [str(ds["mutations"].values[0])], first_position=2)
    np.testing.assert_array_equal(first["sequence"].values[0], ds["sequence"].values[0])
    parts = example.splits(ds, example.QUICK)["published"]
    config = example.ExampleConfig(d_model=16, nhead=2, dim_feedforward=32, num_layers=1,
                                   epochs=4, batch_size=16, patience=4)
    model, adapter = example.train(config, ds, wild_type, parts, few=False, progress=False)
    test = xr.DataArray(parts["test"], dims="record")
    out = seqattn.predict(model, ds, adapter, where=test)
    assert out["y"].dims == ("record",) and out.sizes["record"] == 200
    np.testing.assert_array_equal(out["record"].values, ds["record"].values[parts["test"]])
    np.testing.assert_array_equal(out["mutations"].values, ds["mutations"].values[parts["test"]])
    assert np.isfinite(out["y"]).all()
    training = seqattn.predict(model, ds, adapter, where=xr.DataArray(parts["training"],
                                                                      dims="record"))
    assert example.r2(training["y"].values, ds["y"].values[parts["training"]]) > 0.3
    seqattn.save(adapter, tmp_path / "adapter")
    seqattn.save(model, tmp_path / "model")
    loaded = seqattn.load(tmp_path / "adapter")
    assert loaded.wild_type == wild_type
    xr.testing.assert_identical(
        seqattn.predict(seqattn.load(tmp_path / "model"), ds, loaded, where=test), out)


@needs_mavenn
def test_quick_run_beats_the_ridge_models_on_both_splits(example, tmp_path):
    results = example.main(["--quick", "--out", str(tmp_path)], progress=False)
    for split in example.SPLITS:
        baselines, model = results[split]["baselines"], results[split]["model"]
        assert set(baselines) == {"additive (ridge)", "pairwise (ridge)"}
        assert min(b["r2"] for b in baselines.values()) > 0.3, results
        assert model["r2"] > max(b["r2"] for b in baselines.values()), (split, results)
    assert results["published"]["sizes"] == {"training": 12000, "validation": 3000,
                                             "test": 4000}
    assert results["singles + few doubles"]["sizes"]["training"] == 1600
    assert results["singles + few doubles"]["d_model"] in example.QUICK.few_widths
    # GB1 measured no single mutant: the map's measured panel is the doubles' mean per mutation
    assert results["map"]["cells"] == 55 * 19 and results["map"]["spearman"] > 0.5
    assert (tmp_path / "protein_dms_gb1_single_mutants.png").stat().st_size > 0
