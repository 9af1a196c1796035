"""How strongly is a 5' splice site used? A Transformer on the 9 nucleotides of 30,483 splice
sites measured by a massively parallel splicing assay, against the additive and the pairwise
(epistatic) models of mutation effects, with the single-mutant map of the consensus site.

Data: the 5' splice-site MPRA of Wong et al. (2018) that MAVE-NN ships as a package resource
(``examples/datasets/mpsa_data.csv.gz``: the sequence ``x`` at positions -3 .. +6, the percent
spliced in as ``y`` = log10 PSI, and the published ``set`` column: 18,469 training, 5,936
validation, 6,078 test sequences). Install it without MAVE-NN's pinned dependencies (nothing of
mavenn is imported; the file is read by path)::

    pip install --no-deps mavenn
    pip install scikit-learn scipy matplotlib

Protocol: the sequences are one residue Dataset (``seqattn.readers.residues``, RNA alphabet)
with the score ``y`` and the ``part`` each belongs to; the model goes through the adapter
protocol (``ResidueAdapter`` fitted on the training part, ``model_config``, batches,
``seqattn.evaluate``). The baselines are those of ``seqattn.baselines`` on the model's own
inputs, among them ridge regressions additive (one-hot nucleotides, MAVE-NN's additive model)
and pairwise (plus one-hot pairs of nucleotides at every two positions, the standard epistatic
baseline); their regularisation and the model's epoch are chosen on validation data; the test
part is scored once. The model kept is the moving average of its weights over the training
steps (``seqattn.train.EMA``): a single step's weights score noisily on validation, which
stopped the plain run early. Reported: R^2 and Spearman's rho on the test part; a figure of the
predicted single-mutant map of the
consensus site CAG|GUAAGU next to the measured one (the variants the library holds: near the
consensus the assay is at its ceiling, PSI about 100%, so the measured cells differ by noise
and the predicted map is what shows which positions matter), each as a heat map above its
in-silico mutagenesis logo (at each position the letters stacked by their effect relative to
the position's mean, gains above the axis and losses below).

    python examples/splice_site_mpra.py            # full run
    python examples/splice_site_mpra.py --quick    # a small run for CI
"""
import argparse
import importlib.util
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

import seqattn
from seqattn.adapters import ResidueAdapter
from seqattn.adapters.residue_maps import single_mutant_map
from seqattn.models import build
from seqattn.readers.alphabets import RNA
from seqattn.readers.mutations import mutations_between, single_mutants
from seqattn.readers.residues import from_mutations, from_residues
from seqattn.train import EMA, AdamW, EarlyStopping, MSELoss, fit

CONSENSUS = "CAGGUAAGU"
SITE_POSITIONS = (-3, -2, -1, 1, 2, 3, 4, 5, 6)  # of CONSENSUS, around the exon|intron boundary


@dataclass
class ExampleConfig:
    d_model: int = 32
    nhead: int = 4
    num_layers: int = 2
    dim_feedforward: int = 64
    epochs: int = 20
    patience: int = 3
    batch_size: int = 64
    lr: float = 2e-3
    # the weights' moving average (seqattn.train.EMA) that validation, early stopping and the
    # trained model use: chosen on validation R^2 (three seeds, quick and full runs)
    average_decay: float = 0.99
    seed: int = 0


QUICK = ExampleConfig(epochs=4)


def resources():
    """MAVE-NN's datasets folder, found without importing mavenn (its pins are old)."""
    spec = importlib.util.find_spec("mavenn")
    if spec is None:
        raise SystemExit("the data are MAVE-NN's resources: pip install --no-deps mavenn")
    return Path(spec.submodule_search_locations[0]) / "examples" / "datasets"


def load(file="mpsa_data.csv.gz"):
    """The residue Dataset of every splice site with its score ``y`` and ``part``, from one of
    MAVE-NN's splicing-assay files (``file``: the recipe's; the transfer protocol reads the
    replicate beside it)."""
    import pandas as pd

    table = pd.read_csv(resources() / file)
    ds = from_residues(list(table["x"]), alphabet=RNA)
    ds["y"] = ("record", table["y"].to_numpy(np.float64), {"long_name": "log10 PSI"})
    return ds.assign_coords(part=("record", table["set"].to_numpy(object)))


