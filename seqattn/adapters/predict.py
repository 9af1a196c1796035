"""predict: run a model over a whole Dataset and get its predictions back on the same coordinates,
for every adapter through the one call ``seqattn.predict(model, ds, adapter)`` (spelled
``ds.seqattn.predict(model, adapter)`` from the Dataset).

The model protocol is :mod:`seqattn.data.model_call`'s: ``model(tokens, key_padding_mask,
coords=coords)`` returning NumPy predictions; seqattn's models run in evaluation mode (their mode
is restored afterwards), plain callables and objects with a ``predict`` method work as well.
What comes back is the adapter's: each adapter's ``predict(model, ds, *, where=None,
batch_size=64, ...)`` documents its own options (a GridAdapter's windows, a ForecastWindows'
leads on valid times, a molecule's per-atom outputs).
"""
REMOVED = {"per_sample": "fit the adapter with the per-sample target: adapter.fit(ds, "
                         "targets='y', where=train); predict then gives one value per sample"}


def predict(model, ds, adapter, **options):
    """`model`'s predictions for the samples of `ds` as a Dataset on `ds`'s coordinates, in
    physical units: ``adapter.predict(model, ds, **options)`` (``where=``, ``batch_size=``
    and the adapter's own options)."""
    for name, replacement in REMOVED.items():
        if name in options:
            raise TypeError(f"predict(..., {name}=...) is gone: {replacement}")
    run = getattr(adapter, "predict", None)
    if not callable(run):
        raise TypeError(f"adapter is a {type(adapter).__name__}; expected a seqattn adapter "
                        "(GridAdapter, SignalAdapter, ForecastWindows, GenomeAdapter, "
                        "MoleculeAdapter, GraphAdapter) fitted on the training data")
    return run(model, ds, **options)
