"""GenomeAdapter over random DNA (hypothesis): records of 1 to 6 bases with N, other IUPAC codes
and soft-masked (lower-case) bases, in any record order; targets per record or per base of
every dtype (floats: values, with NaN patterns; integers: classes); every token, ambiguity and
soft-masking option. Either the targets decode to themselves on the records' coordinates (NaN
where no valid token covers them) and predictions land on the user's records and bases, or the
error names the target at fault - exactly when the case must be refused."""
import numpy as np
import pytest
import xarray as xr
from hypothesis import given, settings
from hypothesis import strategies as st

import seqattn
from seqattn.adapters import GenomeAdapter
from seqattn.readers import from_sequences
from seqattn.readers.dna_codes import N_CODE, PAD, SOFT
from property_inputs import DTYPES, NAN_PATTERNS, as_expected, assert_names, tolerance, values


@st.composite
def genomes(draw):
    n = draw(st.integers(1, 3))
    ds = from_sequences([draw(st.text("ACGTNRYacgtn", min_size=1, max_size=6)) for _ in range(n)])
    ds = ds.isel(record=list(draw(st.permutations(range(n)))))
    per_base = draw(st.booleans())
    dtype = draw(st.sampled_from(DTYPES))
    shape = (n, ds.sizes["position"]) if per_base else (n,)
    y = values(draw, shape, dtype, draw(st.sampled_from(NAN_PATTERNS)))
    ds["y"] = (("record", "position") if per_base else ("record",), y, {"units": "kcal/mol"})
    k = 1 if per_base else draw(st.integers(1, 2))
    options = {"tokens": draw(st.sampled_from(["onehot", "ids"])), "k": k,
               "stride": draw(st.integers(1, k)),
               "ambiguous": draw(st.sampled_from(["mask", "token"])),
               "soft_masked": draw(st.sampled_from(["upper", "mask"]))}
    return ds, options, per_base


def read_bases(codes, options):
    """Which bases a single-base token reads (the others are masked out)."""
    base = codes % SOFT
    read = (codes != PAD) & ((base < N_CODE) | (options["ambiguous"] == "token"))
    return read & ((codes < SOFT) | (codes == PAD) | (options["soft_masked"] == "upper"))


def refusals(ds, per_base):
    """The names an error must mention for this case (none: it must succeed)."""
    y = ds["y"].values
    real = ds["sequence"].values != PAD if per_base else np.ones(y.shape, bool)
    if y.dtype.kind == "f":
        return [] if np.isfinite(y[real]).any() else ["y"]
    return [] if len(np.unique(y[real])) > 1 else ["y"]  # a classifier needs two classes


def base_codes(tokens, key_padding_mask):
    """Per token, its id (0-3 a base, 4 the unknown one): an N -> N model that reads its input."""
    ids = tokens if tokens.ndim == 2 else tokens.argmax(axis=-1)
    return np.where(key_padding_mask, 0, ids).astype(np.float64)[..., None]


@settings(max_examples=100, deadline=None)
@given(genomes())
def test_genome_round_trip_or_named_error(case):
    ds, options, per_base = case
    before = ds.copy(deep=True)
    adapter = GenomeAdapter(**options, dtype="float64")
    names = refusals(ds, per_base)
    if names:
        with pytest.raises((ValueError, TypeError)) as refused:
            adapter.fit(ds, targets="y")
        assert_names(refused.value, *names)
        return
    adapter.fit(ds, targets="y")
    batch = next(iter(adapter.batches(ds, batch_size=None)))
    codes = ds["sequence"].values
    seen = read_bases(codes, options) if per_base else ~batch.key_padding_mask.all(axis=1)
    if ds["y"].dtype.kind == "f":
        targets = np.where(batch.target_valid, batch.targets, np.nan).reshape(len(batch), -1)
        decoded = adapter.decode(batch, targets[..., None] if per_base else targets)["y"]
        expected = np.where(seen, as_expected(ds["y"].values), np.nan)
        np.testing.assert_allclose(decoded.values, expected, rtol=tolerance(ds["y"].dtype))
    else:
        classes = list(adapter.target_specs[0].classes)
        logits = 10.0 * (np.asarray(classes) == ds["y"].values[..., None])
        decoded = adapter.decode(batch, logits)["y"]
        labels = ds["y"].values.tolist()
        if per_base:
            labels = [[v if r else None for v, r in zip(*row)] for row in zip(labels, seen)]
        else:
            labels = [v if r else None for v, r in zip(labels, seen)]
        assert decoded.values.tolist() == labels
    assert decoded["record"].values.tolist() == ds["record"].values.tolist()
    if per_base and ds["y"].dtype.kind == "f":
        # predictions per base: the base each token read (N and the other ambiguous codes
        # are one unknown token), NaN where none was read
        predicted = seqattn.predict(base_codes, ds, adapter)
        read = np.minimum(codes % SOFT, N_CODE)
        np.testing.assert_array_equal(predicted["y"].values, np.where(seen, read, np.nan))
    elif not per_base:
        # a record without a token read predicts nothing, whatever the model says
        width = 1 if ds["y"].dtype.kind == "f" else len(classes)
        predicted = seqattn.predict(lambda tokens, mask: np.ones((len(tokens), width)), ds,
                                    adapter)
        if width == 1:
            np.testing.assert_array_equal(predicted["y"].values, np.where(seen, 1.0, np.nan))
        else:
            assert [v is None for v in predicted["y"].values.tolist()] == (~seen).tolist()
    else:
        predicted = decoded
    assert predicted["record"].values.tolist() == ds["record"].values.tolist()
    xr.testing.assert_identical(ds, before)
