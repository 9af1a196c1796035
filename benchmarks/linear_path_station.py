"""Does the linear path help? The station recipe (examples/station_forecast.py's settings: 8
variables as tokens of their 48 hourly values, leads 1-6 h as lead-scaled increments, a
one-layer TokenModel that encodes the lead and the hour of day) as attention alone ("plain"), with
``linear=True``, with ``linear=True`` started from the fitted per-token ridge
(seqattn.baselines.warm_start), and with the lead linear path (``linear_leads``: one linear map
per lead of the whole sample and the hour), alone, started from the fitted ridge per lead, and
fixed at it (only the residual trained), on the station the recipe was built on (Greensboro) and on
another TMY3 year pvlib ships (Sand Point, Alaska) that it was not tuned on. Scored by
seqattn.evaluate on October-December (RMSE per lead, degC) against the baselines for_batch
picks (persistence, climatology, ridge per lead on the flattened inputs), fitted on
January-August with every choice on September.

With ``--select`` the variants are candidates of seqattn.train.select, chosen on September's
RMSE, and only the chosen one is scored on the test months. The example itself now makes such a
choice between "plain" and "lead ridge frozen" (there with early stopping that scores the ridge
start too, so that candidate is never worse than the ridge on September).

Run ``python benchmarks/linear_path_station.py [--epochs 4] [--seeds 0] [--stations ...]
[--variants ...] [--select]``.
"""
import argparse
import importlib.util
import time
from pathlib import Path

import numpy as np

import seqattn
from seqattn.adapters import ForecastWindows, GridAdapter
from seqattn.baselines import TokenFeatures, for_batch, warm_start
from seqattn.models import build
from seqattn.models.linear_path import residual_parameters
from seqattn.train import AdamW, EarlyStopping, MSELoss, fit
from seqattn.train.schedules import warmup_and_decay
from seqattn.train.select import select

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "station_forecast.py"
STATIONS = ("723170TYA.CSV", "703165TY.csv")
VARIANTS = ("plain", "linear", "linear from ridge", "lead linear", "lead linear from ridge",
            "lead ridge frozen")


def example():
    """The example's reader and settings (read by path: the script is not a package)."""
    spec = importlib.util.spec_from_file_location("station_forecast", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def trained(config, windows, train_ds, val_ds, variant, n_tokens, lead_ridge):
    training = windows.batches(train_ds, batch_size=config.batch_size, shuffle=True,
                               seed=config.seed)
    validation = windows.batches(val_ds, batch_size=1024)
    model = build(windows.model_config(
        d_model=config.d_model, nhead=config.nhead, num_layers=config.num_layers,
        dim_feedforward=config.dim_feedforward, dropout=config.dropout, positions="learned",
        max_len=n_tokens, coordinates=list(config.coordinates), seed=config.seed,
        linear=variant != "plain", linear_tokens=n_tokens,
        linear_leads=tuple(3600.0 * lead for lead in config.leads)
        if variant.startswith("lead") else None))
    if variant == "linear from ridge":
        warm_start(model, TokenFeatures().fit(training, validation))
    if variant in ("lead linear from ridge", "lead ridge frozen"):
        warm_start(model, lead_ridge)
    # frozen: the ridge stays as fitted and training learns the residual only
    trainable = residual_parameters(model) if variant == "lead ridge frozen" \
        else model.named_parameters()
    fit(model, MSELoss(skip_nan=True), AdamW(trainable, lr=config.lr,
                                             weight_decay=config.weight_decay),
        training, validation=validation, epochs=config.epochs, seed=config.seed,
        schedule=warmup_and_decay(config.lr, config.epochs, training, final=0.05),
        clip_grad_norm=1.0, early_stopping=EarlyStopping(patience=config.patience),
        progress=False)
    return model


def run(ex, path, epochs, seed, variants, choose=False):
    config = ex.ExampleConfig(epochs=epochs, seed=seed)
    ds = ex.read_station(path)
    train_ds = ex.months(ds, *config.train_months)
    val_ds = ex.months(ds, config.validation_month, config.validation_month, config.history)
    test_ds = ex.months(ds, *config.test_months, config.history)
    windows = ForecastWindows(
        GridAdapter(list(ds.data_vars), patch={"station": 1}, variables_as="tokens",
                    calendar=config.calendar),
        leads=[f"{lead}h" for lead in config.leads], history=config.history,
        targets=[ex.TARGET], increments=True, lead_scales=config.lead_scales,
        in_memory=True).fit(train_ds)
    training = list(windows.batches(train_ds, batch_size=1024).epoch(0))
    validation = list(windows.batches(val_ds, batch_size=1024).epoch(0))
    start = time.perf_counter()
    fitted = [b.fit(training, validation) for b in for_batch(training[0])]
    print(f"baselines fitted in {time.perf_counter() - start:.0f} s")
    n_tokens = training[0].tokens.shape[1]
    lead_ridge = next(b for b in fitted if type(b).__name__ == "LeadRidge")
    if choose:
        choice = select({v: v for v in variants},
                        train=lambda v: trained(config, windows, train_ds, val_ds, v, n_tokens,
                                                lead_ridge),
                        score=lambda model: seqattn.evaluate(model, val_ds, windows,
                                                             baselines=False, batch_size=1024),
                        metric="rmse")
        september = {str(c): round(float(v), 4)
                     for c, v in zip(choice.table.candidate.values, choice.table.rmse.values)}
        print(f"\n{path.name}, seed {seed}: September RMSE per candidate {september}, "
              f"chosen {choice.name!r}")
        models = {f"chosen: {choice.name}": choice.model}
    else:
        models = None
    for variant in (models or variants):
        start = time.perf_counter()
        model = models[variant] if models else trained(config, windows, train_ds, val_ds,
                                                       variant, n_tokens, lead_ridge)
        scores = seqattn.evaluate(model, test_ds, windows, baselines=fitted, batch_size=1024)
        rmse = scores.rmse.transpose("predictor", "lead")
        print(f"\n{path.name}, seed {seed}, {variant} ({time.perf_counter() - start:.0f} s): "
              "test RMSE [degC] per lead 1-6 h, mean")
        for name, row in zip(rmse.predictor.values, rmse.values):
            print(f"{name:>12} " + " ".join(f"{v:6.3f}" for v in row) + f"  {np.mean(row):6.3f}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--stations", nargs="+", default=list(STATIONS))
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=VARIANTS)
    parser.add_argument("--select", action="store_true",
                        help="train the variants, choose one on September's RMSE "
                             "(seqattn.train.select) and score only that one on the test months")
    args = parser.parse_args(argv)
    ex = example()
    folder = ex.tmy3_path().parent
    for name in args.stations:
        for seed in args.seeds:
            run(ex, folder / name, args.epochs, seed, args.variants, args.select)


if __name__ == "__main__":
    main()
