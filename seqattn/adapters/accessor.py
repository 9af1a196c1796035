"""The ``ds.seqattn`` accessor: the common calls, spelled from the Dataset. It holds no state and
no logic of its own (xarray's guidance for accessors); each method forwards to the function
documented there."""
import xarray as xr

from ..data.batching import BatchIterator
from .predict import predict


@xr.register_dataset_accessor("seqattn")
class SeqattnAccessor:
    def __init__(self, ds):
        self._ds = ds

    def encode(self, adapter):
        """``adapter.encode(ds)``: all samples as one Batch."""
        return adapter.encode(self._ds)

    def batches(self, adapter, **options):
        """``BatchIterator(ds, adapter, **options)``: lazy batches."""
        return BatchIterator(self._ds, adapter, **options)

    def predict(self, model, adapter, **options):
        """``predict(model, ds, adapter, **options)``: predictions on ds's coordinates; with a
        ForecastWindows as `adapter`, forecasts with a lead dim on valid times."""
        return predict(model, self._ds, adapter, **options)
