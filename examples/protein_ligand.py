"""Binding affinities of ligands docked into their receptors: one pocket-aware model across
several protein targets, against the honest baselines of the field.

Data (nothing docked or downloaded at run time): measured pKi / pEC50 of MoleculeACE's benchmark
files (ChEMBL; their published train/test split), each ligand docked once into its target's
receptor from dockstring by AutoDock Vina (``examples/data/make_complexes.py``; the poses and
pockets are committed under ``examples/data/complexes/``). The label is the measured affinity,
never the docking score. The seqattn path:

    read_docked_complexes -> complex Dataset (ligand atoms in their pose, the receptor's heavy
    atoms within 6 Angstrom of them, one complex per docked ligand) -> ComplexAdapter(group=
    "target", fingerprint_bits=2048) fitted on the training complexes -> build(adapter.
    model_config(...)): a ComplexModel (the ligand's atoms attend to each other and to the
    pocket's atoms, with learned distance tables per element pair and head) plus a linear path
    per target on the ligand's Morgan fingerprint, set to the per-target ridge regression ->
    fit (MSE on the standardized affinity, AdamW, warm-up and cosine decay, early stopping on
    validation) -> seqattn.predict back on the complex dim in pK units; per-atom contributions
    of a complex for the figure.

The model's function class contains the strongest simple baseline (ridge on fingerprints per
target), so attention has to earn its place on validation: the variants compared there are
attention without the fingerprint (learning what the per-target mean leaves), the linear path
alone (the ridge as a seqattn model, not trained) and attention learning the ridge's residual
with the ridge frozen; ``variants`` may add "joint", both trained from the ridge. The variant
with the fingerprint and the lowest validation RMSE is refitted on training + validation for
the epochs early stopping chose (the ridge inside it too, as the baselines are) and scored on
the test ligands, beside attention without the fingerprint.

Splits: the published test ligands of each target are the test set, read once for the final
table; of the published training ligands a fixed 20 % (NumPy default_rng(0)) validate. Every
choice (the variant, its number of epochs, ridge's alpha per target) is made on validation.

Baselines on the same complexes:

* the training mean per target;
* the Vina score, rescaled per target by least squares on the training complexes;
* ridge on Morgan fingerprints of the ligand (radius 2, 2048 bits) per target, the strongest
  simple method on these benchmarks, alpha chosen on validation;
* contact counts: ligand-pocket pairs of element classes within distance shells (the classic
  structure-based descriptor of RF-Score; shells to 8 Angstrom, on pockets cut at 8 Angstrom),
  ridge across targets with a one-hot target column.

Run ``python examples/protein_ligand.py [--quick] [--plot contributions.png]``.
"""
import argparse
import dataclasses
import time
from pathlib import Path

import numpy as np
from scipy.stats import spearmanr
from sklearn.linear_model import LinearRegression, Ridge

import seqattn
from seqattn.adapters.complex import ComplexAdapter
from seqattn.models import build
from seqattn.readers.complexes import read_docked_complexes
from seqattn.train import AdamW, EarlyStopping, MSELoss, WarmupCosine, fit

DATA = Path(__file__).resolve().parent / "data" / "complexes"
CONTACT_ELEMENTS = ("C", "N", "O", "S", "halogen")
SHELLS = (0.0, 4.0, 6.0, 8.0)  # Angstrom


@dataclasses.dataclass
class ExampleConfig:
    # see train_model; "joint" tied "residual" on validation and adds its training time
    variants: tuple = ("attention", "linear path", "residual")
    # the model's pocket: receptor atoms this close to a ligand atom, and its cross-attention
    # cutoff (the baselines read the committed 8 Angstrom pockets)
    pocket_cutoff: float = 6.0
    pooling: str = "sum"  # summed per-atom terms can count contacts; "mean" ties on validation
    bits: int = 2048
    d_model: int = 32
    nhead: int = 4
    num_layers: int = 2
    dim_feedforward: int = 64
    bins: int = 16
    epochs: int = 30
    patience: int = 5
    batch_size: int = 16
    lr: float = 2e-3
    weight_decay: float = 1e-4
    alphas: tuple = (0.3, 1.0, 3.0, 10.0, 30.0, 100.0)
    validation_fraction: float = 0.2
    seed: int = 0


# the test's run: the ridge and attention on its residual, a few epochs
QUICK = dict(variants=("linear path", "residual"), epochs=4, patience=2)


def complexes(pocket_cutoff=8.0):
    """The committed complexes, their pockets cut to `pocket_cutoff` Angstrom of the ligand."""
    return read_docked_complexes(DATA, pocket_cutoff=pocket_cutoff)


