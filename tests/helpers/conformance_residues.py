"""The residues' row of the conformance table: a protein's stability score (float values with
units, N -> 1, one-hot residues with the stop as a token)."""
import numpy as np

from conformance import Row
from seqattn.adapters import ResidueAdapter
from seqattn.readers.residues import from_residues
from seqattn.train import MSELoss

SIZES = dict(d_model=16, nhead=2, num_layers=1, dim_feedforward=16)
RESIDUES = np.array(list("ACDEFGHIKLMNPQRSTVWY"))


def make_dataset():
    """24 proteins; the score counts their hydrophobic residues (I, L, V, F) and a stop costs 2;
    the 14 training proteins are 8 to 12 residues long, the others up to 20."""
    rng = np.random.default_rng(3)
    sequences = {}
    for i in range(24):
        length = int(rng.integers(8, 13) if i < 14 else rng.integers(14, 21))
        residues = rng.choice(RESIDUES, length)
        if i % 5 == 4:
            residues[-1] = "*"
        sequences[f"p{i:02d}"] = "".join(residues)
    ds = from_residues(sequences)
    score = [sum(r in "ILVF" for r in s) - 2.0 * s.endswith("*") for s in sequences.values()]
    ds["stability"] = ("record", np.array(score, np.float64), {"units": "kcal/mol"})
    return ds


ROWS = [Row(
    name="residues",
    make_dataset=make_dataset,
    make_adapter=lambda: ResidueAdapter(alphabet="protein"),
    targets="stability",
    train={"record": slice(0, 14)},
    test={"record": slice(14, 24)},
    task="regression",
    loss=MSELoss,
    prediction_dims=("record",),
    model_options=dict(SIZES, pooling="mean"),
    bad_inputs=[
        (lambda a, ds: a.encode(["MKV"]), TypeError, "from_residues"),
        (lambda a, ds: a.batches(ds, reverse_complement=True), ValueError,
         "no reverse strand"),
        (lambda a, ds: a.model_config(task="classification"), ValueError, "holds values"),
        (lambda a, ds: a.encode(ds.assign_attrs(alphabet="RNA")), ValueError,
         "pass alphabet='RNA'"),
    ],
)]
