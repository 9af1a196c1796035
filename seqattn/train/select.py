"""select: a small, deterministic model choice on validation data, the table kept.

::

    choice = select({"small": small_config, "wide": wide_config},
                    train=lambda config: train_model(config),        # -> a trained model
                    score=lambda model: seqattn.evaluate(model, ds, adapter, where=valid,
                                                         baselines=False),
                    metric="rmse", time_budget=600)
    choice.name, choice.model, choice.table

Candidates run one after another in the order given, each trained by ``train(config)`` and
scored by ``score(model)`` on validation data: a dict of metric values, or the Dataset that
``seqattn.evaluate`` returns (its ``model`` row, averaged over leads and targets). The chosen
candidate has the best ``metric`` (lowest, or highest for the metrics in
:data:`HIGHER_IS_BETTER`, or as ``mode`` says); a tie goes to the earlier candidate, a NaN never
wins. Nothing here draws random numbers: seeds belong to the configs, so a rerun chooses the
same. With ``time_budget`` (seconds) a candidate starts only while the time spent plus the
mean time a candidate took so far fits the budget; the first always runs, and ``table.ran``
says which did (so a budget that cuts the list can change the choice on a slower machine).
"""
import time
from dataclasses import dataclass

import numpy as np
import xarray as xr

LOWER_IS_BETTER = {"loss", "val_loss", "rmse", "mae", "log_loss", "mse", "crps"}
HIGHER_IS_BETTER = {"accuracy", "balanced_accuracy", "auroc", "r2", "rmse_skill", "f1"}


@dataclass
class Selection:
    """The chosen candidate's ``name`` and trained ``model``, every candidate's validation
    scores in ``table`` (candidate x metric, ``seconds`` and ``ran``), and ``models`` (name ->
    trained model, for the candidates that ran)."""

    name: str
    model: object
    table: xr.Dataset
    models: dict


def _mode(metric, mode):
    if mode is not None:
        if mode not in ("min", "max"):
            raise ValueError(f"mode={mode!r}; expected 'min' or 'max'")
        return mode
    if metric in LOWER_IS_BETTER:
        return "min"
    if metric in HIGHER_IS_BETTER:
        return "max"
    raise ValueError(f"metric={metric!r} is not one select knows the direction of; give "
                     "mode='min' (lower is better) or mode='max'")


def _scores(result, name):
    """{metric: float} from what `score` returned for candidate `name`."""
    if isinstance(result, xr.Dataset):
        if "predictor" in result.dims:
            result = result.sel(predictor="model")
        return {str(v): float(result[v].mean()) for v in result.data_vars
                if result[v].dtype.kind in "fiu"}
    if isinstance(result, dict):
        return {str(k): float(np.mean(v)) for k, v in result.items()}
    raise TypeError(f"score(model) for candidate {name!r} returned a {type(result).__name__}; "
                    "expected a dict of metric values or the Dataset seqattn.evaluate returns")


def select(candidates, train, score, *, metric, mode=None, time_budget=None):
    """Train and score each of `candidates` (a dict name -> config, or a list, named "0", "1",
    ...) and choose on `metric` (see the module docstring); returns a :class:`Selection`."""
    if not isinstance(candidates, dict):
        candidates = {str(i): c for i, c in enumerate(candidates)}
    if not candidates:
        raise ValueError("candidates is empty; give at least one configuration")
    if time_budget is not None and not time_budget > 0:
        raise ValueError(f"time_budget={time_budget!r}; expected a positive number of seconds "
                         "or None")
    direction = _mode(metric, mode)
    start = time.perf_counter()
    rows, seconds, models = {}, {}, {}
    for name, config in candidates.items():
        spent = time.perf_counter() - start
        if rows and time_budget is not None and spent + spent / len(rows) > time_budget:
            break
        began = time.perf_counter()
        models[name] = train(config)
        rows[name] = _scores(score(models[name]), name)
        seconds[name] = time.perf_counter() - began
        if metric not in rows[name]:
            raise KeyError(f"score(model) for candidate {name!r} gave {sorted(rows[name])}, "
                           f"not metric={metric!r}")
    values = np.array([rows[n][metric] for n in rows])
    ranked = np.where(np.isnan(values), np.inf, values if direction == "min" else -values)
    best = list(rows)[int(np.argmin(ranked))]
    names = list(candidates)
    metrics = sorted({m for r in rows.values() for m in r})
    table = xr.Dataset(
        {m: ("candidate", [rows[n].get(m, np.nan) if n in rows else np.nan for n in names])
         for m in metrics},
        coords={"candidate": names})
    table["seconds"] = ("candidate", [seconds.get(n, np.nan) for n in names])
    table["ran"] = ("candidate", [n in rows for n in names])
    table.attrs.update(metric=metric, mode=direction, chosen=best)
    return Selection(best, models[best], table, models)