def splits(ds, config):
    """(train, validation, test) index arrays: the published test split; 20 % of the published
    training complexes, drawn once, validate."""
    train = np.flatnonzero(ds["split"].values == "train")
    test = np.flatnonzero(ds["split"].values == "test")
    shuffled = np.random.default_rng(config.seed).permutation(train)
    n_valid = int(round(config.validation_fraction * len(train)))
    return np.sort(shuffled[n_valid:]), np.sort(shuffled[:n_valid]), test


def _element_class(symbol):
    return "halogen" if symbol in ("F", "Cl", "Br", "I") else symbol


def contact_counts(ds):
    """(complexes, features): counts of ligand-pocket atom pairs per element-class pair and
    distance shell (features ordered by ligand class, pocket class, shell)."""
    index = {name: i for i, name in enumerate(CONTACT_ELEMENTS)}
    n_classes, n_shells = len(CONTACT_ELEMENTS), len(SHELLS) - 1
    out = np.zeros((ds.sizes["complex"], n_classes * n_classes * n_shells))
    for i in range(ds.sizes["complex"]):
        lig = ds["ligand_element"].values[i]
        poc = ds["pocket_element"].values[i]
        lig_class = np.array([index.get(_element_class(e), -1) for e in lig[lig != ""]])
        poc_class = np.array([index.get(_element_class(e), -1) for e in poc[poc != ""]])
        gap = np.linalg.norm(ds["ligand_xyz"].values[i][lig != ""][:, None]
                             - ds["pocket_xyz"].values[i][poc != ""][None], axis=-1)
        shell = np.digitize(gap, SHELLS) - 1
        counted = (lig_class[:, None] >= 0) & (poc_class[None] >= 0) & (shell < n_shells)
        feature = (lig_class[:, None] * n_classes + poc_class[None]) * n_shells + shell
        out[i] = np.bincount(feature[counted], minlength=out.shape[1])
    return out


def fingerprints(smiles, radius=2, bits=2048):
    from rdkit import Chem
    from rdkit.Chem import rdFingerprintGenerator

    generator = rdFingerprintGenerator.GetMorganGenerator(radius=radius, fpSize=bits)
    return np.stack([generator.GetFingerprintAsNumPy(Chem.MolFromSmiles(s)).astype(np.float32)
                     for s in smiles])


def _ridge_on_validation(features, y, train, valid, alphas):
    """The alpha with the lowest validation RMSE, and the ridge refitted on train + valid."""
    errors = [np.sqrt(np.mean((Ridge(alpha=a).fit(features[train], y[train]).predict(
        features[valid]) - y[valid]) ** 2)) for a in alphas]
    alpha = alphas[int(np.argmin(errors))]
    both = np.concatenate([train, valid])
    return alpha, Ridge(alpha=alpha).fit(features[both], y[both])


def baselines(ds, train, valid, test, config):
    """Per baseline, predictions for every complex (fitted without the test complexes)."""
    y = ds["affinity"].values.astype(np.float64)
    targets = ds["target"].values
    fitted = np.concatenate([train, valid])
    out = {"mean per target": np.zeros_like(y), "vina rescaled": np.zeros_like(y),
           "fingerprint ridge": np.zeros_like(y)}
    prints = fingerprints(ds["smiles"].values)
    for target in np.unique(targets):
        mine = targets == target
        own = fitted[mine[fitted]]
        out["mean per target"][mine] = y[own].mean()
        vina = ds["vina"].values.astype(np.float64)[:, None]
        out["vina rescaled"][mine] = LinearRegression().fit(vina[own], y[own]).predict(vina[mine])
        t_train, t_valid = train[mine[train]], valid[mine[valid]]
        if len(t_valid) == 0:
            t_valid = t_train
        _, ridge = _ridge_on_validation(prints, y, t_train, t_valid, config.alphas)
        out["fingerprint ridge"][mine] = ridge.predict(prints[mine])
    one_hot = (targets[:, None] == np.unique(targets)[None]).astype(np.float64)
    contacts = np.log1p(contact_counts(ds))
    features = np.concatenate([contacts, one_hot], axis=1)
    _, ridge = _ridge_on_validation(features, y, train, valid, config.alphas)
    out["contact counts ridge"] = ridge.predict(features)
    return out


def ridge_per_target(prints, y, targets, fit_rows, alphas):
    """Per target (in sorted order), the ridge on fingerprints fitted on `fit_rows` with that
    target's alpha: (coefficients (targets, bits), intercepts (targets,))."""
    names = np.unique(targets)
    coefficients = np.zeros((len(names), prints.shape[1]))
    intercepts = np.zeros(len(names))
    for g, target in enumerate(names):
        own = fit_rows[targets[fit_rows] == target]
        ridge = Ridge(alpha=alphas[target]).fit(prints[own], y[own])
        coefficients[g], intercepts[g] = ridge.coef_, ridge.intercept_
    return coefficients, intercepts


