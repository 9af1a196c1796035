"""What every transfer domain shares (benchmarks/transfer.py runs them): a row of the table, the
example scripts read as modules, one metric of an evaluate() result, the machine's name."""
import argparse
import dataclasses
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from seqattn.evaluation import HIGHER_IS_BETTER

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


HEADER = ("| recipe | transfer set | seeds | recipe's test metric (mean +- std) | strongest "
          "baseline (mean) | margin | verdict |\n| --- | --- | --- | --- | --- | --- | --- |")


def example(name):
    """The example module ``examples/<name>.py``, imported (its main() is not run)."""
    if str(EXAMPLES) not in sys.path:
        sys.path.insert(0, str(EXAMPLES))
    return __import__(name)


@dataclasses.dataclass
class Row:
    """One line of the transfer table: the recipe's test metric per seed and every baseline's;
    the strongest is the best by the metric's mean over the seeds."""

    recipe: str
    transfer_set: str
    metric: str
    seeds: tuple
    model: list
    baselines: dict  # name -> per-seed metric
    notes: str = ""

    @property
    def higher_is_better(self):
        return self.metric in HIGHER_IS_BETTER

    def strongest(self):
        means = {name: float(np.mean(v)) for name, v in self.baselines.items()}
        pick = max if self.higher_is_better else min
        return pick(means, key=means.get), means

    def margin(self):
        """The recipe's mean minus the strongest baseline's, signed so that > 0 is a win."""
        name, means = self.strongest()
        sign = 1.0 if self.higher_is_better else -1.0
        return sign * (float(np.mean(self.model)) - means[name])

    def verdict(self):
        """win when the margin exceeds the recipe's seed-to-seed standard deviation, loss when
        it is below minus that, else tie (docs/transfer.md, section 5). A margin within float32
        resolution of the baseline's metric is a tie whatever the spread: a recipe that keeps
        its baseline, computed in float32, scores it up to rounding on every seed."""
        name, means = self.strongest()
        spread = max(float(np.std(self.model)),
                     float(np.finfo(np.float32).resolution) * abs(means[name]))
        margin = self.margin()
        return "win" if margin > spread else "loss" if margin < -spread else "tie"

    def line(self):
        name, means = self.strongest()
        return (f"| {self.recipe} | {self.transfer_set} | {len(self.seeds)} | {self.metric} "
                f"{np.mean(self.model):.3f} +- {np.std(self.model):.3f} | {name} "
                f"{means[name]:.3f} | {self.margin():+.3f} | {self.verdict()} |")

    def as_dict(self):
        name, means = self.strongest()
        return {**dataclasses.asdict(self), "strongest": name, "strongest_mean": means[name],
                "margin": self.margin(), "verdict": self.verdict()}


def metric_of(scores, metric):
    """{predictor: value} of one metric of an evaluate() result (one number per predictor)."""
    values = scores[metric]
    values = values.mean([d for d in values.dims if d != "predictor"])
    return {str(p): float(v) for p, v in zip(values.predictor.values, values.values)}


def machine():
    try:
        lines = subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines()
        model = next(line.split(":", 1)[1].strip() for line in lines
                     if line.startswith("Model name"))
    except (OSError, StopIteration):
        model = platform.processor() or "unknown"
    return f"{model}, {os.cpu_count()} cores"


def run_alone(rows, domain, description, argv=None):
    """Run one domain's ``rows(quick, seeds)`` from the command line (``--quick``, ``--seeds``,
    ``--json PATH``: what transfer.py does for every domain), print its rows, return them."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--quick", action="store_true", help="the example's quick recipe (CI)")
    parser.add_argument("--seeds", type=int, nargs="+",
                        help="these seeds instead of the protocol's (a smoke run)")
    parser.add_argument("--json", help="write the rows to this JSON file (transfer.py --table "
                                       "prints them)")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    found = rows(quick=args.quick, seeds=args.seeds)
    for row in found:
        row.notes += f"; {domain}: {time.perf_counter() - started:.0f} s on {machine()}"
    print("\n" + HEADER)
    for row in found:
        print(row.line())
        print(f"notes: {row.notes}")
    if args.json:
        Path(args.json).write_text(json.dumps([r.as_dict() for r in found], indent=1,
                                              default=str))
    return found
