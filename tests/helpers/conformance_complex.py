"""The protein-ligand complex adapter's row of the conformance table."""
from complex_helpers import make_complexes
from conformance import Row
from seqattn.adapters.complex import ComplexAdapter
from seqattn.train import MSELoss


def _dataset():
    return make_complexes(n=24, seed=1)


ROWS = [Row(name="complex", make_dataset=_dataset, make_adapter=ComplexAdapter,
            targets="affinity", train={"complex": slice(0, 12)}, test={"complex": slice(12, 24)},
            task="regression", loss=MSELoss, prediction_dims=("complex",),
            model_options=dict(d_model=16, nhead=2, num_layers=1, dim_feedforward=32, bins=8),
            bad_inputs=[(lambda a, ds: a.batches(ds.drop_vars("pocket_xyz")), ValueError,
                         "pocket_xyz"),
                        (lambda a, ds: a.batches(ds, targets="vina"), ValueError, "affinity")])]
