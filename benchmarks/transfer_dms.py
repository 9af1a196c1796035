"""The transfer protocol (docs/transfer.md) for ``examples/protein_dms.py``: its recipe, fixed on
the deep mutational scans of GB1 and TDP-43, run unchanged on MAVE-NN's ``amyloid_data.csv.gz``
(Seuma et al. 2021: nucleation of amyloid beta 1-42 fibrils, 499 single and 15,567 double
mutants, stops included; ``y`` the nucleation score, ``dy`` its error), which MAVE-NN ships beside
the recipe's two files with the same columns as ``tdp43_data.csv.gz``.

The scan is read by the example's own reader (``load_scan``: the wild type as each position's
most common residue, checked against the file's mutation counts, the published ``set`` column,
the quick recipe's subsample per part). Both of the example's splits run, as its ``main``
reports both: ``published`` (MAVE-NN's parts) and ``singles + few doubles`` (the published
test part's doubles learnt from the other parts' singles and a few of their doubles). Per seed
and split the model is trained and chosen as the example's ``main`` does (early stopping on
validation R^2; on the harder split the width chosen on validation R^2), then the test
variants are scored once by ``seqattn.evaluate`` with the baselines it picks for the adapter
(pooled features and nearest neighbours, fitted on the training part, chosen on the
validation part), and the example's additive and pairwise ridge models on the same split.

The full run uses the example's full recipe for TDP-43 (``FULL["tdp43"]``), the scan of the
same kind (singles and doubles, each weighted by 1 / dy^2, tens of thousands of variants);
``--quick`` its quick recipe. The score is R^2 on the test variants (Spearman's rho beside it
in the notes); the row's strongest baseline is the best by the mean over the seeds.

    pip install --no-deps mavenn
    python benchmarks/transfer_dms.py [--quick] [--seeds 0] [--json PATH]
"""
import time
from dataclasses import replace

import xarray as xr

import seqattn
from transfer_rows import Row, example, metric_of, run_alone

SEEDS = (0, 1, 2)
FULL_RECIPE = "tdp43"  # the example's full recipe of the scan like this one: see the docstring
# amyloid beta 1-42 (UniProt P05067, residues 672-713), the wild type the paper mutated
ABETA42 = "DAEFRHDSGYEVHHQKLVFFAEDVGSNKGAIIGLMVGGVVIA"


def amyloid_scan(module):
    """The Scan of ``amyloid_data.csv.gz`` in the example's terms: residue 1 first, ``y`` the
    nucleation score, its errors ``dy`` (weights 1 / dy^2, as for TDP-43)."""
    return module.Scan("amyloid_data.csv.gz", "amyloid beta 42", 1, "nucleation score", True)


def load_amyloid(module, config):
    """The amyloid scan's residue Dataset and wild type, by the example's reader; the wild type
    read off the file is checked against the published sequence."""
    ds, wild_type = module.load_scan(amyloid_scan(module), config.subsample, config.seed)
    if wild_type != ABETA42:
        raise ValueError(f"amyloid_data.csv.gz's wild type reads {wild_type}, not amyloid "
                         f"beta 1-42 ({ABETA42})")
    return ds, wild_type


def spearman(measured, predicted):
    from scipy.stats import spearmanr

    return float(spearmanr(predicted, measured)[0])


def seed_runs(module, config):
    """{split: run} of one seed (``config.seed``): the model, adapter, Dataset, parts, the
    evaluate scores on the test variants and the example's ridge models' test scores."""
    ds, wild_type = load_amyloid(module, config)
    runs = {}
    for split, parts in module.splits(ds, config).items():
        model, adapter = module.trained_recipe(config, ds, wild_type, parts,
                                               split != "published", progress=False).model
        where = {p: xr.DataArray(parts[p], dims="record") for p in module.PARTS}
        scores = seqattn.evaluate(model, ds, adapter, where=where["test"],
                                  train=where["training"], validation=where["validation"],
                                  metrics={"spearman": spearman}, batch_size=1024)
        runs[split] = {"model": model, "adapter": adapter, "ds": ds, "parts": parts,
                       "wild_type": wild_type, "scores": scores,
                       "own": module.baselines(ds, module.PROTEIN.codes(wild_type), parts)}
    return runs


