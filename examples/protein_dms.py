"""What do two mutations do to a protein? A Transformer on the mutations of a deep mutational
scan (530,737 double mutants of protein G's B1 domain, or 57,996 single and double mutants of
TDP-43), against the additive and the pairwise (epistatic) ridge models, on the published split
and on the harder split that learns doubles from singles and a few doubles.

Data: MAVE-NN's package resources (read by path; nothing of mavenn is imported):

* ``gb1_data.csv.gz`` (default, ``--data gb1``): Olson et al. (2014), the 55 residues 2 .. 56 of
  GB1, every variant a double mutant (the file holds no single mutants), ``y`` its log
  enrichment for IgG binding; published parts: 477,854 training, 26,519 validation, 26,364 test.
* ``tdp43_data.csv.gz`` (``--data tdp43``): Bolognesi et al. (2019), residues 290 .. 373 of
  TDP-43, 1,266 single and 56,730 double mutants (stops included), ``y`` the toxicity score
  with its measurement error ``dy``: the ridge models weight each variant by 1 / dy^2, and the
  model is trained both weighted and unweighted, keeping the better validation R^2.

    pip install --no-deps mavenn
    pip install scikit-learn scipy matplotlib

Splits (the test part is scored once, everything else is chosen on validation):

* ``published``: MAVE-NN's ``set`` column.
* ``singles + few doubles``: from the published training and validation parts, every single
  mutant and ``few_doubles`` double mutants drawn at random (seeded); a fifth of those doubles
  is the validation part, the rest and all singles the training part; the test part is the
  published test part's double mutants, none of which is trained on. For GB1, which has no
  single mutants, this is training on 2% of the doubles. On these few data the model's width
  (``few_widths``) is chosen on validation too.

Protocol: the variants are one residue Dataset (``from_residues``, protein alphabet, stops as
a token) with ``y``, the ``part`` and the coordinate ``mutations`` (``Q2A:Y3C``); the model
goes through the adapter protocol: ``ResidueAdapter(wild_type=...)`` reads each variant as
mutation tokens (a token for the wild type, then one per substitution: an embedding per
mutation, attention between them, a pooled head), fitted on the training part; batches are
streamed from the uint8 codes, tokens made per batch only; ``seqattn.predict`` puts the
predictions on the variant dim. Baselines, ridge regressions on the same variants with the
penalty chosen on validation: additive (one-hot residues, written as mutations from the wild
type, which spans the same model) and pairwise (plus pairs of residues at two positions,
built sparsely from the mutated positions: each pair of mutated positions, each mutation with
each other mutated position, and each pair of mutations). Reported: R^2 and Spearman's rho on
the test part, the peak resident memory and the time; a figure of the predicted single-mutant
map next to the measured one (TDP-43: the measured single mutants; GB1: no single mutant was
measured, so the measured panel is the mean score of the doubles that carry each mutation).

    python examples/protein_dms.py                  # GB1, full run
    python examples/protein_dms.py --data tdp43     # TDP-43, full run
    python examples/protein_dms.py --quick          # a subsample of GB1 for CI
"""
import argparse
import importlib.util
import resource
import time
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import xarray as xr

import seqattn
from seqattn.adapters import ResidueAdapter
from seqattn.adapters.residue_maps import single_mutant_map
from seqattn.models import build
from seqattn.readers.alphabets import PROTEIN
from seqattn.readers.mutations import single_mutants
from seqattn.readers.residues import from_mutations, from_residues
from seqattn.train import AdamW, EarlyStopping, MSELoss, fit
from seqattn.train.select import select
from seqattn.train.weighted_mse import WeightedMSELoss

PARTS = ("training", "validation", "test")
SPLITS = ("published", "singles + few doubles")
LETTERS = PROTEIN.residues + PROTEIN.ambiguous[0] + PROTEIN.stop  # code -> letter
MAP_RESIDUES = PROTEIN.residues + PROTEIN.stop  # the columns of a single-mutant map


@dataclass(frozen=True)
class Scan:
    file: str
    protein: str
    first_position: int
    score: str
    errors: bool


SCANS = {"gb1": Scan("gb1_data.csv.gz", "GB1", 2, "log enrichment (IgG binding)", False),
         "tdp43": Scan("tdp43_data.csv.gz", "TDP-43", 290, "toxicity", True)}


