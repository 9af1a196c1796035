"""Energies and forces of Cu-Au alloys: a distance-aware attention model trained on energies and
forces together, against a fitted pair potential.

Data: Cu-Au structures of random composition, computed with ASE's EMT potential (an effective
medium theory, a many-body physical model shipped with ASE: ``pip install ase``):

* clusters (icosahedra and octahedra of 13 and 38 atoms, 55 in the full run) with the lattice
  spacing of their composition (Vegard's law between Cu 3.61 A and Au 4.08 A), a random strain
  and rattled positions;
* periodic 2 x 2 x 2 fcc supercells (32 atoms) likewise strained and rattled.

The model (:class:`seqattn.models.MoleculeModel`, built from ``adapter.model_config``) reads
the structures through :class:`seqattn.adapters.MoleculeAdapter` (Dataset from
:func:`seqattn.readers.from_ase`; the adapter fitted on the training structures with the
targets ``{"energy": "energy", "forces": "forces"}``), trains with
:class:`seqattn.train.EnergyForceLoss` (forces = -dE/dx; their loss's gradient by force
matching) and predicts onto the Dataset with ``seqattn.predict``. Its cutoff (3.4 A) must
stay below half the supercells' smallest lattice-plane spacing (minimum image). It trains in
two stages: ``epochs`` with energies and forces weighted alike (in the adapter's units, where
the force term dominates and shapes the representation), then ``late_epochs`` with the energy
weight raised tenfold (``late_energy_weight``) at ``late_lr``; each stage keeps its epoch with
the best validation loss of its own weighting.

Baseline, in this script: a linear pair potential, E = sum_e n_e b_e + sum over pairs of
sum_k w_{pair type, k} g_k(d) fc(d) with Gaussian radial functions g_k times a cosine cutoff fc,
fitted by (ridge) least squares on energies per atom and forces together (its forces are linear
in w too); it sees every periodic image within its cutoff (ASE's neighbour list). Its cutoff
(the model's 3.4 A, 4.5, 5.5 or 6.5 A: the farther shells the model's cutoff leaves out in the
supercells), force weight (0 to 10) and ridge strength are chosen on validation, reported
three ways: by the model's criterion (each MAE over the mean predictor's, summed: "the pair
potential"), the same at the model's cutoff, and by the validation energy MAE alone.
``seqattn.evaluate`` adds, for the energies, the baselines of ``seqattn.baselines`` on the
model's own inputs (ridge on element counts, ridge on the atoms' pooled features, the nearest
training structure), fitted on the training structures with their choices made on validation,
scored with the model on the same test structures (eV per structure).

Protocol: structures are split into training, validation and test sets (seeded). Every choice
is made on validation data: the model's epochs (early stopping per stage), its training
settings (below, on the quick run's validation set), the baseline's settings. Test energies
MAE per atom (meV/atom) and force MAE (meV/A) are reported for all, with a parity plot (PNG).

Validation MAEs of the quick run (energy meV/atom / forces meV/A; one training each, so
differences of ~3 meV/atom are noise): one stage of 30 epochs at equal weights 50.5 / 109
(clusters' energies 55: the energy term is too weak); energy weight 10 throughout 67 / 368 (the
forces never train); 20 + 10 late epochs at energy weight 10, lr 1e-3: 22.5 / 139 (chosen);
late weight 20: 25.5 / 152, 30: 20.1 / 155 (worse by the criterion); late lr 3e-4: 25.2 / 144,
2e-3: 25.6 / 146; 15 + 15 epochs: 21.3 / 146; three layers: 22.8 / 143 (1.5x the time);
d_model 48: 24.4 / 145. The pair potential on validation: 42.8 / 254 by the criterion (6.5 A),
21-25 / 350-780 when chosen for energies (5.5-6.5 A, force weight 0-0.01).

Test MAEs (energy meV/atom, forces meV/A; quick: 91 / 21 / 28 structures, full: 312 / 72 / 96):

    run, seed                   seqattn     pair potential  at 3.4 A       for energies
    quick, 0                    29.2  179   46.7  284       64.1  304      21.8  370
    quick, 1                    22.6  155   25.9  333       66.6  278      32.5  646
    full, 0                     15.3   89   23.0  309       56.7  239      16.9  454

The model beats the pair potential by the shared criterion on both metrics (the quick test
asserts a 20 % margin for seed 0) and halves its force error. A pair potential fitted for
energies alone, reaching 6.5 A (the model's 3.4 A cutoff sees the first neighbour shell only),
comes close to the model's energies (quick seed 0: better; full run: 16.9 against 15.3) with two
to five times its force error. The full run (pair potentials 5.5 and 6.5 A) takes about 90 s on
a quiet 2-core machine once the kernels are compiled (BENCHMARKS.md). Its parity plot shows four large
force components (magnitudes 9-13 eV/A) predicted with the wrong sign, probably close pairs (large
forces, rare in training; the distance tables have no repulsive core): not investigated.
Supercells of 3 x 3 x 3 cells (108 atoms) would allow a 5 A cutoff, at about 11 times the
attention cost per cell (the distance-biased kernels visit every pair): not tried.

    python examples/alloy_forces.py            # full run
    python examples/alloy_forces.py --quick    # a small run for CI (about 25 s, compiled)
"""
import argparse
import itertools
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import xarray as xr

