"""The transfer protocol (docs/transfer.md) for ``examples/splice_site_mpra.py``: its recipe, fixed
on MAVE-NN's ``mpsa_data.csv.gz`` (Wong et al. 2018: 5' splice sites, nine nucleotides, log10
PSI), run unchanged on ``mpsa_replicate_data.csv.gz``, which MAVE-NN ships beside it: the
assay's replicate, the library's sites measured again (30,697 sites, 29,593 of them in the
recipe's file; log10 PSI, its own published ``set`` column). The replicate's scores correlate
with the recipe's file at r 0.79 on the shared sites, and its split is its own: 3,548 of its
6,114 test sites are in the recipe's training part. What transfers is the recipe (the model, training
and choices on validation), not a model: each seed trains afresh on the replicate's training
part. It is the weakest kind of transfer in the table, a new measurement of the same library,
and it says so.

The file is read by the example's own reader (``load``) and the model trained by its ``train``
(early stopping and the weights' moving average on validation R^2); the test part is scored once
by ``seqattn.evaluate`` with the baselines it picks for the adapter (additive and pairwise
ridge, pooled features, nearest neighbours; fitted on the training part, chosen on the
validation part), as the example's ``main`` does. The score is R^2 on the test sites
(Spearman's rho beside it in the notes); the row's strongest baseline is the best by the mean
over the seeds.

    pip install --no-deps mavenn
    python benchmarks/transfer_splice.py [--quick] [--seeds 0] [--json PATH]
"""
import time
from dataclasses import replace

import seqattn
from transfer_rows import Row, example, metric_of, run_alone

SEEDS = (0, 1, 2)
REPLICATE = "mpsa_replicate_data.csv.gz"


def seed_run(module, config):
    """One seed (``config.seed``) of the recipe on the replicate: the model, its adapter, the
    Dataset and evaluate's scores on the test part."""
    ds = module.load(REPLICATE)
    model, adapter = module.train(config, ds, progress=False)
    scores = seqattn.evaluate(model, ds, adapter, where=ds.part == "test",
                              train=ds.part == "training", validation=ds.part == "validation",
                              metrics={"spearman": module.spearman}, batch_size=1024)
    return {"model": model, "adapter": adapter, "ds": ds, "scores": scores}


def baseline_name(name):
    return "k-nearest neighbour (k on validation)" if name.endswith("nearest neighbour") \
        else name  # "9-nearest neighbour": k varies with the seed


def table_row(quick, runs):
    """The Row of {seed: seed_run(...)}: test R^2 of the model and of every baseline."""
    model, baselines, spearman = [], {}, {}
    for run in runs.values():
        r2, rho = (metric_of(run["scores"], m) for m in ("r2", "spearman"))
        model.append(r2.pop("model"))
        spearman.setdefault("model", []).append(rho.pop("model"))
        for name in r2:
            baselines.setdefault(baseline_name(name), []).append(r2[name])
            spearman.setdefault(baseline_name(name), []).append(rho[name])
    ds = next(iter(runs.values()))["ds"]
    sizes = ", ".join(f"{int((ds.part == p).sum())} {p}"
                      for p in ("training", "validation", "test"))
    return Row("splice_site_mpra.py" + (" --quick" if quick else ""),
               f"MAVE-NN mpsa_replicate_data.csv.gz (the splicing assay's replicate: {sizes})",
               "r2", tuple(runs), model, baselines, notes="test Spearman per seed: " + str(
                   {name: [round(v, 4) for v in values] for name, values in spearman.items()}))


def rows(quick=False, seeds=None):
    """The one Row of the protocol's seeds (or ``seeds``)."""
    module = example("splice_site_mpra")
    recipe = module.QUICK if quick else module.ExampleConfig()
    runs = {}
    for seed in seeds or SEEDS:
        started = time.perf_counter()
        runs[seed] = seed_run(module, replace(recipe, seed=seed))
        r2 = metric_of(runs[seed]["scores"], "r2")
        print(f"splice seed {seed} ({time.perf_counter() - started:.0f} s): test R^2 "
              + ", ".join(f"{name} {value:.3f}" for name, value in r2.items()), flush=True)
    return [table_row(quick, runs)]


if __name__ == "__main__":
    run_alone(rows, "splice", __doc__.split("\n")[0])