@dataclass(frozen=True)
class ExampleConfig:
    d_model: int = 32
    nhead: int = 4
    num_layers: int = 2
    dim_feedforward: int = 64
    pooling: str = "attention"
    lr: float = 2e-3
    epochs: int = 4             # over the published training part
    patience: int = 1
    batch_size: int = 256
    few_doubles: int = 10_000   # doubles drawn for the harder split
    few_epochs: int = 40
    few_patience: int = 5
    few_batch_size: int = 64
    few_widths: tuple = (16, 32)  # d_model candidates on few data, chosen on validation
    subsample: tuple = None     # (training, validation, test) variants drawn per part
    seed: int = 0


FULL = {"gb1": ExampleConfig(),
        "tdp43": ExampleConfig(epochs=20, patience=3, batch_size=128, few_doubles=5_000)}
QUICK = ExampleConfig(epochs=3, patience=1, batch_size=128, few_doubles=2_000, few_epochs=15,
                      few_patience=3, subsample=(12_000, 3_000, 4_000))


def resources():
    """MAVE-NN's datasets folder, found without importing mavenn (its pins are old)."""
    spec = importlib.util.find_spec("mavenn")
    if spec is None:
        raise SystemExit("the data are MAVE-NN's resources: pip install --no-deps mavenn")
    return Path(spec.submodule_search_locations[0]) / "examples" / "datasets"


# ---- the variants --------------------------------------------------------------------------


def wild_type_of(sequences, distances):
    """The wild type: each position's most common residue, checked against the file's
    mutation counts ``dist``."""
    letters = np.frombuffer("".join(sequences).encode(), np.uint8).reshape(len(sequences), -1)
    wild = np.array([np.bincount(column).argmax() for column in letters.T], np.uint8)
    if not np.array_equal((letters != wild).sum(axis=1), distances):
        raise ValueError("the most common residue per position does not reproduce the file's "
                         "mutation counts: the scan has no single wild type")
    return bytes(wild).decode()


def mutation_labels(codes, wild_codes, wild_type, first_position):
    """Each variant's mutations in the short notation (``Q2A:Y3C``), from its codes."""
    rows, positions = np.nonzero(codes != wild_codes)
    letters = np.array(list(LETTERS))[codes[rows, positions]]
    labels = [[] for _ in range(len(codes))]
    for row, position, letter in zip(rows, positions, letters):
        labels[row].append(f"{wild_type[position]}{position + first_position}{letter}")
    return np.array([":".join(label) for label in labels], dtype=object)


def load(name, subsample=None, seed=0):
    """The residue Dataset of scan `name`'s variants (``y``, ``weight`` where the scan has
    errors, coords ``part``, ``mutations``, ``n_mutations``) and its wild type."""
    return load_scan(SCANS[name], subsample, seed)


def load_scan(scan, subsample=None, seed=0):
    """`load` of a Scan: any of MAVE-NN's scans with the columns of SCANS' files (``set``,
    ``dist``, ``y``, ``x``; ``dy`` where it has errors)."""
    import pandas as pd

    table = pd.read_csv(resources() / scan.file)
    wild_type = wild_type_of(table["x"], table["dist"].to_numpy())
    if subsample is not None:
        rng = np.random.default_rng(seed)
        members = [np.flatnonzero(table["set"] == part) for part in PARTS]
        keep = np.concatenate([rng.choice(m, min(size, len(m)), False)
                               for m, size in zip(members, subsample)])
        table = table.iloc[np.sort(keep)]
    ds = from_residues(list(table["x"]), alphabet=PROTEIN,
                       names=[f"variant{i}" for i in table.index])
    wild_codes = PROTEIN.codes(wild_type)
    ds["y"] = ("record", table["y"].to_numpy(np.float64), {"long_name": scan.score})
    if scan.errors:
        ds["weight"] = ("record", 1 / table["dy"].to_numpy(np.float64) ** 2,
                        {"long_name": "1 / dy^2"})
    labels = mutation_labels(ds["sequence"].values, wild_codes, wild_type, scan.first_position)
    return ds.assign_coords(part=("record", table["set"].to_numpy(object)),
                            mutations=("record", labels),
                            n_mutations=("record", table["dist"].to_numpy(np.int64))), wild_type