import seqattn
from seqattn.adapters import MoleculeAdapter
from seqattn.models import build
from seqattn.readers import from_ase
from seqattn.train import AdamW, EarlyStopping, EnergyForceLoss, WarmupCosine, fit

LATTICE = {29: 3.61, 79: 4.08}  # Angstrom, fcc Cu and Au
BASELINE_CUTOFFS = (4.5, 5.5, 6.5)  # Angstrom, beside the model's: the pair potential's reach


@dataclass
class ExampleConfig:
    n_clusters: int = 240
    n_supercells: int = 240
    cluster_shapes: tuple = ("ico2", "oct3", "oct4", "ico3")
    validation_share: float = 0.15
    test_share: float = 0.2
    rattle: float = 0.12  # Angstrom, standard deviation of the displacements
    strain: float = 0.03  # lattice spacing scaled by 1 +- this
    d_model: int = 48
    nhead: int = 4
    num_layers: int = 2
    dim_feedforward: int = 96
    bins: int = 36
    r_max: float = 3.5
    cutoff: float = 3.4
    epochs: int = 40
    batch_size: int = 4
    lr: float = 3e-3
    energy_weight: float = 1.0
    forces_weight: float = 1.0
    late_epochs: int = 20
    late_energy_weight: float = 10.0
    late_lr: float = 1e-3
    patience: int = 10
    seed: int = 0


QUICK = ExampleConfig(n_clusters=70, n_supercells=70, cluster_shapes=("ico2", "oct3", "oct4"),
                      d_model=32, dim_feedforward=64, epochs=20, late_epochs=10, patience=30)


# ---- data --------------------------------------------------------------------------------------


def _cluster(shape, spacing):
    from ase.cluster import Icosahedron, Octahedron

    kind, size = shape[:3], int(shape[3:])
    make = Icosahedron if kind == "ico" else Octahedron
    return make("Cu", size, latticeconstant=spacing) if kind == "ico" else \
        make("Cu", size, 1, latticeconstant=spacing)


def make_structures(config, rng, lattice=LATTICE):
    """Clusters and supercells of random composition with EMT energies and forces: of the two
    elements of ``lattice`` ({atomic number: fcc lattice constant}; Cu-Au by default), the
    second's share is drawn per structure."""
    from ase.build import bulk
    from ase.calculators.emt import EMT

    (host, host_a), (guest, guest_a) = lattice.items()
    structures = []
    for i in range(config.n_clusters + config.n_supercells):
        share = rng.uniform(0, 1)
        spacing = ((1 - share) * host_a + share * guest_a) * \
            (1 + rng.uniform(-config.strain, config.strain))
        if i < config.n_clusters:
            atoms = _cluster(config.cluster_shapes[i % len(config.cluster_shapes)], spacing)
        else:
            atoms = bulk("Cu", "fcc", a=spacing, cubic=True).repeat(2)
        atoms.numbers = np.where(rng.random(len(atoms)) < share, guest, host)
        atoms.rattle(config.rattle, seed=int(rng.integers(2 ** 31)))
        atoms.calc = EMT()
        atoms.get_forces()
        structures.append(atoms)
    return structures


def split(n, config, rng):
    order = rng.permutation(n)
    n_test, n_val = int(config.test_share * n), int(config.validation_share * n)
    return {"test": np.sort(order[:n_test]), "validation": np.sort(order[n_test:n_test + n_val]),
            "train": np.sort(order[n_test + n_val:])}


# ---- the baseline: a pair potential fitted by least squares ------------------------------------


