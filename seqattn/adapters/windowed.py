"""What GridAdapter and SignalAdapter share: the adapter protocol (:mod:`seqattn.data.protocol`)
over samples cut from a Dataset by :class:`~seqattn.data.batching.BatchIterator`.

Without targets a model reads the tokens and predicts the adapter's variables in their token
layout (N -> N: a value for every cell or step); targets that are input variables make it
predict just those per token (their value features, normalized like the inputs); ``fit(ds,
targets="y")`` with a variable on the sample dims (a storm's class, a speaker's name, a day's
mean) makes the model N -> 1, one output per sample (:mod:`seqattn.data.sample_targets`).
"""
import dataclasses

import numpy as np
import xarray as xr

from ..data.batching import BatchIterator
from ..data.model_call import ModelCall
from ..data.normalize import Normalizer
from ..data.persistence import Persistable
from ..data.protocol import Adapter, check_batch_size
from ..data.sample_targets import (SamplePutBack, check_sample_specs, out_features,
                                   per_sample_values)
from ..data.targets import describe_targets

TASKS = ("regression", "classification")
IDENTITY = Normalizer(xr.Dataset())  # the statistics of an adapter fitted with normalize=False


def removed_arguments(cls, removed):
    """The constructor arguments this release removed: an error naming their replacement."""
    if "normalizer" in removed:
        raise TypeError(f"{cls.__name__}(normalizer=...) is gone: the statistics come from "
                        f"fit(ds, where=train); a saved {cls.__name__} brings its own back "
                        "through seqattn.load (or adapter.set_state(state))")
    if removed:
        raise TypeError(f"{cls.__name__}() got unexpected keyword arguments {sorted(removed)}")


def as_names(targets):
    if targets is None:
        return []
    names = [targets] if isinstance(targets, str) else list(targets)
    if not names or not all(isinstance(n, str) for n in names):
        raise TypeError(f"targets={targets!r}; expected a variable name or a list of them")
    return names