def splits(ds, config):
    """split name -> part name -> boolean (record,) (module docstring)."""
    part, n = ds["part"].values, ds["n_mutations"].values
    published = {p: part == p for p in PARTS}
    pool = part != "test"
    rng = np.random.default_rng(config.seed)
    doubles = rng.permutation(np.flatnonzero(pool & (n == 2)))[:config.few_doubles]
    validation = np.zeros(len(part), bool)
    validation[doubles[:len(doubles) // 5]] = True
    training = np.zeros(len(part), bool)
    training[doubles[len(doubles) // 5:]] = True
    training |= pool & (n == 1)
    harder = {"training": training, "validation": validation, "test": (part == "test") & (n == 2)}
    return {"published": published, "singles + few doubles": harder}


# ---- scores --------------------------------------------------------------------------------


def r2(predicted, measured):
    return float(1 - ((predicted - measured) ** 2).sum()
                 / ((measured - measured.mean()) ** 2).sum())


def score(predicted, measured):
    from scipy.stats import spearmanr

    return {"r2": r2(predicted, measured), "spearman": float(spearmanr(predicted, measured)[0])}


# ---- baselines -----------------------------------------------------------------------------


def features(ds, wild_codes, pairwise):
    """Sparse (records, columns) features of the variants' mutations (module docstring)."""
    from scipy import sparse

    codes = ds["sequence"].values.astype(np.int64)
    wild = np.asarray(wild_codes, np.int64)
    L, A = codes.shape[1], PROTEIN.size
    mutated = codes != wild
    slots = np.sort(np.where(mutated, np.arange(L), L), axis=1)[:, :mutated.sum(1).max()]
    rows, columns = [], []

    def add(valid, column):
        rows.append(np.flatnonzero(valid))
        columns.append(column[valid])

    record = np.arange(len(codes))
    mutation = [np.where(s < L, s * A + codes[record, np.minimum(s, L - 1)], -1)
                for s in slots.T]
    for m in mutation:
        add(m >= 0, m)
    if pairwise:
        for u in range(len(mutation)):
            for v in range(u + 1, len(mutation)):
                both = (mutation[u] >= 0) & (mutation[v] >= 0)
                i, j = slots[:, u], slots[:, v]
                add(both, L * A + i * L + j)                               # positions
                add(both, L * A + L * L + mutation[u] * L + j)             # mutation, position
                add(both, L * A + L * L + mutation[v] * L + i)
                add(both, L * A + L * L + L * A * L + mutation[u] * L * A + mutation[v])
    rows, columns = np.concatenate(rows), np.concatenate(columns)
    used, columns = np.unique(columns, return_inverse=True)
    return sparse.csr_matrix((np.ones(len(rows)), (rows, columns)),
                             shape=(len(codes), len(used)))


def baselines(ds, wild_codes, parts):
    """Test scores of the additive and pairwise ridge models. The penalty is chosen on
    validation, for the pairwise model with the pair columns' own scale (a scale s is a penalty
    alpha / s^2 on them), so that it can shrink the pairs harder than the mutations."""
    from scipy import sparse
    from sklearn.linear_model import Ridge

    y = ds["y"].values
    weight = ds["weight"].values if "weight" in ds else np.ones(len(y))
    train, valid, test = (parts[p] for p in PARTS)
    additive = features(ds, wild_codes, pairwise=False)
    pairwise = features(ds, wild_codes, pairwise=True)  # the additive columns come first
    out = {}
    for name, X, scales in (("additive (ridge)", additive, (1.0,)),
                            ("pairwise (ridge)", pairwise, (1.0, 0.3, 0.1))):
        fits = []
        for scale in scales:
            column_scale = np.where(np.arange(X.shape[1]) < additive.shape[1], 1.0, scale)
            scaled = (X @ sparse.diags(column_scale)).tocsr()
            for alpha in (0.1, 1.0, 10.0, 100.0, 1000.0):
                model = Ridge(alpha=alpha).fit(scaled[train], y[train],
                                               sample_weight=weight[train])
                fits.append((r2(model.predict(scaled[valid]), y[valid]), alpha, scale,
                             model.predict(scaled[test])))
        _, alpha, scale, predicted = max(fits, key=lambda f: f[0])
        out[name] = {**score(predicted, y[test]), "alpha": alpha, "pair_scale": scale}
    return out


# ---- the model -----------------------------------------------------------------------------


def r2_metric(predicted, measured):
    return r2(np.asarray(predicted).ravel(), np.asarray(measured).ravel())


def train(config, ds, wild_type, parts, few, progress):
    """The model and its adapter, stopped at the best validation R^2."""
    weighted = "weight" in ds
    if weighted:  # mean weight 1 on the training part, so the learning rate means the same
        ds = ds.assign(weight=ds["weight"] / float(ds["weight"][parts["training"]].mean()))
    adapter = ResidueAdapter(alphabet="protein", stop="token", wild_type=wild_type).fit(
        ds, targets="y", where=parts["training"])
    model = build(adapter.model_config(  # each mutation token carries its position
        task="regression", d_model=config.d_model, nhead=config.nhead,
        num_layers=config.num_layers, dim_feedforward=config.dim_feedforward,
        positions="none", pooling=config.pooling, seed=config.seed))
    epochs, patience, batch_size = ((config.few_epochs, config.few_patience,
                                     config.few_batch_size) if few else
                                    (config.epochs, config.patience, config.batch_size))
    stopping = EarlyStopping(patience=patience, monitor="val_r2", mode="max")
    weights = "weight" if weighted else None
    fit(model, WeightedMSELoss() if weighted else MSELoss(), AdamW(model, lr=config.lr),
        adapter.batches(ds, where=parts["training"], batch_size=batch_size, shuffle=True,
                        seed=config.seed, weights=weights),
        validation=adapter.batches(ds, where=parts["validation"], batch_size=1024,
                                   weights=weights),
        metrics={"r2": r2_metric}, epochs=epochs, early_stopping=stopping, progress=progress)
    return model, adapter


def trained_recipe(config, ds, wild_type, parts, few, progress):
    """The recipe on one split, chosen on validation R^2 by ``seqattn.train.select``: a
    Selection whose ``model`` is the kept (model, adapter) and whose ``table`` holds every
    candidate's validation R^2 (the first on a tie). The candidates: on few data the widths
    (``few_widths``); for a scan with measurement errors, training weighted by 1 / dy^2 and
    unweighted, since the variants are scored unweighted and where dy follows y the weights
    tilt the fit toward one end of the scores."""
    widths = config.few_widths if few else (config.d_model,)
    weightings = (True, False) if "weight" in ds else (False,)
    candidates = {f"d_model {width}, {'weighted' if weighted else 'unweighted'}":
                  (width, weighted) for width in widths for weighted in weightings}

    def train_candidate(candidate):
        width, weighted = candidate
        sized = replace(config, d_model=width, dim_feedforward=2 * width) if few else config
        data = ds if weighted else ds.drop_vars("weight", errors="ignore")
        return train(sized, data, wild_type, parts, few, progress)

    return select(candidates, train_candidate,
                  lambda trained: {"r2": validation_r2(*trained, ds, parts)}, metric="r2")


def validation_r2(model, adapter, ds, parts):
    valid = xr.DataArray(parts["validation"], dims="record")
    return r2(seqattn.predict(model, ds, adapter, where=valid)["y"].values,
              ds["y"].values[parts["validation"]])


# ---- the single-mutant maps ----------------------------------------------------------------


def maps(model, adapter, ds, wild_type, scan):
    """(predicted, measured) single-mutant maps (module docstring for GB1's measured one)."""
    stops = bool((ds["sequence"].values == PROTEIN.stop_code).any())
    scan_ds = from_mutations(wild_type, single_mutants(wild_type, PROTEIN, scan.first_position,
                                                       stops=stops),
                             alphabet=PROTEIN, first_position=scan.first_position)
    predicted = single_mutant_map(seqattn.predict(model, scan_ds, adapter)["y"], wild_type,
                                  PROTEIN, scan.first_position)
    singles = ds["n_mutations"] == 1
    if bool(singles.any()):
        measured = single_mutant_map(ds["y"].where(singles, drop=True), wild_type, PROTEIN,
                                     scan.first_position)
    else:
        measured = doubles_marginal(ds, wild_type, scan.first_position)
    if not stops:
        predicted, measured = (m.sel(residue=list(PROTEIN.residues)) for m in (predicted,
                                                                               measured))
    return predicted, measured.where(predicted["residue"] != predicted["wild_type"])


def doubles_marginal(ds, wild_type, first_position):
    """The mean measured score of the doubles that carry each mutation, as a map."""
    total = np.zeros((len(wild_type), len(MAP_RESIDUES)))
    count = np.zeros_like(total)
    codes = ds["sequence"].values
    rows, positions = np.nonzero(codes != PROTEIN.codes(wild_type))
    code = codes[rows, positions]
    residue = np.where(code == PROTEIN.stop_code, len(PROTEIN.residues), code)
    np.add.at(total, (positions, residue), ds["y"].values[rows])
    np.add.at(count, (positions, residue), 1)
    return xr.DataArray(np.where(count > 0, total / np.maximum(count, 1), np.nan),
                        dims=("position", "residue"),
                        coords={"position": np.arange(len(wild_type)) + first_position,
                                "residue": list(MAP_RESIDUES),
                                "wild_type": ("position", list(wild_type))})


def map_agreement(predicted, measured):
    from scipy.stats import spearmanr

    both = np.isfinite(predicted.values) & np.isfinite(measured.values)
    return int(both.sum()), float(spearmanr(predicted.values[both], measured.values[both])[0])


def figure(predicted, measured, scan, measured_title, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 1, figsize=(max(8, len(predicted["position"]) / 6), 7.5),
                             sharex=True)
    for ax, (title, grid) in zip(axes, (("seqattn: predicted single mutants", predicted),
                                        (measured_title, measured))):
        limits = np.nanpercentile(grid.values, [2, 98])
        image = ax.imshow(grid.values.T, cmap="viridis", vmin=limits[0], vmax=limits[1],
                          aspect="auto", interpolation="nearest")
        ax.set_yticks(range(grid.sizes["residue"]), list(grid["residue"].values), fontsize=7)
        ax.set_title(title, fontsize=10)
        fig.colorbar(image, ax=ax, label=scan.score, fraction=0.03)
    positions = predicted["position"].values
    ticks = range(0, len(positions), 5)
    axes[1].set_xticks(ticks, [f"{predicted['wild_type'].values[t]}{positions[t]}"
                               for t in ticks], fontsize=7)
    fig.suptitle(f"{scan.protein}: single mutants (wild-type cells blank)")
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)


# ---- main ----------------------------------------------------------------------------------


def main(argv=None, config=None, progress=True):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", choices=sorted(SCANS), default="gb1")
    parser.add_argument("--quick", action="store_true", help="a subsample (CI)")
    parser.add_argument("--out", default="protein_dms_output", help="folder for the figure")
    args = parser.parse_args(argv)
    config = config or (QUICK if args.quick else FULL[args.data])
    scan = SCANS[args.data]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    ds, wild_type = load(args.data, config.subsample, config.seed)
    results = {"data": args.data, "wild_type": wild_type, "variants": ds.sizes["record"]}
    for split, parts in splits(ds, config).items():
        few = split != "published"
        row = {"sizes": {p: int(parts[p].sum()) for p in PARTS},
               "baselines": baselines(ds, PROTEIN.codes(wild_type), parts)}
        choice = trained_recipe(config, ds, wild_type, parts, few, progress)
        model, adapter = choice.model
        row["chosen"], row["d_model"] = choice.name, model.config.d_model
        row["validation_r2"] = dict(zip(choice.table["candidate"].values.tolist(),
                                        choice.table["r2"].values.tolist()))
        test = xr.DataArray(parts["test"], dims="record")
        predicted = seqattn.predict(model, ds, adapter, where=test)["y"]
        row["model"] = score(predicted.values, ds["y"].values[parts["test"]])
        results[split] = row
        if not few:
            predicted_map, measured_map = maps(model, adapter, ds, wild_type, scan)
    measured_title = ("measured single mutants" if bool((ds["n_mutations"] == 1).any()) else
                      "measured: mean score of the doubles carrying the mutation")
    cells, rho = map_agreement(predicted_map, measured_map)
    results["map"] = {"cells": cells, "spearman": rho, "measured": measured_title}
    figure(predicted_map, measured_map, scan, measured_title,
           out / f"protein_dms_{args.data}_single_mutants.png")
    results["seconds"] = time.perf_counter() - started
    results["peak_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    report(results, scan)
    return results


def report(results, scan):
    print(f"\n{scan.protein}: {results['variants']} variants; test R^2 / Spearman")
    for split in SPLITS:
        row = results[split]
        print(f"{split} (" + ", ".join(f"{p} {n}" for p, n in row["sizes"].items())
              + f"; model {row['chosen']}, chosen on validation R^2 among "
              + ", ".join(f"{name} {r2:.3f}" for name, r2 in row["validation_r2"].items())
              + "):")
        for name, values in {**row["baselines"],
                             "seqattn (Transformer, mutation tokens)": row["model"]}.items():
            print(f"  {name:45s} {values['r2']:.3f}  {values['spearman']:.3f}")
    m = results["map"]
    print(f"single-mutant map against the {m['measured']}: Spearman {m['spearman']:.3f} over "
          f"{m['cells']} cells")
    print(f"{results['seconds']:.0f} s, peak resident memory {results['peak_rss_mib']:.0f} MiB")


if __name__ == "__main__":
    main()