def baseline_name(name):
    return "k-nearest neighbour (k on validation)" if name.endswith("nearest neighbour") \
        else name  # "5-nearest neighbour": k varies with the seed


def rows(quick=False, seeds=None):
    """One Row per split of the example (test R^2 over the seeds, every baseline's)."""
    module = example("protein_dms")
    recipe = module.QUICK if quick else module.FULL[FULL_RECIPE]
    runs = {}
    for seed in seeds or SEEDS:
        started = time.perf_counter()
        runs[seed] = seed_runs(module, replace(recipe, seed=seed))
        for split, found in seed_scores(runs[seed]).items():
            print(f"dms {split} seed {seed} (d_model {runs[seed][split]['model'].config.d_model}"
                  "): test R^2 / Spearman " + ", ".join(
                      f"{name} {r2:.3f} / {rho:.3f}" for name, (r2, rho) in found.items()),
                  flush=True)
        print(f"dms seed {seed}: {time.perf_counter() - started:.0f} s", flush=True)
    return table_rows(module, quick, runs)


def seed_scores(runs):
    """{split: {predictor: (test R^2, test Spearman)}} of one seed's runs: "model" first, then
    evaluate's baselines, then the example's ridge models."""
    found = {}
    for split, run in runs.items():
        r2, rho = (metric_of(run["scores"], m) for m in ("r2", "spearman"))
        found[split] = {baseline_name(name): (r2[name], rho[name]) for name in r2}
        found[split].update({own_name(name): (v["r2"], v["spearman"])
                             for name, v in run["own"].items()})
    return found


def own_name(name):
    return f"{name.split(' (')[0]} ridge (example's)"  # "additive (ridge)": the example's


def table_rows(module, quick, runs):
    """The Rows of {seed: seed_runs(...)}: one per split."""
    seeds = tuple(runs)
    found = {}
    for seed, by_split in runs.items():
        for split, scores in seed_scores(by_split).items():
            row = found.setdefault(split, {"r2": {}, "spearman": {}, "notes": []})
            for name, (r2, rho) in scores.items():
                row["r2"].setdefault(name, []).append(r2)
                row["spearman"].setdefault(name, []).append(rho)
            run = by_split[split]
            chosen = {str(p): str(c) for p, c in zip(run["scores"].predictor.values,
                                                     run["scores"]["chosen"].values) if c}
            chosen.update({own_name(name): {"alpha": v["alpha"], "pair_scale": v["pair_scale"]}
                           for name, v in run["own"].items()})
            sizes = {p: int(run["parts"][p].sum()) for p in module.PARTS}
            row["notes"].append(f"seed {seed}: {sizes}, d_model {run['model'].config.d_model}, "
                                f"baselines chose {chosen}")
            for p, n in sizes.items():  # the quick subsample draws its variants per seed
                row.setdefault("sizes", {}).setdefault(p, set()).add(n)
    recipe = "protein_dms.py" + (" --quick" if quick else f" (FULL['{FULL_RECIPE}'])")
    return [Row(recipe, "MAVE-NN amyloid_data.csv.gz (Abeta42 nucleation, Seuma et al. 2021), "
                f"split {split} ({', '.join(f'{p} {span(n)}' for p, n in row['sizes'].items())})",
                "r2", seeds, row["r2"].pop("model"), row["r2"],
                notes="; ".join(row["notes"]) + "; test Spearman per seed: " + str(
                    {name: [round(v, 4) for v in values]
                     for name, values in row["spearman"].items()}))
            for split, row in found.items()]


def span(values):
    return "-".join(str(v) for v in sorted({min(values), max(values)}))



if __name__ == "__main__":
    run_alone(rows, "dms", __doc__.split("\n")[0])
