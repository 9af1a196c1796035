"""Variants and in-silico mutagenesis on genome Datasets.

:func:`variant_windows` cuts a window around each variant with the reference and the alternate
allele (SNVs and short indels) starting at the centre base; :func:`variant_effects` scores both
with an N -> 1 model and their difference. :func:`mutagenesis` scores every alternative base at
every position of a sequence as a (position, base) DataArray. Scores are the model's raw outputs
(logits for a classifier: a variant's effect on the log-odds).
"""
from dataclasses import dataclass

import numpy as np
import xarray as xr

from ..data.model_call import ModelCall
from ..readers.dna_codes import N_CODE, PAD, SOFT, codes_of, letters_of
from ..readers.sequences import as_genome_dataset, genome_dataset
from .genome_batches import GenomeBatches


@dataclass(frozen=True)
class Variant:
    """A variant at 0-based `position` on `chrom` (a record's genomic coordinates, or a record
    name and the offset in it): `ref` the reference allele, `alt` the alternate (SNV or a short
    indel; '' or '-' for none)."""

    chrom: str
    position: int
    ref: str
    alt: str

    @property
    def label(self):
        return f"{self.chrom}:{self.position}:{self.ref or '-'}>{self.alt or '-'}"


def _locate(ds, variant, variable):
    """(record index, offset in the record) of a variant."""
    lengths = record_lengths(ds, variable)
    if "chrom" in ds.coords and "start" in ds.coords:
        for i, (chrom, start) in enumerate(zip(ds["chrom"].values, ds["start"].values)):
            if chrom == variant.chrom and start <= variant.position < start + lengths[i]:
                return i, int(variant.position - start)
    names = list(ds["record"].values)
    if variant.chrom in names:
        i = names.index(variant.chrom)
        if 0 <= variant.position < lengths[i]:
            return i, int(variant.position)
    raise ValueError(f"variant {variant.label}: no record covers {variant.chrom} position "
                     f"{variant.position} (records: {names[:5]}{'...' if len(names) > 5 else ''})")


def record_lengths(ds, variable):
    """Bases per record: the ``length`` coordinate, else counted (codes before padding)."""
    if "length" in ds.coords:
        return ds["length"].values.astype(np.int64)
    return (ds[variable].transpose("record", ...).values != PAD).sum(axis=-1)


def variant_windows(sequences, variants, window, position_dim="position", variable="sequence"):
    """A genome Dataset (variant, allele, position) of `window`-base windows around each variant:
    allele ``ref`` is the reference sequence, ``alt`` the same with the alternate allele; both
    alleles start at base ``window // 2`` (attr ``centre``), the rest of the window is the
    sequence around them (an indel shifts the right flank), padding where the record ends.

    `sequences`: a genome Dataset or what :func:`seqattn.readers.as_genome_dataset` takes.
    `variants`: :class:`Variant` objects or (chrom, position, ref, alt) tuples. A reference
    allele that does not match the sequence is a ValueError naming the variant, record and
    position."""
    ds = as_genome_dataset(sequences, position_dim, variable)
    codes = ds[variable].transpose("record", position_dim).values
    variants = [v if isinstance(v, Variant) else Variant(*v) for v in variants]
    if not variants:
        raise ValueError("no variants given")
    centre = window // 2
    out = np.full((len(variants), 2, window), PAD, np.uint8)
    where = np.zeros((len(variants), 2), np.int64)
    for n, v in enumerate(variants):
        ref, alt = ("" if a in ("-", ".") else a for a in (v.ref, v.alt))
        record, offset = _locate(ds, v, variable)
        row = codes[record, : record_lengths(ds, variable)[record]]
        found = letters_of(row[offset: offset + len(ref)])
        if found.upper() != ref.upper():
            raise ValueError(f"variant {v.label}: the reference allele {ref!r} does not match "
                             f"record {ds['record'].values[record]!r} at position {offset} "
                             f"(0-based offset), which holds {found!r}")
        left = row[max(0, offset - centre): offset]
        for a, allele in enumerate((ref, alt)):
            right = row[offset + len(ref):]
            middle = codes_of(allele, v.label) if allele else np.zeros(0, np.uint8)
            seq = np.concatenate([left, middle, right])[: window - centre + len(left)]
            at = centre - len(left)
            out[n, a, at: at + len(seq)] = seq[: window - at]
        where[n] = (record, offset)
    names = [v.label for v in variants]
    return xr.Dataset(
        {variable: (("variant", "allele", position_dim), out)},
        coords={"variant": np.array(names, dtype=object), "allele": ["ref", "alt"],
                position_dim: np.arange(window) - centre,
                "record": ("variant", ds["record"].values[where[:, 0]]),
                "offset": ("variant", where[:, 1]),
                "ref": ("variant", np.array([v.ref for v in variants], dtype=object)),
                "alt": ("variant", np.array([v.alt for v in variants], dtype=object))},
        attrs={"centre": centre})