def r2(predicted, measured):
    return float(1 - ((predicted - measured) ** 2).sum()
                 / ((measured - measured.mean()) ** 2).sum())


def spearman(measured, predicted):
    from scipy.stats import spearmanr

    return float(spearmanr(predicted, measured)[0])


# ---- the model -----------------------------------------------------------------------------


def r2_metric(predicted, measured):
    return r2(np.asarray(predicted).ravel(), np.asarray(measured).ravel())


def train(config, ds, progress):
    """The model and its adapter: the weights' moving average at its best validation R^2."""
    training, validation = ds.part == "training", ds.part == "validation"
    adapter = ResidueAdapter(alphabet="RNA").fit(ds, targets="y", where=training)
    model = build(adapter.model_config(
        task="regression", d_model=config.d_model, nhead=config.nhead,
        num_layers=config.num_layers, dim_feedforward=config.dim_feedforward,
        positions="learned", max_len=16, pooling="mean", seed=config.seed))
    stopping = EarlyStopping(patience=config.patience, monitor="val_r2", mode="max")
    fit(model, MSELoss(), AdamW(model, lr=config.lr),
        adapter.batches(ds, where=training, batch_size=config.batch_size, shuffle=True,
                        seed=config.seed),
        validation=adapter.batches(ds, where=validation, batch_size=1024),
        metrics={"r2": r2_metric}, epochs=config.epochs, early_stopping=stopping,
        average=EMA(config.average_decay), progress=progress)
    return model, adapter


def consensus_maps(model, adapter, ds):
    """(predicted, measured) single-mutant maps of the consensus site (log10 PSI)."""
    scan = from_mutations(CONSENSUS, ["WT"] + single_mutants(CONSENSUS, alphabet=RNA),
                          alphabet=RNA)
    predicted = single_mutant_map(seqattn.predict(model, scan, adapter)["y"], CONSENSUS,
                                  alphabet=RNA, first_position=1)
    letters = ["".join(RNA.letters(row)) for row in ds["sequence"].values]
    near = [i for i, s in enumerate(letters)
            if sum(a != b for a, b in zip(s, CONSENSUS)) <= 1]
    measured = ds["y"].isel(record=near).assign_coords(
        mutations=("record", [mutations_between(CONSENSUS, letters[i]) for i in near]))
    return predicted, single_mutant_map(measured, CONSENSUS, alphabet=RNA)


LETTER_COLOURS = {"A": "tab:green", "C": "tab:blue", "G": "tab:orange", "U": "tab:red"}


def letter(ax, text, x, bottom, height, width=0.9):
    """Draw `text` as a glyph filling the data box [x - width/2, x + width/2] x [bottom,
    bottom + height], the way sequence logos scale their letters."""
    from matplotlib.font_manager import FontProperties
    from matplotlib.patches import PathPatch
    from matplotlib.textpath import TextPath
    from matplotlib.transforms import Affine2D

    glyph = TextPath((0, 0), text, size=1, prop=FontProperties(family="DejaVu Sans",
                                                                 weight="bold"))
    box = glyph.get_extents()
    fit = (Affine2D().translate(-box.x0, -box.y0).scale(width / box.width, height / box.height)
           .translate(x - width / 2, bottom))
    ax.add_patch(PathPatch(fit.transform_path(glyph), color=LETTER_COLOURS.get(text, "grey"),
                           linewidth=0))


def logo(ax, grid):
    """An in-silico mutagenesis logo: at each position the letters stacked by their value less
    the position's mean (over the cells it has), gains above the axis and losses below, the
    largest farthest out. Cells without a value are left out."""
    for x, row in enumerate(grid.values):
        # a position without any value (nanmean would warn) draws nothing
        effects = row - np.nanmean(row) if np.isfinite(row).any() else row
        gains = [(e, r) for e, r in zip(effects, grid["residue"].values) if e > 0]
        losses = [(e, r) for e, r in zip(effects, grid["residue"].values) if e < 0]
        top = 0.0
        for effect, residue in sorted(gains):
            letter(ax, str(residue), x, top, effect)
            top += effect
        bottom = 0.0
        for effect, residue in sorted(losses, reverse=True):
            bottom += effect
            letter(ax, str(residue), x, bottom, -effect)
    # add_patch extends the data limits but leaves the view as it was
    ax.autoscale_view()
    ax.axhline(0, color="black", linewidth=0.6)
    ax.set_xlim(-0.5, len(grid) - 0.5)