class PairPotential:
    """E = sum_e n_e b_e + sum_{pairs} sum_k w[pair type, k] g_k(d) fc(d) (see the module
    docstring); ``fit`` solves the ridge least squares on energies per atom and forces."""

    def __init__(self, cutoff, n_basis=16, elements=(29, 79), inner=1.6):
        self.cutoff, self.elements = cutoff, list(elements)
        self.centres = np.linspace(inner, cutoff, n_basis)
        self.width = self.centres[1] - self.centres[0]
        pairs = list(itertools.combinations_with_replacement(range(len(elements)), 2))
        self.pair_index = {p: i for i, p in enumerate(pairs)}
        self.pair_index.update({p[::-1]: i for p, i in self.pair_index.items()})
        self.n_pairs, self.n_basis = len(pairs), n_basis

    def _radial(self, d):
        """g_k(d) fc(d) and its derivative in d, (P, K) each."""
        x = (d[:, None] - self.centres) / self.width
        g = np.exp(-x ** 2)
        dg = -2 * x / self.width * g
        fc = 0.5 * (1 + np.cos(np.pi * d / self.cutoff))[:, None]
        dfc = (-0.5 * np.pi / self.cutoff * np.sin(np.pi * d / self.cutoff))[:, None]
        return g * fc, dg * fc + g * dfc

    def features(self, atoms):
        """(energy row (F,), force rows (N, 3, F)) with F = elements + pair types x basis."""
        from ase.neighborlist import neighbor_list

        i, j, d, D = neighbor_list("ijdD", atoms, self.cutoff)
        types = np.array([self.elements.index(z) for z in atoms.numbers])
        n_el = len(self.elements)
        width = n_el + self.n_pairs * self.n_basis
        energy, forces = np.zeros(width), np.zeros((len(atoms), 3, width))
        energy[:n_el] = np.bincount(types, minlength=n_el)
        value, slope = self._radial(d)
        pair = np.array([self.pair_index[(a, b)] for a, b in zip(types[i], types[j])],
                        dtype=np.int64)
        columns = n_el + pair[:, None] * self.n_basis + np.arange(self.n_basis)
        np.add.at(energy, columns, 0.5 * value)  # every pair is listed as (i, j) and (j, i)
        # F_i = -dE/dx_i = sum_j w g'(d_ij) D_ij / d_ij with D_ij = x_j - x_i
        contribution = (slope[:, None, :] * (D / d[:, None])[:, :, None])  # (P, 3, K)
        for axis in range(3):
            np.add.at(forces[:, axis], (i[:, None], columns), contribution[:, axis])
        return energy, forces

    def fit(self, structures, force_weight, ridge, features=None):
        """Ridge least squares on energies per atom and forces (``features``: those of the
        structures, when already computed)."""
        features = features or [self.features(a) for a in structures]
        rows, targets = [], []
        for atoms, (e, f) in zip(structures, features):
            n = len(atoms)
            rows += [e[None] / n, np.sqrt(force_weight / (3 * n)) * f.reshape(-1, len(e))]
            targets += [[atoms.get_potential_energy() / n],
                        np.sqrt(force_weight / (3 * n)) * atoms.get_forces().reshape(-1)]
        a, y = np.concatenate(rows), np.concatenate(targets)
        penalty = ridge * np.eye(a.shape[1])
        penalty[:len(self.elements), :len(self.elements)] = 0  # the references stay free
        self.weights = np.linalg.solve(a.T @ a + penalty, a.T @ y)
        return self

    def predict(self, atoms, features=None):
        e, f = features or self.features(atoms)
        return e @ self.weights, f @ self.weights


def errors(energy, forces, structures):
    """(energy MAE per atom, force MAE) in meV/atom and meV/A."""
    n = np.array([len(a) for a in structures])
    e_true = np.array([a.get_potential_energy() for a in structures])
    f_true = np.concatenate([a.get_forces().ravel() for a in structures])
    return (float(np.mean(np.abs(np.asarray(energy) - e_true) / n)) * 1e3,
            float(np.mean(np.abs(np.concatenate([np.ravel(f) for f in forces]) - f_true))) * 1e3)


def relative_score(scores, reference):
    """The validation criterion: each MAE over the mean predictor's, summed."""
    return scores[0] / reference[0] + scores[1] / reference[1]


def energy_score(scores, reference):
    """A criterion on energies alone (the pair potential at its best for energies);
    ``reference`` is unused, taken for the signature of :func:`relative_score`."""
    return scores[0]


