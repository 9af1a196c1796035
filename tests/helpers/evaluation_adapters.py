"""Two small protocol adapters for the evaluation tests (the domain adapters are moving onto the
protocol): series with one target per sample, and hourly forecasts of one station per lead."""
import numpy as np
import xarray as xr

from seqattn.data.batch import Batch
from seqattn.data.protocol import Adapter, Batches
from seqattn.data.targets import class_indices, class_predictions, describe_targets
from seqattn.models import SequenceModelConfig, TokenModelConfig

HOUR = np.timedelta64(1, "h")


class _Collated(Batches):
    def __init__(self, n_samples, collate, **options):
        super().__init__(**options)
        self.n_samples, self.collate = n_samples, collate


class SeriesAdapter(Adapter):
    """`ds`: ``x`` (sample, step) inputs and a target on (sample,): values or class labels.
    Tokens are the steps (B, N, 1), standardized with the training samples' statistics."""

    def sample_dims(self, ds):
        return ("sample",)

    def check(self, ds):
        if "x" not in ds:
            raise ValueError("ds needs an input variable 'x' on (sample, step)")

    def _fit(self, ds, targets):
        self.check(ds)
        self.mean, self.std = float(ds.x.mean()), float(ds.x.std())
        self.spec = describe_targets(ds[targets], targets)
        if self.spec.kind == "values":
            self.target_mean, self.target_std = float(ds[targets].mean()), float(ds[targets].std())
        self.fitted = True

    def batches(self, ds, *, targets=None, where=None, batch_size=32, shuffle=False, seed=0,
                drop_last=False):
        self.require_fitted("batches")
        part = self.select(ds, where)
        x = (part.x.values - self.mean) / self.std
        y = part[self.spec.name].values
        if self.spec.kind == "values":
            y = ((y - self.target_mean) / self.target_std)[:, None]
        else:
            y = class_indices(self.spec, y)
        labels = part.sample.values

        def collate(rows):
            missing = np.isnan(x[rows])
            return Batch(tokens=np.where(missing, 0, x[rows])[..., None].astype(np.float32),
                         key_padding_mask=missing, valid=~missing[..., None],
                         coords={"position": np.broadcast_to(np.arange(x.shape[1], dtype=float),
                                                             missing.shape).copy()},
                         placement=labels[rows], targets=y[rows])
        return _Collated(len(labels), collate, batch_size=batch_size, shuffle=shuffle,
                         seed=seed, drop_last=drop_last)

    def decode(self, batch, values):
        coords = {"sample": batch.placement}
        if self.spec.kind == "classes":
            return xr.Dataset(class_predictions(self.spec, values, ("sample",), coords))
        y = np.asarray(values)[:, 0] * self.target_std + self.target_mean
        return xr.Dataset({self.spec.name: ("sample", y)}, coords=coords)

    def model_config(self, task="regression", **options):
        out = self.spec.n_classes if self.spec.kind == "classes" else 1
        return SequenceModelConfig(in_features=1, out_features=out, **options)


class StationForecastAdapter(Adapter):
    """`ds`: ``x`` (time,) hourly. A sample is (initial time t, lead): one token holding the
    ``history`` values up to t (oldest first), its target x at t + lead; coords ``time`` and
    ``lead`` in seconds. Decoding gives ``x`` on (lead, time) at valid times."""

    def __init__(self, history=3, leads=(1, 2, 3)):
        self.history, self.leads = history, tuple(leads)

    def sample_dims(self, ds):
        return ("time",)

    def check(self, ds):
        if "x" not in ds:
            raise ValueError("ds needs an hourly variable 'x' on (time,)")

    def _fit(self, ds, targets):
        self.mean, self.std = float(ds.x.mean()), float(ds.x.std())
        self.fitted = True

    def batches(self, ds, *, targets=None, where=None, batch_size=32, shuffle=False, seed=0,
                drop_last=False):
        self.require_fitted("batches")
        chosen = np.arange(ds.sizes["time"])
        if where is not None:
            chosen = np.arange(ds.sizes["time"])[self.select(ds.assign_coords(
                index=("time", chosen)), where).index.values]
        x = (ds.x.values - self.mean) / self.std
        size = len(x)
        samples = [(t, lead) for t in chosen for lead in self.leads
                   if t >= self.history - 1 and t + lead < size]
        seconds = (ds.time.values - np.datetime64("1970-01-01")) / np.timedelta64(1, "s")

        def collate(rows):
            picked = [samples[r] for r in rows]
            tokens = np.array([[x[t - self.history + 1:t + 1]] for t, _ in picked], np.float32)
            target = np.array([[[x[t + lead]]] for t, lead in picked], np.float32)
            return Batch(tokens=tokens, key_padding_mask=np.zeros((len(rows), 1), bool),
                         valid=np.ones((len(rows), 1, self.history), bool),
                         coords={"time": np.array([[seconds[t]] for t, _ in picked]),
                                 "lead": np.array([[lead * 3600.0] for _, lead in picked])},
                         placement=(np.array(picked), ds.time.values),
                         targets=target, target_valid=np.isfinite(target))
        return _Collated(len(samples), collate, batch_size=batch_size, shuffle=shuffle,
                         seed=seed, drop_last=drop_last)

    def decode(self, batch, values):
        picked, times = batch.placement
        out = np.full((len(self.leads), len(times)), np.nan)
        for (t, lead), value in zip(picked, np.asarray(values)[:, 0, 0]):
            out[self.leads.index(lead), t + lead] = value * self.std + self.mean
        return xr.Dataset({"x": (("lead", "time"), out)},
                          coords={"lead": [lead * HOUR for lead in self.leads], "time": times})

    def model_config(self, task="regression", **options):
        return TokenModelConfig(in_features=self.history, out_features=1, **options)
