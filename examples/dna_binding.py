"""Which factor bound here? Oct4 vs Mafk ChIP-seq peaks (200 bp) told apart by a strand-symmetric
Transformer on k-mer tokens whose function class contains the strongest linear baseline, against
the baselines of seqattn.baselines (logistic regression on the frequencies of the model's k-mer
tokens, nearest neighbour; KmerCounts on the same peaks' bases), with in-silico mutagenesis
checked against the factors' JASPAR motifs.

Data: the peak sequences janggu ships as package resources (``sample.fa``: 3,897 Oct4 peaks,
``sample2.fa``: 3,900 Mafk peaks; held out: ``sample_test.fa`` / ``sample2_test.fa``, 100 each).
Install them without janggu's pinned dependencies (nothing of janggu is imported; the files are
read by path)::

    pip install --no-deps janggu
    pip install scikit-learn pyjaspar matplotlib

Model: overlapping k-mer ids (GenomeAdapter), attention pooling, both strands averaged
(StrandSymmetric), and a linear path on the k-mer frequencies (``linear=True``) that holds the
strand-symmetric k-mer counts' logistic regression (KmerCounts with k' <= k, read on the model's
k-mers by ``seqattn.baselines.warm_start``: every shorter k-mer's count is a sum of k-mer
counts). Three variants
(VARIANTS): "attention" (the path at zero), "attention + k-mer counts" (the same model with the
path then set to the baseline, the head kept: the sum of both logits) and "residual on k-mer
counts" (the path at the baseline and kept there, the head zeroed, the attention trained on what
the baseline leaves; early stopping can keep the start).

Protocol: the training files are split into training and validation (stratified, seeded); every
choice (the k-mer size among ``--candidates`` and the variant, with ``seqattn.train.select``;
the epoch; the baselines' k and regularisation) is made on validation AUROC; the test files are
scored once, at the end, by ``seqattn.evaluate``. The peaks are one genome Dataset
(``seqattn.readers``) with each peak's ``factor`` (the target, two classes) and ``part``; the
model goes through the adapter protocol (fit on the training part, batches with
reverse-complement augmentation, ``seqattn.evaluate`` for the scores, which fits KmerCounts on
the bases the model's k-mer ids hold).
Reported: AUROC, accuracy and log loss on the test files for the model and the baselines
(fitted on the training part's batches, their penalties chosen on validation); a figure of
the mutagenesis maps of a few test sequences; and the motif check: in each attributed test
sequence, the window the model finds most important (for the log-odds of Mafk) is scored with
the JASPAR matrix of the sequence's factor (POU5F1 for Oct4, MAFK for Mafk; log-odds, best
strand, best offset within k bases), and compared with random windows of the same sequences
scored the same way.

    python examples/dna_binding.py            # full run (--candidates 4 6: choose k too)
    python examples/dna_binding.py --quick    # a small run for CI (under 90 s on 2 cores)
"""
import argparse
import copy
import importlib.util
import time
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

import seqattn
from seqattn.adapters import GenomeAdapter
from seqattn.adapters.genome_variants import mutagenesis
from seqattn.baselines import KmerCounts, warm_start
from seqattn.baselines.dna import KMER_SIZES
from seqattn.models import StrandSymmetric, build
from seqattn.models.linear_path import residual_parameters
from seqattn.readers import from_sequences, read_fasta
from seqattn.readers.dna_codes import SOFT
from seqattn.train import AdamW, CrossEntropyLoss, EarlyStopping, fit
from seqattn.train.select import select

FACTORS = {"Oct4": ("sample.fa", "sample_test.fa", "POU5F1"),
           "Mafk": ("sample2.fa", "sample2_test.fa", "MAFK")}  # the class scored as positive

# how the attention meets the strongest linear baseline, the strand-symmetric k-mer counts'
# logistic regression (KmerCounts), carried by the model's linear path on its k-mer frequencies
VARIANTS = ("attention", "attention + k-mer counts", "residual on k-mer counts")


@dataclass
class ExampleConfig:
    n_train: int = None  # training sequences per factor (None: all but the validation share)
    validation_share: float = 0.15
    candidates: tuple = (6,)  # k-mer sizes tried, each with every variant
    variants: tuple = VARIANTS  # the candidate with the best validation AUROC wins
    d_model: int = 32
    nhead: int = 2
    num_layers: int = 1
    dim_feedforward: int = 64
    epochs: int = 3
    batch_size: int = 64
    lr: float = 5e-3
    positions: str = "none"
    pooling: str = "attention"  # a learned query finds the motif hits (like a CNN's max pool)
    n_attributed: int = 10  # test sequences per factor attributed by mutagenesis
    n_random_windows: int = 20  # random windows per attributed sequence
    n_figure: int = 4
    seed: int = 0


