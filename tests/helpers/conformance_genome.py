"""The genome's row of the conformance table: does a record hold the motif GATA (integer class
labels, N -> 1, overlapping 3-mer ids)."""
import numpy as np

from conformance import Row
from seqattn.adapters import GenomeAdapter
from seqattn.readers import from_sequences
from seqattn.train import CrossEntropyLoss

SIZES = dict(d_model=16, nhead=2, num_layers=1, dim_feedforward=16)


def make_dataset():
    """28 records, the motif planted in every other one; the 16 training records are 12 to 16
    bases long, the others up to 30 (so a fit on all of them sees longer records)."""
    rng = np.random.default_rng(2)
    sequences, labels = {}, []
    for i in range(28):
        length = int(rng.integers(12, 17) if i < 16 else rng.integers(20, 31))
        bases = list(rng.choice(list("ACT"), length))  # no G: GATA only where planted
        if i % 2:
            at = int(rng.integers(0, length - 4))
            bases[at: at + 4] = "GATA"
        sequences[f"chr2:{100 * i}-{100 * i + length}"] = "".join(bases)
        labels.append(i % 2)
    ds = from_sequences(sequences)
    ds["motif"] = ("record", np.array(labels, np.int64), {"long_name": "holds GATA"})
    return ds


ROWS = [Row(
    name="genome",
    make_dataset=make_dataset,
    make_adapter=lambda: GenomeAdapter(tokens="ids", k=3),
    targets="motif",
    train={"record": slice(0, 16)},
    test={"record": slice(16, 24)},
    task="classification",
    loss=CrossEntropyLoss,
    prediction_dims=("record",),
    model_options=dict(SIZES, pooling="mean"),
    bad_inputs=[
        (lambda a, ds: a.encode(["ACGT", "GATA"]), TypeError, "from_sequences"),
        (lambda a, ds: a.predict(None, list(ds.record.values)), TypeError, "readers"),
        (lambda a, ds: a.batches(ds.assign(motif=ds.motif.where(ds.record != ds.record[0], 7))),
         ValueError, "label 7, which fit never saw"),
        (lambda a, ds: a.model_config(task="regression"), ValueError, "holds classes"),
        (lambda a, ds: a.batches(ds.assign(gc=ds.length * 0.5), targets="gc"), ValueError,
         "fitted with targets \\['motif'\\]"),
        (lambda a, ds: a.batches(ds, targets="sequence"), ValueError,
         "per base, which needs single-base tokens"),
    ],
)]
