"""Does the linear path help? The DNA recipe (examples/dna_binding.py, its --quick settings:
1,000 training peaks per factor, 6-mer tokens, strand-symmetric, attention pooling) trained as
it is, with ``linear=True`` (a linear map of the 6-mer frequencies added to the head), and with
``linear=True`` started from the fitted 6-mer frequency logistic regression
(``PooledFeatures(statistics=("mean",))`` on the same ids, seqattn.baselines.warm_start).
Scored by seqattn.evaluate on the held-out test files against every baseline for_batch picks
on the 6-mer ids (pooled logistic, nearest neighbours; it is not told the adapter, so
KmerCounts on the bases the ids hold is not among them, as in the figures recorded); every
choice on the validation part. The example itself now carries the
strongest k-mer baseline, the strand-symmetric KmerCounts, in its linear path and chooses how
to train around it on validation (examples/dna_binding.py, VARIANTS).

Run ``python benchmarks/linear_path_dna.py [--seeds 0 1] [--epochs 4]``.
"""
import argparse
import importlib.util
import time
from dataclasses import replace
from pathlib import Path

import seqattn
from seqattn.adapters import GenomeAdapter
from seqattn.baselines import PooledFeatures, for_batch, warm_start
from seqattn.evaluation import table
from seqattn.models import StrandSymmetric, build
from seqattn.train import AdamW, CrossEntropyLoss, EarlyStopping, fit

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "dna_binding.py"
VARIANTS = ("plain", "linear", "linear from logistic")


def example():
    spec = importlib.util.spec_from_file_location("dna_binding", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def trained(ex, config, ds, adapter, variant):
    train, valid = ds.part == "train", ds.part == "validation"
    inner = build(adapter.model_config(
        task="classification", d_model=config.d_model, nhead=config.nhead,
        num_layers=config.num_layers, dim_feedforward=config.dim_feedforward,
        positions=config.positions, pooling=config.pooling, seed=config.seed,
        linear=variant != "plain"))
    if variant == "linear from logistic":
        warm_start(inner, PooledFeatures(statistics=("mean",)).fit(
            adapter.batches(ds, where=train, batch_size=256),
            adapter.batches(ds, where=valid, batch_size=256)))
    model = StrandSymmetric(inner, adapter.complement)
    stopping = EarlyStopping(patience=3, monitor="val_auroc", mode="max")
    fit(model, CrossEntropyLoss(), AdamW(model, lr=config.lr),
        adapter.batches(ds, where=train, batch_size=config.batch_size, shuffle=True,
                        seed=config.seed, reverse_complement=True),
        validation=adapter.batches(ds, where=valid, batch_size=int(valid.sum())),
        metrics={"auroc": ex.auroc_metric}, epochs=config.epochs, early_stopping=stopping,
        progress=False)
    return model


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--epochs", type=int, default=None)
    args = parser.parse_args(argv)
    ex = example()
    for seed in args.seeds:
        config = replace(ex.QUICK, seed=seed, **({} if args.epochs is None
                                                  else {"epochs": args.epochs}))
        ds = ex.load(config)
        train, valid, test = (ds.part == p for p in ("train", "validation", "test"))
        adapter = GenomeAdapter(tokens="ids", k=config.candidates[0], ambiguous="token").fit(
            ds, targets="factor", where=train)
        start = time.perf_counter()
        training = list(adapter.batches(ds, where=train, batch_size=256).epoch(0))
        validation = list(adapter.batches(ds, where=valid, batch_size=256).epoch(0))
        fitted = [b.fit(training, validation, n_classes=2) for b in for_batch(training[0])]
        print(f"baselines fitted in {time.perf_counter() - start:.0f} s: "
              f"{[(b.name, b.chosen.get('k'), b.chosen.get('C')) for b in fitted]}")
        for variant in VARIANTS:
            start = time.perf_counter()
            model = trained(ex, config, ds, adapter, variant)
            scores = seqattn.evaluate(model, ds, adapter, where=test, baselines=fitted)
            print(f"\nseed {seed}, {variant} ({time.perf_counter() - start:.0f} s)")
            print(table(scores)[["auroc", "accuracy", "log_loss"]].to_string())


if __name__ == "__main__":
    main()