BASELINE_GRID = {"force_weight": (0.0, 0.01, 0.1, 1.0, 10.0), "ridge": (1e-6, 1e-4, 1e-2)}


def validation_sweep(structures, parts, cutoffs, elements=tuple(LATTICE)):
    """{(cutoff, force weight, ridge): validation (energy MAE, force MAE)} of the pair
    potential of ``elements`` fitted on the training structures, for every cutoff and
    ``BASELINE_GRID`` point (each cutoff's features computed once)."""
    train = [structures[i] for i in parts["train"]]
    validation = [structures[i] for i in parts["validation"]]
    scores = {}
    for cutoff in cutoffs:
        potential = PairPotential(cutoff, elements=elements)
        train_features = [potential.features(a) for a in train]
        validation_features = [potential.features(a) for a in validation]
        for force_weight, ridge in itertools.product(*BASELINE_GRID.values()):
            potential.fit(train, force_weight, ridge, train_features)
            predicted = [potential.predict(a, f) for a, f in zip(validation, validation_features)]
            scores[cutoff, force_weight, ridge] = errors(
                [p[0] for p in predicted], [p[1] for p in predicted], validation)
    return scores


def baseline(structures, parts, sweep, criterion, reference, cutoffs, elements=tuple(LATTICE)):
    """The pair potential of ``elements``, fitted on the training structures, whose setting
    (among the ``sweep``'s with a cutoff in ``cutoffs``) is best on validation by
    ``criterion``."""
    setting = min((key for key in sweep if key[0] in cutoffs),
                  key=lambda key: criterion(sweep[key], reference))
    cutoff, force_weight, ridge = setting
    train = [structures[i] for i in parts["train"]]
    return PairPotential(cutoff, elements=elements).fit(train, force_weight, ridge), \
        {"cutoff": cutoff, "force_weight": force_weight, "ridge": ridge}


def mean_predictor_errors(structures, parts):
    """The validation MAEs of predicting the mean training energy per atom and zero forces."""
    train = [structures[i] for i in parts["train"]]
    per_atom = np.mean([a.get_potential_energy() / len(a) for a in train])
    validation = [structures[i] for i in parts["validation"]]
    return errors([per_atom * len(a) for a in validation],
                  [np.zeros((len(a), 3)) for a in validation], validation)


# ---- the model -----------------------------------------------------------------------------------


def train_model(config, ds, parts, progress):
    """Train on energies and forces with ``forces_weight`` and ``energy_weight``; then, for
    ``late_epochs``, with the energy weight raised to ``late_energy_weight`` at ``late_lr``
    (forces shape the representation first, energies are refined last). Each stage keeps its
    best epoch on the validation loss of its own weighting. Returns (model, adapter, the
    stages' histories)."""
    adapter = MoleculeAdapter().fit(ds, targets={"energy": "energy", "forces": "forces"},
                                    where=parts["train"])
    model = build(adapter.model_config(
        d_model=config.d_model, nhead=config.nhead, num_layers=config.num_layers,
        dim_feedforward=config.dim_feedforward, bins=config.bins, r_max=config.r_max,
        cutoff=config.cutoff, seed=config.seed))
    batches = adapter.batches(ds, where=parts["train"], batch_size=config.batch_size,
                              shuffle=True, seed=config.seed)
    validation = adapter.batches(ds, where=parts["validation"], batch_size=config.batch_size)
    histories = []
    stages = [(config.epochs, config.energy_weight, config.lr)]
    if config.late_epochs:
        stages.append((config.late_epochs, config.late_energy_weight, config.late_lr))
    for epochs, energy_weight, lr in stages:
        steps = epochs * len(batches)
        histories.append(fit(
            model, EnergyForceLoss(energy_weight, config.forces_weight),
            AdamW(model, lr=lr, weight_decay=0.0), batches, epochs=epochs, validation=validation,
            schedule=WarmupCosine(lr, warmup_steps=len(batches), total_steps=steps),
            early_stopping=EarlyStopping(patience=config.patience), progress=progress))
    return model, adapter, histories


def parity_plot(rows, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 4.6))
    for name, (e_true, e_pred, f_true, f_pred) in rows.items():
        axes[0].scatter(e_true, e_pred, s=8, alpha=0.6, label=name)
        axes[1].scatter(f_true, f_pred, s=3, alpha=0.3, label=name)
    for ax, title in zip(axes, ("energy per atom (eV)", "force component (eV/A)")):
        low, high = ax.get_xlim()
        ax.plot([low, high], [low, high], "k--", lw=0.8)
        ax.set_xlabel(f"EMT {title}")
        ax.set_ylabel(f"predicted {title}")
        ax.legend()
    fig.suptitle("Cu-Au test structures")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# ---- main ----------------------------------------------------------------------------------------