QUICK = ExampleConfig(n_train=1000, epochs=4, n_attributed=2, n_figure=2)


def resources():
    """janggu's resources folder, found without importing janggu (its pins are old)."""
    spec = importlib.util.find_spec("janggu")
    if spec is None:
        raise SystemExit("the data are janggu's resources: pip install --no-deps janggu")
    return Path(spec.submodule_search_locations[0]) / "resources"


def load(config):
    """One genome Dataset of the peaks used, with each one's ``factor`` (the target) and
    ``part`` ("train", "validation", "test"): janggu's training files split at random
    (seeded, :func:`peaks_dataset`), the test files held out."""
    folder = resources()
    peaks = {factor: (list(read_fasta(folder / train_file)), list(read_fasta(folder / test_file)))
             for factor, (train_file, test_file, _) in FACTORS.items()}
    return peaks_dataset(peaks, config)


def peaks_dataset(peaks, config):
    """The Dataset of :func:`load` from {factor: (training records, test records)}: each
    factor's training records split by a permutation drawn from config.seed (validation_share
    of it validates; n_train caps the training part, and the validation part at a quarter of
    n_train or 50, whichever is more), the test records held out. The transfer benchmark reads
    other factors' peaks through it."""
    rng = np.random.default_rng(config.seed)
    records, factors, parts = [], [], []
    for factor, (training, test) in peaks.items():
        order = rng.permutation(len(training))
        n_val = int(round(config.validation_share * len(order)))
        val, train = order[:n_val], order[n_val:]
        if config.n_train is not None:
            train = train[: config.n_train]
            val = val[: max(config.n_train // 4, 50)]
        part = np.full(len(training), "", dtype=object)
        part[train], part[val] = "train", "validation"
        used = np.sort(np.concatenate([train, val]))
        records += [training[i] for i in used] + list(test)
        parts += list(part[used]) + ["test"] * len(test)
        factors += [factor] * (len(used) + len(test))
    ds = from_sequences(records)
    ds["factor"] = ("record", np.array(factors, dtype=object))
    return ds.assign_coords(part=("record", np.array(parts, dtype=object)))


# ---- the model -----------------------------------------------------------------------------


def auroc_metric(logits, classes):
    """AUROC of the two-class logits (B, 2) against class indices (B,)."""
    from sklearn.metrics import roc_auc_score

    return float(roc_auc_score(classes == 1, logits[:, 1] - logits[:, 0]))


def kmer_counts(ds, adapter, kmer_sizes=KMER_SIZES, strand_symmetric=True):
    """KmerCounts on the bases `adapter`'s k-mer ids hold (token_k), fitted on the training
    peaks, k and penalty chosen on validation."""
    parts = {p: adapter.batches(ds, where=ds.part == p, batch_size=256, shuffle=False)
             for p in ("train", "validation")}
    return KmerCounts(kmer_sizes, strand_symmetric=strand_symmetric, token_k=adapter.k).fit(
        parts["train"], parts["validation"], n_classes=2)


def train(config, ds, adapter, progress, start=None):
    """A strand-symmetric model on `adapter`'s k-mer tokens with a linear path on their
    frequencies, stopped at its best validation AUROC. The path stays where it starts: at
    zero, or at the fitted KmerCounts `start` with the head zeroed (warm_start), so that the
    attention learns the residual (the start itself kept if no epoch beats it)."""
    train, valid = ds.part == "train", ds.part == "validation"
    inner = build(adapter.model_config(
        task="classification", d_model=config.d_model, nhead=config.nhead,
        num_layers=config.num_layers, dim_feedforward=config.dim_feedforward,
        positions=config.positions, pooling=config.pooling, seed=config.seed, linear=True))
    if start is not None:
        warm_start(inner, start)
    model = StrandSymmetric(inner, adapter.complement)
    keep = EarlyStopping(patience=3, monitor="val_auroc", mode="max",
                         include_start=start is not None)
    fit(model, CrossEntropyLoss(), AdamW(residual_parameters(inner), lr=config.lr),
        adapter.batches(ds, where=train, batch_size=config.batch_size, shuffle=True,
                        seed=config.seed, reverse_complement=True),
        validation=adapter.batches(ds, where=valid, batch_size=int(valid.sum())),
        metrics={"auroc": auroc_metric}, epochs=config.epochs, early_stopping=keep,
        progress=progress)
    return model


def trained_variant(config, ds, adapter, variant, baseline, progress, cache):
    """The model of one candidate: `adapter`'s k-mer size and `variant` (VARIANTS)."""
    if variant == "residual on k-mer counts":
        return train(config, ds, adapter, progress, start=baseline)
    if adapter.k not in cache:  # "attention" and "attention + k-mer counts" share one training
        cache[adapter.k] = train(config, ds, adapter, progress)
    if variant == "attention":
        return cache[adapter.k]
    both = copy.deepcopy(cache[adapter.k])
    warm_start(both.model, baseline, keep_head=True)  # the sum of logits: a product of experts
    return both


def recipe(config, ds, progress=True):
    """Every candidate (k-mer size among config.candidates x config.variants) trained, the one
    with the best validation AUROC chosen: a seqattn.train.select Selection whose model is
    (model, adapter). Each k's path starts from a strand-symmetric KmerCounts with k' <= k."""
    adapters = {k: GenomeAdapter(tokens="ids", k=k, ambiguous="token").fit(
        ds, targets="factor", where=ds.part == "train") for k in config.candidates}
    baselines = {k: kmer_counts(ds, adapter, [s for s in KMER_SIZES if s <= k])
                 for k, adapter in adapters.items()}
    cache = {}
    candidates = {f"k={k}, {variant}": (k, variant)
                  for k in config.candidates for variant in config.variants}

    def trained(candidate):
        k, variant = candidate
        return trained_variant(config, ds, adapters[k], variant, baselines[k], progress,
                               cache), adapters[k]

    return select(
        candidates, train=trained,
        score=lambda found: seqattn.evaluate(found[0], ds, found[1],
                                             where=ds.part == "validation", baselines=False),
        metric="auroc")


def score(model, adapter, ds, where):
    """seqattn.evaluate's scores of the model on the peaks `where` selects against every
    baseline it fits on the model's k-mer tokens: logistic regression on their frequencies,
    nearest neighbour, and KmerCounts plain and strand-symmetric on the bases they hold (k and
    penalty chosen on validation)."""
    return seqattn.evaluate(model, ds, adapter, where=where, train=ds.part == "train",
                            validation=ds.part == "validation")


# ---- attribution and motifs ----------------------------------------------------------------


def jaspar_log_odds(name):
    """(length, 4) log2-odds of the JASPAR matrix named `name` (A, C, G, T columns)."""
    from pyjaspar import jaspardb

    motif = jaspardb().fetch_motifs_by_name(name)[0]
    counts = np.array([motif.counts[b] for b in "ACGT"], np.float64).T
    probabilities = (counts + 0.25) / (counts + 0.25).sum(axis=1, keepdims=True)
    return np.log2(probabilities / 0.25)


def motif_score(codes, log_odds):
    """Best-strand log-odds score of base codes (length of the matrix); ambiguous bases add 0."""
    codes = np.asarray(codes) % SOFT
    ok = codes < 4
    index = np.arange(len(codes))
    forward = np.where(ok, log_odds[index, np.minimum(codes, 3)], 0).sum()
    reverse = np.where(ok[::-1], log_odds[index, 3 - np.minimum(codes[::-1], 3)], 0).sum()
    return max(forward, reverse)


def importance(effect, label):
    """Per-base importance: how much mutating the base moves the score away from the sequence's
    class (mean over the three alternatives; the reference entry is 0)."""
    towards = 1.0 if label == "Mafk" else -1.0
    return -towards * effect.values.sum(axis=1) / 3.0


def best_match(codes, start, log_odds, slack):
    """The best JASPAR score of a window starting within `slack` bases of `start` (mutagenesis
    of k-mer tokens blurs a site by up to k - 1 bases, and a matrix score is sharp to 1 base)."""
    width = len(log_odds)
    starts = range(max(0, start - slack), min(len(codes) - width, start + slack) + 1)
    return max(motif_score(codes[s: s + width], log_odds) for s in starts)


def motif_check(model, adapter, ds, config, rng):
    """Attribute test sequences (the log-odds of Mafk); compare the JASPAR score found at each
    one's most important window with that found the same way at random windows of the same
    sequence."""
    test = ds.isel(record=ds.part.values == "test")
    maps, rows = [], []
    for factor, (_, _, matrix) in FACTORS.items():
        log_odds = jaspar_log_odds(matrix)
        width, slack = len(log_odds), adapter.k
        picks = rng.choice(np.flatnonzero(test["factor"].values == factor), config.n_attributed,
                           replace=False)
        for i in picks:
            one = test.isel(record=[i])
            effect = mutagenesis(model, one, adapter, output="Mafk")
            weight = importance(effect, factor)
            window = np.convolve(weight, np.ones(width), mode="valid")  # window sums
            top = int(np.argmax(window))
            codes = one["sequence"].values[0, : effect.sizes["position"]]
            random_starts = rng.integers(0, len(window), config.n_random_windows)
            rows.append((factor, best_match(codes, top, log_odds, slack),
                         np.mean([best_match(codes, s, log_odds, slack) for s in random_starts]),
                         log_odds.max(axis=1).sum()))
            maps.append((factor, effect, weight, top, width))
    summary = {}
    for factor in FACTORS:
        top = np.array([r[1] for r in rows if r[0] == factor])
        random = np.array([r[2] for r in rows if r[0] == factor])
        best = [r[3] for r in rows if r[0] == factor][0]
        summary[factor] = {"top_window_log_odds": float(top.mean()),
                           "random_window_log_odds": float(random.mean()),
                           "best_possible": float(best),
                           "top_beats_random": float((top > random).mean())}
    return summary, maps


def figure(maps, path, n):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shown = maps[:: max(len(maps) // n, 1)][:n]
    fig, axes = plt.subplots(2 * len(shown), 1, figsize=(12, 2.6 * len(shown)), squeeze=False)
    for row, (factor, effect, weight, top, width) in enumerate(shown):
        ax = axes[2 * row, 0]
        limit = float(np.abs(effect.values).max()) or 1.0
        ax.imshow(effect.values.T, aspect="auto", cmap="RdBu_r", vmin=-limit, vmax=limit)
        ax.set_yticks(range(4), list("ACGT"))
        ax.set_title(f"{factor} peak {effect.attrs['record']}: score change per mutation")
        ax = axes[2 * row + 1, 0]
        ax.plot(weight, lw=1)
        ax.axvspan(top, top + width, color="orange", alpha=0.3, label="most important window")
        ax.set_xlim(0, len(weight))
        ax.set_ylabel("importance")
        ax.legend(loc="upper right", fontsize=7)
    axes[-1, 0].set_xlabel("position in peak (bp)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# ---- main ----------------------------------------------------------------------------------


def main(argv=None, config=None, progress=True):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="a small run (CI)")
    parser.add_argument("--out", default="dna_binding_output", help="folder for the figure")
    parser.add_argument("--candidates", type=int, nargs="+",
                        help="k-mer sizes to choose from on validation data, e.g. 4 6")
    args = parser.parse_args(argv)
    config = config or (QUICK if args.quick else ExampleConfig())
    if args.candidates:
        config = replace(config, candidates=tuple(args.candidates))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    ds = load(config)
    choice = recipe(config, ds, progress)
    model, adapter = choice.model
    results = {"model": model, "adapter": adapter, "choice": choice.name, "k": adapter.k,
               "validation": choice.table,
               "scores": score(model, adapter, ds, ds.part == "test")}
    results["motifs"], maps = motif_check(model, adapter, ds, config,
                                          np.random.default_rng(config.seed))
    figure(maps, out / "dna_binding_mutagenesis.png", config.n_figure)
    results["seconds"] = time.perf_counter() - started
    report(results, ds)
    return results


def report(results, ds):
    parts, counts = np.unique(ds.part.values.astype(str), return_counts=True)
    sizes = ", ".join(f"{name} {n}" for name, n in zip(parts, counts))
    print(f"\nsequences: {sizes}; the test files' scores (model: strand-symmetric, "
          f"{results['choice']}; the baselines on its k-mer tokens):")
    print(seqattn.evaluation.table(results["scores"]).to_string(float_format="%.3f"))
    print("validation per candidate:")
    print(results["validation"][["auroc", "log_loss", "seconds"]].to_dataframe().to_string(
        float_format="%.3f"))
    print("motif check (JASPAR log-odds, best strand and offset within k bases):")
    for factor, row in results["motifs"].items():
        print(f"  {factor}: most important window {row['top_window_log_odds']:.2f}, random "
              f"windows {row['random_window_log_odds']:.2f} (best possible "
              f"{row['best_possible']:.2f}); top beats random in "
              f"{100 * row['top_beats_random']:.0f}% of sequences")
    print(f"{results['seconds']:.0f} s")


if __name__ == "__main__":
    main()