def validated_alphas(prints, y, targets, train, valid, alphas):
    """Per target, the ridge alpha with the lowest validation RMSE."""
    out = {}
    for target in np.unique(targets):
        t_train, t_valid = train[targets[train] == target], valid[targets[valid] == target]
        out[target] = _ridge_on_validation(prints, y, t_train, t_valid, alphas)[0]
    return out


def train_model(ds, rows, valid, variant, alphas, config, epochs=None):
    """A ComplexModel trained on `rows`; `variant` is "attention" (no fingerprint: attention
    learns what the per-target training mean leaves, the mean frozen), "linear path" (the
    per-target fingerprint ridge as the model, not trained), "residual" (the ridge frozen,
    attention learns what it leaves) or "joint" (both trained from the ridge). With `valid`,
    early stopping on it; else `epochs` epochs."""
    fingerprint = variant != "attention"
    # the per-target offset spares attention from telling the targets apart by their pockets
    adapter = ComplexAdapter(group="target", fingerprint_bits=config.bits if fingerprint else 0)
    adapter.fit(ds, targets="affinity", where={"complex": rows})
    model = build(adapter.model_config(
        pooling=config.pooling, d_model=config.d_model, nhead=config.nhead,
        num_layers=config.num_layers, dim_feedforward=config.dim_feedforward, bins=config.bins,
        cutoff=config.pocket_cutoff, seed=config.seed))
    y = ds["affinity"].values.astype(np.float64)
    targets = ds["target"].values
    if fingerprint:
        prints = fingerprints(ds["smiles"].values, bits=config.bits)
        adapter.set_linear_path(model, *ridge_per_target(prints, y, targets, rows, alphas))
    else:
        means = [y[rows][targets[rows] == target].mean() for target in adapter.groups]
        adapter.set_linear_path(model, np.zeros((len(means), 0)), means)
    if variant == "linear path":
        return adapter, model, 0
    batches = adapter.batches(ds, where={"complex": rows}, batch_size=config.batch_size,
                              shuffle=True, seed=config.seed)
    path = {id(p) for p in model.parameters()} if variant == "joint" else \
        {id(p) for name, p in model.named_parameters()
         if not name.startswith(("offset", "fingerprint"))}
    trained = [p for p in model.parameters() if id(p) in path]
    steps = config.epochs * len(batches)
    stopping = EarlyStopping(patience=config.patience) if epochs is None else None
    fit(model, MSELoss(), AdamW(trained, lr=config.lr, weight_decay=config.weight_decay),
        batches, epochs=config.epochs if epochs is None else epochs,
        validation=None if valid is None else adapter.batches(ds, where={"complex": valid}),
        schedule=WarmupCosine(config.lr, warmup_steps=max(steps // 20, 1), total_steps=steps),
        early_stopping=stopping, progress=False)
    return adapter, model, (epochs if stopping is None else stopping.best_epoch + 1)


def predictions(adapter, model, ds, rows):
    """The model's affinity for the complexes `rows` in a vector over all complexes (NaN at
    the others: predicting only what is scored keeps the run short)."""
    out = np.full(ds.sizes["complex"], np.nan)
    out[rows] = seqattn.predict(model, ds, adapter, where={"complex": rows})["affinity"].values
    return out


def scores(y, predicted, targets, rows):
    """{target or "all": (RMSE, Spearman)} over `rows`."""
    out = {}
    for name in [*np.unique(targets[rows]), "all"]:
        chosen = rows if name == "all" else rows[targets[rows] == name]
        rmse = float(np.sqrt(np.mean((predicted[chosen] - y[chosen]) ** 2)))
        # a ranking needs three values and a predictor that varies (the mean per target does not)
        ranks = len(chosen) > 2 and np.ptp(predicted[chosen]) > 0
        rho = float(spearmanr(predicted[chosen], y[chosen])[0]) if ranks else np.nan
        out[name] = (rmse, rho)
    return out


def run(config, plot=None):
    start = time.time()
    ds = complexes()
    pockets = complexes(config.pocket_cutoff)  # the same complexes, the model's pockets
    train, valid, test = splits(ds, config)
    y = ds["affinity"].values.astype(np.float64)
    targets = ds["target"].values
    results = baselines(ds, train, valid, test, config)
    prints = fingerprints(ds["smiles"].values, bits=config.bits)
    alphas = validated_alphas(prints, y, targets, train, valid, config.alphas)
    predicted, validation = {}, {}
    for variant in config.variants:
        adapter, model, epochs = train_model(pockets, train, valid, variant, alphas, config)
        out = predictions(adapter, model, pockets, valid)
        validation[variant] = (np.sqrt(np.mean((out[valid] - y[valid]) ** 2)), epochs)
        print(f"{variant}: validation RMSE {validation[variant][0]:.3f} after {epochs} epochs")
    chosen = min((v for v in config.variants if v != "attention"),
                 key=lambda v: validation[v][0])
    # the chosen variants refitted on train + validation for the chosen number of epochs, as
    # the baselines are
    both = np.concatenate([train, valid])
    for variant in {"attention", chosen} & set(config.variants):
        adapter, model, _ = train_model(pockets, both, None, variant, alphas, config,
                                        epochs=max(validation[variant][1], 1))
        predicted[variant] = predictions(adapter, model, pockets, test)
        if variant == chosen:
            final = adapter, model
    results = {f"seqattn ({chosen})": predicted[chosen],
               **({"seqattn attention, no fingerprint": predicted["attention"]}
                  if "attention" in predicted else {}), **results}
    table = {name: scores(y, p, targets, test) for name, p in results.items()}
    print(f"{ds.sizes['complex']} complexes ({len(train)} train, {len(valid)} validation, "
          f"{len(test)} test) over {len(np.unique(targets))} targets; chosen on validation: "
          f"{chosen}; ridge alphas {alphas}")
    names = list(table[f"seqattn ({chosen})"])
    print("test RMSE [pK] / Spearman per target:")
    print("| model | " + " | ".join(names) + " |")
    print("| --- " * (len(names) + 1) + "|")
    for model_name, per in table.items():
        print(f"| {model_name} | " + " | ".join(f"{per[n][0]:.2f} / {per[n][1]:.2f}"
                                                for n in names) + " |")
    if plot:
        _plot(*final, pockets, test, plot)
    print(f"{time.time() - start:.0f} s")
    return table


def _plot(adapter, model, ds, test, path, residues=6):
    """Per-atom contributions of the best-predicted test complex, on the ligand in its pocket:
    a 3-D scatter of the ligand's atoms (bonds drawn between atoms closer than 1.95 Angstrom),
    the pocket's atoms within 4 Angstrom of it and the names of its `residues` nearest
    residues."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    predicted = predictions(adapter, model, ds, test)[test]
    i = int(test[np.argmin(np.abs(predicted - ds["affinity"].values[test]))])
    terms = adapter.contributions(model, ds, where={"complex": [i]}).values[0]
    present = ds["ligand_element"].values[i] != ""
    xyz = ds["ligand_xyz"].values[i][present]
    pocket = ds["pocket_element"].values[i] != ""
    pocket_xyz = ds["pocket_xyz"].values[i][pocket]
    residue = ds["pocket_residue"].values[i][pocket]
    gap = np.linalg.norm(pocket_xyz[:, None] - xyz[None], axis=-1).min(axis=1)
    nearest = np.argsort(gap)
    fig = plt.figure(figsize=(7, 6))
    ax = fig.add_subplot(projection="3d")
    shown_atoms = nearest[gap[nearest] <= 4.0]
    ax.scatter(*pocket_xyz[shown_atoms].T, s=10, c="0.6", alpha=0.5,
               label="pocket atoms within 4 Angstrom")
    labelled = []
    for j in nearest:
        if len(labelled) == residues:
            break
        if residue[j] not in labelled:
            labelled.append(residue[j])
            ax.text(*pocket_xyz[j], residue[j], fontsize=7, color="0.3")
    bonded = np.linalg.norm(xyz[:, None] - xyz[None], axis=-1) < 1.95
    for a, b in zip(*np.nonzero(np.triu(bonded, 1))):
        ax.plot(*xyz[[a, b]].T, c="k", lw=1)
    limit = np.nanmax(np.abs(terms))
    shown = ax.scatter(*xyz.T, c=terms[present], cmap="coolwarm", vmin=-limit, vmax=limit,
                       s=70, edgecolors="k", depthshade=False)
    fig.colorbar(shown, label="contribution [pK]", shrink=0.7)
    ax.set_title(f"{ds['target'].values[i]}: measured {float(ds['affinity'][i]):.2f}, "
                 f"predicted {float(predicted[list(test).index(i)]):.2f}\n"
                 f"{ds['smiles'].values[i][:60]}", fontsize=8)
    ax.set_xlabel("x [Angstrom]")
    ax.set_ylabel("y [Angstrom]")
    ax.set_zlabel("z [Angstrom]")
    ax.legend(loc="upper left", fontsize=7)
    fig.savefig(path, dpi=120, bbox_inches="tight")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--plot", default=None)
    args = parser.parse_args(argv)
    config = ExampleConfig(**(QUICK if args.quick else {}))
    return run(config, args.plot)


if __name__ == "__main__":
    main()