def main(argv=None, config=None, progress=True):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="a small run (CI)")
    parser.add_argument("--out", default="alloy_forces_output", help="folder for the figure")
    args = parser.parse_args(argv)
    config = config or (QUICK if args.quick else ExampleConfig())
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    rng = np.random.default_rng(config.seed)
    structures = make_structures(config, rng)
    ds = from_ase(structures)
    parts = split(len(structures), config, rng)
    reference = mean_predictor_errors(structures, parts)
    test = [structures[i] for i in parts["test"]]

    baselines = {}
    all_cutoffs = (config.cutoff,) + BASELINE_CUTOFFS
    sweep = validation_sweep(structures, parts, all_cutoffs)
    for name, cutoffs, criterion in (("baseline", all_cutoffs, relative_score),
                                     ("baseline_model_cutoff", (config.cutoff,), relative_score),
                                     ("baseline_energy", all_cutoffs, energy_score)):
        potential, chosen = baseline(structures, parts, sweep, criterion, reference, cutoffs)
        predicted = [potential.predict(a) for a in test]
        baselines[name] = ([p[0] for p in predicted], [p[1] for p in predicted], chosen)

    model, adapter, histories = train_model(config, ds, parts, progress)
    out_ds = seqattn.predict(model, ds.isel(molecule=parts["test"]), adapter)
    model_e = out_ds["energy"].values
    model_f = [out_ds["forces"].values[k, :len(a)] for k, a in enumerate(test)]

    results = {name: dict(zip(("energy_mae", "force_mae"), errors(e, f, test)), **chosen)
               for name, (e, f, chosen) in baselines.items()}
    results.update({
        "model": dict(zip(("energy_mae", "force_mae"), errors(model_e, model_f, test)),
                      epochs=[len(h["loss"]) for h in histories],
                      best_val_loss=[float(min(h["val_loss"])) for h in histories]),
        "mean_predictor_validation": dict(zip(("energy_mae", "force_mae"), reference)),
        "sizes": {k: len(v) for k, v in parts.items()}})
    n = np.array([len(a) for a in test])
    e_true = np.array([a.get_potential_energy() for a in test]) / n
    f_true = np.concatenate([a.get_forces().ravel() for a in test])
    parity_plot({"seqattn": (e_true, model_e / n, f_true,
                             np.concatenate([f.ravel() for f in model_f])),
                 "pair potential": (e_true, np.array(baselines["baseline"][0]) / n, f_true,
                                    np.concatenate([f.ravel()
                                                    for f in baselines["baseline"][1]]))},
                out / "alloy_forces_parity.png")
    part = {name: xr.DataArray(np.isin(np.arange(len(structures)), nodes), dims="molecule")
            for name, nodes in parts.items()}
    results["scores"] = seqattn.evaluate(model, ds, adapter, where=part["test"],
                                         train=part["train"], validation=part["validation"],
                                         targets="energy", batch_size=config.batch_size)
    results["seconds"] = time.perf_counter() - started
    report(results)
    return results


def report(results):
    print(f"\nstructures: {results['sizes']}; test MAE: energy (meV/atom), forces (meV/A)")
    for name, label in (("model", "seqattn"), ("baseline", "pair potential"),
                        ("baseline_model_cutoff", "pair potential, model's cutoff"),
                        ("baseline_energy", "pair potential, for energies")):
        row = results[name]
        print(f"  {label:32s} {row['energy_mae']:8.2f} {row['force_mae']:8.1f}")
    reference = results["mean_predictor_validation"]
    print(f"  mean predictor (validation) {reference['energy_mae']:.2f} "
          f"{reference['force_mae']:.1f}")
    for name in ("baseline", "baseline_energy"):
        row = results[name]
        print(f"{name} chosen on validation: cutoff {row['cutoff']} A, force weight "
              f"{row['force_weight']}, ridge {row['ridge']}")
    print("test energies (eV per structure) against the baselines of seqattn.baselines:")
    print(seqattn.evaluation.table(results["scores"]).to_string(float_format="%.3f"))
    print(f"{results['seconds']:.0f} s")


if __name__ == "__main__":
    main()
