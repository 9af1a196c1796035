"""The ``ds.seqattn`` accessor: the common calls, spelled from the Dataset. It holds no state and
no logic of its own (xarray's guidance for accessors); each method forwards to the adapter's call
of the same name (:mod:`seqattn.data.protocol`)."""
import xarray as xr

from .predict import predict


@xr.register_dataset_accessor("seqattn")
class SeqattnAccessor:
    def __init__(self, ds):
        self._ds = ds

    def encode(self, adapter, **options):
        """``adapter.encode(ds, **options)``: the selected samples as one Batch."""
        return adapter.encode(self._ds, **options)

    def batches(self, adapter, **options):
        """``adapter.batches(ds, **options)``: lazy, seeded batches."""
        return adapter.batches(self._ds, **options)

    def predict(self, model, adapter, **options):
        """``seqattn.predict(model, ds, adapter, **options)``: predictions on ds's
        coordinates; with a ForecastWindows as `adapter`, forecasts with a lead dim on valid
        times."""
        return predict(model, self._ds, adapter, **options)