class WindowedAdapter(Adapter, Persistable):
    """The protocol's calls for adapters whose samples are windows of a Dataset. A subclass
    gives ``token_dims``, ``channel_dims``, ``check``, ``_fit_inputs(ds)`` (the input
    statistics), ``token_width()`` (features per token), ``value_width()`` (value features per
    token, the N -> N outputs), ``encode_samples``, ``decode_samples`` and ``put_back``."""

    @property
    def fitted(self):
        return self.normalizer is not None

    def select(self, ds, where, name="where"):
        """`ds` (checked: its variables and dims) restricted to the samples `where` selects."""
        self.check(ds)
        return super().select(ds, where, name)

    def _fit(self, ds, targets):
        names = as_names(targets)
        self.target_specs = ()
        self._fit_inputs(ds)
        specs = tuple(describe_targets(ds[name], name) for name in self._require_targets(
            ds, names))
        if any(name in self.variables for name in names):
            self.target_specs = self._token_specs(specs)
            return
        if specs:
            check_sample_specs(specs)
            values = [s.name for s in specs if s.kind == "values"]
            if values and self.normalize:
                stats = Normalizer.fit(_finite(ds[values]), values, ()).stats
                self.normalizer = Normalizer(xr.merge([self.normalizer.stats, stats]))
        self.target_specs = specs

    def _require_targets(self, ds, names):
        for name in names:
            if name not in ds.data_vars:
                raise ValueError(f"targets={name!r} is not a variable of the dataset (it has "
                                 f"{sorted(map(str, ds.data_vars))})")
        return names

    def _token_specs(self, specs):
        """Targets per token: input variables, predicted in their own token layout."""
        names = [s.name for s in specs]
        others = [n for n in names if n not in self.variables]
        if others:
            raise ValueError(f"targets {names} mix input variables (predicted per token) with "
                             f"{others} (not inputs: one per sample); fit one or the other")
        if getattr(self, "variables_as", "channels") != "channels":
            raise ValueError(f"targets {names} per token need variables_as='channels' (each "
                             "variable's features side by side in every token)")
        classes = [s.name for s in specs if s.kind != "values"]
        if classes:
            raise ValueError(f"targets {classes} per token are classes; this adapter predicts "
                             "values per token (classes per sample: a variable on the sample "
                             "dims)")
        return tuple(specs)

    @property
    def token_targets(self):
        """The fitted targets' names when they are per token (input variables), else []."""
        names = [s.name for s in self.target_specs]
        return names if names and names[0] in self.variables else []

    def with_token_targets(self, batch, names):
        """`batch` carrying the value features of input variables `names` as its targets
        (B, N, width), 0 where missing and False there in ``target_valid``."""
        starts = np.cumsum([0] + [self.value_widths[v] for v in self.variables])
        columns = np.concatenate([np.arange(starts[i], starts[i + 1]) for i in
                                  (self.variables.index(n) for n in names)])
        return dataclasses.replace(batch, targets=batch.values[..., columns],
                                   target_valid=batch.valid[..., columns])

    def batches(self, ds, *, targets=None, where=None, batch_size=32, shuffle=False, seed=0,
                drop_last=False, input_dims=None, input_overlap=None, batch_dims=None):
        """The samples `where` selects as a :class:`BatchIterator` of `batch_size` (None: all
        at once), in an order drawn from (`seed`, epoch) with `shuffle`; `targets` (default
        those given to fit) ride along as ``batch.targets``. `input_dims` / `input_overlap`
        cut samples into windows along token dims, as xbatcher's do.

        Returns
        -------
        BatchIterator
            A :class:`~seqattn.data.protocol.Batches`: ``epoch(e)`` replays epoch e.
        """
        self.require_fitted("batches")
        names = as_names(targets) or [s.name for s in self.target_specs]
        known = {s.name for s in self.target_specs}
        unseen = [n for n in names if n not in known]
        if unseen:
            raise ValueError(f"targets {unseen} were not given to fit, which learns what they "
                             f"are (values or classes); fit(ds, targets={unseen!r}) first")
        if names and input_dims and not self.token_targets:
            raise ValueError(f"targets {names} are one per sample, but input_dims={input_dims} "
                             "cuts samples into windows; drop input_dims")
        return BatchIterator(self.select(ds, where), self, input_dims=input_dims,
                             input_overlap=input_overlap, batch_dims=batch_dims,
                             batch_size=batch_size, shuffle=shuffle, seed=seed,
                             drop_last=drop_last, targets=names or None)

    def decode(self, batch, values=None, *, variables=None, mask_missing=True):
        """Values back on the batch's source coordinates, in physical units, as a Dataset.

        Parameters
        ----------
        batch : Batch
            What ``encode`` or ``batches`` made.
        values : array, optional
            (B, T) or (B, C): a model's outputs per sample for the fitted targets (values, or
            class logits: then the target's labels and ``<target>_probability`` on ``class``);
            (B, N, F): outputs in the token layout of `variables` (default all the adapter's),
            NaN where the input was missing when `mask_missing`. None: the batch's own inputs.
        """
        if values is not None and np.ndim(values) == 2:
            put_back = self.sample_put_back(batch.placement.template)
            put_back.add(batch, values)
            return put_back.result()
        if values is not None and variables is None and self.token_targets:
            variables = self.token_targets
        return self.token_decode(batch, values, variables, mask_missing)

    def sample_put_back(self, template):
        if not self.target_specs:
            raise ValueError("values of shape (B, F) are one output per sample, but this "
                             f"{type(self).__name__} was fitted without targets; fit(ds, "
                             "targets=...) with the variable the model predicts per sample")
        return SamplePutBack(template, self.template_sample_dims(template), self.target_specs,
                             self.normalizer)

    def template_sample_dims(self, template):
        """The sample dims of a source (its Template), in its order."""
        used = {d for dims in template.var_dims.values() for d in dims}
        role = set(self.token_dims) | set(self.channel_dims)
        return tuple(d for d in template.dim_sizes if d in used and d not in role)

    def model_config(self, task="regression", **options):
        """The task model's config for these batches, sizes from the fitted adapter.

        Parameters
        ----------
        task : {"regression", "classification"}
            What the targets are (fit saw them); without targets "regression" of the inputs'
            values per token.
        **options
            The config's other fields (d_model, nhead, coordinates=["latlon"], pooling, ...).

        Returns
        -------
        TokenModelConfig or SequenceModelConfig
            N -> N (no targets: ``out_features`` = value features per token) or N -> 1 (targets
            per sample: one output per target, or one logit per class).
        """
        from ..models import SequenceModelConfig, TokenModelConfig

        self.require_fitted("model_config")
        if task not in TASKS:
            raise ValueError(f"task={task!r}; expected one of {TASKS}")
        for name in ("in_features", "out_features"):
            if name in options:
                raise TypeError(f"model_config infers {name} from the fitted adapter; drop "
                                f"{name}={options[name]!r}")
        specs = self.target_specs
        if self.token_targets:
            if task != "regression":
                raise ValueError(f"task={task!r}, but targets {self.token_targets} per token are "
                                 "values; use task='regression'")
            return TokenModelConfig(in_features=self.token_width(), out_features=sum(
                self.value_widths[v] for v in self.token_targets), **options)
        if not specs:
            if task != "regression":
                raise ValueError(f"task={task!r} needs class targets; fit(ds, targets=...) with "
                                 "the labels")
            return TokenModelConfig(in_features=self.token_width(),
                                    out_features=self.value_width(), **options)
        kind = "classes" if task == "classification" else "values"
        if specs[0].kind != kind:
            raise ValueError(f"task={task!r} but target {specs[0].name!r} holds "
                             f"{specs[0].kind}; use task="
                             f"{'classification' if specs[0].kind == 'classes' else 'regression'!r}")
        return SequenceModelConfig(in_features=self.token_width(),
                                   out_features=out_features(specs), **options)

    def predict(self, model, ds, *, where=None, batch_size=64, input_dims=None,
                input_overlap=None, variables=None, mask_missing=True, store=None):
        """`model`'s predictions for the samples `where` selects, on `ds`'s coordinates.

        Fitted with targets, one prediction per sample (values in physical units, or labels
        and probabilities); without, the adapter's variables (or `variables`) per cell or step,
        NaN where the input was missing when `mask_missing`, windows of `input_dims` overlapping
        by `input_overlap` blended. Lazy and chunk-parallel on dask data (per token); with
        `store` written to zarr and opened from there.

        Returns
        -------
        xarray.Dataset
        """
        from .windowed_predict import predict_per_sample, predict_per_token

        self.require_fitted("predict")
        batch_size = check_batch_size(batch_size)
        run = ModelCall(model)
        check_model_reads(model, self)
        ds = self.select(ds, where)
        if self.token_targets:
            variables = variables or self.token_targets
        if self.target_specs and not self.token_targets:
            if input_dims or variables:
                raise ValueError("a model fitted on targets per sample predicts them per whole "
                                 "sample; drop input_dims and variables")
            result = predict_per_sample(run, ds, self, batch_size)
        else:
            result = predict_per_token(run, ds, self, input_dims=input_dims,
                                       input_overlap=input_overlap, batch_size=batch_size,
                                       variables=list(variables or self.variables),
                                       mask_missing=mask_missing)
        if store is None:
            return result
        result.to_zarr(store, mode="w")
        return xr.open_zarr(store)


def check_model_reads(model, adapter):
    """A seqattn model whose config says it reads other tokens than `adapter` makes: name the
    likely cause (a model trained through ForecastWindows, whose tokens hold a history)."""
    config = getattr(model, "config", None)
    expected = getattr(config, "in_features", None)
    if expected is None:
        return
    width = adapter.token_width()
    forecast = "lead" in tuple(getattr(config, "coordinates", ()) or ())
    if expected != width or forecast:
        hint = ("it encodes lead times, so it was trained on ForecastWindows batches: pass the "
                "ForecastWindows, not its adapter: seqattn.predict(model, ds, windows)"
                if forecast else "a model trained on ForecastWindows batches predicts through "
                "them (seqattn.predict(model, ds, windows)); otherwise fit the model on this "
                "adapter's batches")
        raise ValueError(f"the model reads {expected} features per token but this "
                         f"{type(adapter).__name__} makes {width}; {hint}")


def _finite(ds):
    """`ds` with inf as missing (NaN), as encoding treats it; `ds` itself is not changed.
    Integer variables hold no inf and stay integers (a where would make small ones float32)."""
    return ds.assign({name: da.where(np.isfinite(da)) for name, da in ds.data_vars.items()
                      if da.dtype.kind in "fc"})