def model_scores(model, ds, adapter, batch_size=64):
    """The raw outputs (*sample shape, F) of an N -> 1 `model` for every record of `ds`."""
    run = ModelCall(model)
    batches = GenomeBatches(adapter, ds, batch_size=batch_size)
    out = None
    for batch in batches.epoch(0):
        scores = run(batch)
        if scores.ndim != 2 or len(scores) != len(batch):
            raise ValueError(f"the model returned shape {scores.shape} for tokens of shape "
                             f"{batch.tokens.shape}; scoring needs an N -> 1 model, (B, F)")
        if out is None:
            out = np.empty((batches.n_samples, scores.shape[1]), np.float64)
        out[np.ravel_multi_index(tuple(batch.placement.starts.T), batches.shape)] = scores
    return out.reshape(*batches.shape, -1)


def variant_effects(model, sequences, variants, adapter, window, batch_size=64):
    """Scores of an N -> 1 `model` for the reference and alternate window of every variant and
    their difference: a Dataset on ``variant`` (and ``output`` when the model has several) with
    ``ref_score``, ``alt_score`` and ``difference`` = alt - ref."""
    windows = variant_windows(sequences, variants, window, adapter.position_dim, adapter.variable)
    scores = model_scores(model, windows, adapter, batch_size)  # (variant, allele, output)
    scores = xr.DataArray(scores, dims=("variant", "allele", "output"),
                          coords={"variant": windows["variant"], "allele": windows["allele"]})
    if scores.sizes["output"] == 1:
        scores = scores.isel(output=0, drop=True)
    ref, alt = scores.sel(allele="ref", drop=True), scores.sel(allele="alt", drop=True)
    return xr.Dataset({"ref_score": ref, "alt_score": alt, "difference": alt - ref},
                      attrs=windows.attrs)


def class_log_odds(scores, adapter, output):
    """(...,) the score that `output` names in model outputs `scores` (..., F): an output index,
    or a text label of the adapter's fitted classes, whose log-odds against the other classes
    (logit - logsumexp of the others) it then is."""
    if isinstance(output, (int, np.integer)) and not isinstance(output, bool):
        if not 0 <= output < scores.shape[-1]:
            raise IndexError(f"output={output} but the model has {scores.shape[-1]} outputs")
        return scores[..., output]
    classes = adapter.target_specs[0].classes if adapter.target_specs and \
        adapter.target_specs[0].kind == "classes" else ()
    if output not in classes:
        raise ValueError(f"output={output!r}; expected an output index (0 .. "
                         f"{scores.shape[-1] - 1}) or one of the fitted classes {list(classes)}")
    c = classes.index(output)
    others = np.delete(scores, c, axis=-1)
    top = others.max(axis=-1)
    return scores[..., c] - top - np.log(np.exp(others - top[..., None]).sum(axis=-1))


def mutagenesis(model, sequence, adapter, output=0, batch_size=64):
    """In-silico mutagenesis of one sequence (a string or a one-record genome Dataset) by an
    N -> 1 `model`: a DataArray (position, base) of score(sequence with `base` at `position`) -
    score(sequence), 0 at the reference base, on the record's positions (with its
    ``genomic_position``), attrs ``record`` and ``reference_score``. `output` picks the score:
    a model output's index, or a class label of the adapter's fitted target (the class's
    log-odds; see :func:`class_log_odds`)."""
    ds = as_genome_dataset(sequence, adapter.position_dim, adapter.variable)
    if ds.sizes["record"] != 1:
        raise ValueError(f"mutagenesis takes one sequence; got {ds.sizes['record']} records: "
                         "select one with ds.isel(record=[i])")
    length = int(record_lengths(ds, adapter.variable)[0])
    codes = ds[adapter.variable].transpose("record", adapter.position_dim).values[0, :length]
    mutants = np.repeat(codes[None, None, :], length, axis=0).repeat(4, axis=1)  # (L, 4, L)
    positions = np.arange(length)
    soft = np.where(codes >= SOFT, SOFT, 0).astype(np.uint8)
    for b in range(4):
        mutants[positions, b, positions] = b + soft
    reference_score = float(class_log_odds(model_scores(model, ds, adapter)[0], adapter,
                                           output))
    flat = mutants.reshape(4 * length, length)
    scores = model_scores(model, genome_dataset(flat, [f"m{i}" for i in range(len(flat))],
                                                [length] * len(flat), None, adapter.position_dim,
                                                adapter.variable), adapter, batch_size)
    effect = class_log_odds(scores, adapter, output).reshape(length, 4) - reference_score
    is_base = codes % SOFT < N_CODE  # at an ambiguous reference every base is a change
    effect[positions[is_base], (codes % SOFT)[is_base]] = 0.0
    position = ds[adapter.position_dim].values[:length]
    return xr.DataArray(
        effect, dims=(adapter.position_dim, "base"),
        coords={adapter.position_dim: position, "base": list("ACGT"),
                "genomic_position": (adapter.position_dim,
                                     ds["genomic_position"].values[0, :length]
                                     if "genomic_position" in ds.coords else position)},
        name="mutation_effect",
        attrs={"record": str(ds["record"].values[0]), "reference_score": reference_score})