def figure(predicted, measured, path):
    """The two single-mutant maps as heat maps above their in-silico mutagenesis logos,
    written to `path`; returns the (closed) Figure."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig = plt.figure(figsize=(10, 6.4), layout="constrained")
    axes = fig.subplots(2, 2, sharey="row")
    limits = np.nanmin([predicted.min(), measured.min()]), np.nanmax([predicted.max(),
                                                                     measured.max()])
    ticks = range(len(CONSENSUS)), [f"{p}\n{w}" for p, w in zip(SITE_POSITIONS, CONSENSUS)]
    for column, (title, grid) in enumerate((("seqattn", predicted), ("measured", measured))):
        ax = axes[0, column]
        image = ax.imshow(grid.values.T, cmap="viridis", vmin=limits[0], vmax=limits[1],
                          aspect="auto")
        ax.set_yticks(range(4), list(grid["residue"].values))
        ax.set_title(title)
        ax = axes[1, column]
        logo(ax, grid)
        ax.set_title(f"{title}: in-silico mutagenesis logo")
        for ax in axes[:, column]:
            ax.set_xticks(*ticks)
    # the logos share their row's scale, so a letter's height compares across them
    axes[1, 0].set_ylabel("log10 PSI less\nthe position's mean")
    fig.suptitle(f"single mutants of the consensus site {CONSENSUS[:3]}|{CONSENSUS[3:]} "
                 "(blank: not in the library)")
    fig.colorbar(image, ax=axes[0, :], label="log10 PSI")
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return fig


# ---- main ----------------------------------------------------------------------------------


def main(argv=None, config=None, progress=True):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="a small run (CI)")
    parser.add_argument("--out", default="splice_site_output", help="folder for the figure")
    args = parser.parse_args(argv)
    config = config or (QUICK if args.quick else ExampleConfig())
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    ds = load()
    model, adapter = train(config, ds, progress)
    results = {"scores": seqattn.evaluate(
        model, ds, adapter, where=ds.part == "test", train=ds.part == "training",
        validation=ds.part == "validation", metrics={"spearman": spearman}, batch_size=1024)}
    predicted_map, measured_map = consensus_maps(model, adapter, ds)
    worst = predicted_map.stack(cell=("position", "residue")).sortby(
        predicted_map.stack(cell=("position", "residue")))[:3]
    results["consensus"] = {
        "measured_cells": int(np.isfinite(measured_map.values).sum()),
        "measured_spread": float(np.nanstd(measured_map.values)),
        "most_damaging": [f"{CONSENSUS[p - 1]}{SITE_POSITIONS[p - 1]:+d}{r}: {float(v):.2f}"
                          for (p, r), v in zip(worst["cell"].values, worst.values)]}
    results["figure"] = figure(predicted_map, measured_map,
                               out / "splice_site_single_mutants.png")
    results["seconds"] = time.perf_counter() - started
    report(results, ds)
    return results


def report(results, ds):
    parts, counts = np.unique(ds.part.values.astype(str), return_counts=True)
    print("\nsites: " + ", ".join(f"{p} {n}" for p, n in zip(parts, counts))
          + "; the test part's scores (model: Transformer on per-nucleotide tokens):")
    print(seqattn.evaluation.table(results["scores"]).to_string(float_format="%.3f"))
    consensus = results["consensus"]
    print(f"single mutants of {CONSENSUS}: {consensus['measured_cells']} cells measured (spread "
          f"{consensus['measured_spread']:.3f}: the assay's ceiling); most damaging predicted: "
          + ", ".join(consensus["most_damaging"]))
    print(f"{results['seconds']:.0f} s")


if __name__ == "__main__":
    main()
