"""GenomeAdapter: DNA as token sequences, and predictions back per record or per base.

The adapter reads the genome Dataset that the readers build (:mod:`seqattn.readers.sequences`:
``from_sequences`` for strings, ``open_fasta`` / ``from_faidx`` for FASTA files,
``from_dataarray`` for a DataArray of bases): variable ``sequence`` (record, position) of uint8
base codes, with each record's name, ``chrom``, ``start`` and per-base ``genomic_position``.
It follows the adapter protocol (:mod:`seqattn.data.protocol`)::

    ds = open_fasta("peaks.fa")                  # plus a variable "factor", one label per record
    adapter = GenomeAdapter(tokens="ids", k=6).fit(ds, targets="factor", where=train)
    model = build(adapter.model_config(task="classification", d_model=32))
    fit(model, CrossEntropyLoss(), AdamW(model), adapter.batches(ds, where=train, shuffle=True,
                                                                 reverse_complement=True))
    out = seqattn.predict(model, ds, adapter)    # factor, factor_probability on record

**Tokens** (``tokens``, ``k``, ``stride``): ``k`` consecutive bases every ``stride`` bases make a
token: ``k=1`` single bases, ``stride=1`` overlapping k-mers, ``stride=k`` non-overlapping ones (a
last k-mer running past the end is partial). Token ids are ``sum(base_j * 4 ** (k - 1 - j))``
(A, C, G, T = 0-3), so ``vocab_size = 4 ** k + 1``: id ``4 ** k`` is the *unknown* k-mer (one
holding an N or another IUPAC code, or a partial one). ``tokens="ids"`` gives (B, N) int64 ids
for an embedding; ``tokens="onehot"`` gives (B, N, 4 ** k) float one-hot rows (with
``ambiguous="token"`` one more column for the unknown k-mer).

Never a silent A: what an ambiguous base does is the ``ambiguous`` option: ``"mask"`` (default):
a token holding one is masked out in ``key_padding_mask`` (its one-hot row is all zeros);
``"token"``: it is the unknown token, which the model sees and learns; ``"error"``: a ValueError
naming the record and position. Soft-masked (lower-case, repeat) bases are read as their base
with ``soft_masked="upper"`` (default) or masked out with ``soft_masked="mask"``. Records shorter
than the longest are padded (``key_padding_mask`` True, ``valid`` False).

**Targets** (``fit(ds, targets=...)``): a variable on the sample dims (one per record: a label,
a binding score) or on the sample dims and the position dim (one per base, single-base tokens
only). Integer, bool and text labels are classes (classifier outputs are logits, predictions come
back as the label and ``<target>_probability`` on ``class``); floats are values, kept in their
units (no normalization). See :mod:`seqattn.adapters.genome_batches` for the batches' layout and
:mod:`seqattn.adapters.genome_decode` for what predictions look like.

**Variants** (:mod:`seqattn.adapters.genome_variants`): ``variant_windows``,
``variant_effects`` and ``mutagenesis`` score alleles and every single-base change with an N -> 1
model.
"""
import numpy as np
import pandas as pd
import xarray as xr

from ..data.checks import require_dims, require_variables
from ..data.model_call import ModelCall
from ..data.persistence import Persistable
from ..data.protocol import Adapter
from ..data.targets import class_indices, describe_targets
from ..readers.dna_codes import (COMPLEMENT, LETTERS, N_CODE, PAD, SOFT, as_codes, codes_of,
                                 letters_of, reverse_complement)
from ..readers.fasta import FastaRecord, from_faidx, open_fasta, read_fasta
from ..readers.sequences import (as_genome_dataset, from_dataarray, from_sequences,
                                 parse_region, to_strings)
from . import genome_batches
from .genome_batches import GenomeBatches, reversal_order
from .genome_decode import decode_outputs
from .genome_tokens import n_tokens, tokenize
from .genome_variants import Variant, mutagenesis, variant_effects, variant_windows

TOKENS = ("onehot", "ids")
AMBIGUOUS = ("mask", "token", "error")
SOFT_MASKED = ("upper", "mask")
TASKS = {"classification": "classes", "regression": "values"}
MAX_K = 8
DEFAULT_MAX_LEN = 512  # EncoderConfig's: the positional table of the models' configs

__all__ = ["AMBIGUOUS", "COMPLEMENT", "FastaRecord", "GenomeAdapter", "GenomeBatches",
           "LETTERS", "N_CODE", "PAD", "SOFT", "SOFT_MASKED", "TOKENS", "Variant", "as_codes",
           "as_genome_dataset", "codes_of", "from_dataarray", "from_faidx", "from_sequences",
           "letters_of", "mutagenesis", "open_fasta", "parse_region", "read_fasta",
           "reversal_order", "reverse_complement", "to_strings", "variant_effects",
           "variant_windows"]


class GenomeAdapter(Adapter, Persistable):
    """Genome Dataset <-> token batches, on the adapter protocol; see the module docstring.

    Parameters
    ----------
    tokens : {"onehot", "ids"}
        One-hot rows (B, N, ``in_features``) float, or ids (B, N) int64 for an embedding
        (``vocab_size``).
    k : int
        Bases per token, 1 to 8.
    stride : int
        Bases between the first bases of consecutive tokens, 1 (overlapping k-mers) to `k`.
    ambiguous : {"mask", "token", "error"}
        What a token holding N or another IUPAC code does: masked out, its own token, or an
        error naming the record and position.
    soft_masked : {"upper", "mask"}
        Lower-case bases read as their base, or masked out like ambiguous ones.
    variable : str
        The Dataset's variable of base codes (or letters).
    position_dim : str
        The dim along a record's bases; every other dim of `variable` is a sample dim.
    dtype : str
        The float dtype of one-hot tokens.

    Attributes
    ----------
    in_features, vocab_size : int
        The model's input size for one-hot tokens, or for ids.
    complement : numpy.ndarray
        The permutation of token features or ids that the reverse strand applies (for
        :class:`seqattn.models.StrandSymmetric`).
    """

    dataset_kind = "genome"
    readers = ("seqattn.readers.from_sequences(strings), open_fasta(path), "
               "from_faidx(path, regions) or from_dataarray(bases)")

    def __init__(self, *, tokens="onehot", k=1, stride=1, ambiguous="mask", soft_masked="upper",
                 variable="sequence", position_dim="position", dtype="float32"):
        if tokens not in TOKENS:
            raise ValueError(f"tokens={tokens!r}; expected one of {TOKENS}")
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 1 <= k <= MAX_K:
            raise ValueError(f"k={k!r}; expected a whole number of bases from 1 to {MAX_K}")
        if isinstance(stride, bool) or not isinstance(stride, (int, np.integer)) \
                or not 1 <= stride <= k:
            raise ValueError(f"stride={stride!r}; expected 1 (overlapping k-mers) up to k={k} "
                             "(non-overlapping)")
        if ambiguous not in AMBIGUOUS:
            raise ValueError(f"ambiguous={ambiguous!r}; expected one of {AMBIGUOUS}")
        if soft_masked not in SOFT_MASKED:
            raise ValueError(f"soft_masked={soft_masked!r}; expected one of {SOFT_MASKED}")
        self.tokens, self.k, self.stride = tokens, int(k), int(stride)
        self.ambiguous, self.soft_masked = ambiguous, soft_masked
        self.variable, self.position_dim = variable, position_dim
        self.dtype = np.dtype(dtype)
        self._fitted = False
        self.per_base = None  # whether the fitted target is per base (None: no target)
        self.max_tokens = 0  # tokens of the longest record fit saw

    # ---- sizes -----------------------------------------------------------------------------

    @property
    def fitted(self):
        return self._fitted

    @property
    def variables(self):
        return [self.variable]

    @property
    def token_dims(self):
        return (self.position_dim,)

    @property
    def unknown_id(self):
        return 4 ** self.k

    @property
    def vocab_size(self):
        """Ids 0 .. 4**k - 1 are k-mers, 4**k the unknown (or padding) k-mer."""
        return 4 ** self.k + 1

    @property
    def in_features(self):
        return 4 ** self.k + (self.ambiguous == "token")

    @property
    def complement(self):
        """int64 permutation: the id (or one-hot column) of each token's reverse complement."""
        ids = np.arange(4 ** self.k)
        # (4**k, k) digits, the first base first
        digits = (ids[:, None] // 4 ** np.arange(self.k - 1, -1, -1)) % 4
        rc = ((3 - digits[:, ::-1]) * 4 ** np.arange(self.k - 1, -1, -1)).sum(axis=1)
        size = self.vocab_size if self.tokens == "ids" else self.in_features
        return np.concatenate([rc, np.arange(4 ** self.k, size)]).astype(np.int64)

    def n_tokens(self, length):
        """Tokens of a sequence of `length` bases (a last k-mer may be partial)."""
        return int(n_tokens(length, self.k, self.stride))

    def read_codes(self, values, name=None):
        """uint8 base codes of an array of letters or codes, checked (`name(index)` says where
        an element is, for the error)."""
        return as_codes(values, name)

    def tokenize(self, codes, where):
        """The :class:`~seqattn.adapters.genome_tokens.Tokenized` tokens of base codes (B, L);
        `where(b, offset)` names a base for errors."""
        return tokenize(codes, self, where)

    # ---- checking ------------------------------------------------------------------------------

    def check(self, ds, call="check"):
        """Refuse what is not a genome Dataset this adapter reads, saying how to make one."""
        if not isinstance(ds, xr.Dataset):
            raise TypeError(f"{type(self).__name__}.{call} takes the {self.dataset_kind} "
                            f"xarray.Dataset, got a {type(ds).__name__}; build it with a "
                            f"reader: {self.readers}")
        require_variables(ds, self.variables)
        require_dims(ds, (self.position_dim,), "position")
        da = ds[self.variable]
        if self.position_dim not in da.dims:
            raise ValueError(f"variable {self.variable!r} lacks the position dim "
                             f"{self.position_dim!r}; it has dims {da.dims}")
        if da.dtype.kind not in "uiUSO":
            raise TypeError(f"variable {self.variable!r} has dtype {da.dtype}; expected uint8 "
                            "base codes or letters (see seqattn.readers.dna_codes)")

    def sample_dims(self, ds):
        """Dims of the sequence variable other than the position dim, in ds order."""
        self.check(ds)
        dims = ds[self.variable].dims
        return tuple(d for d in ds.dims if d in dims and d != self.position_dim)

    # ---- the protocol --------------------------------------------------------------------------

    def select(self, ds, where, name="where"):
        self.check(ds, "select")
        return super().select(ds, where, name)

    def fit(self, ds, *, targets=None, where=None):
        """Learn what the adapter needs from the records `where` selects; returns self.

        Parameters
        ----------
        ds : xarray.Dataset
            The Dataset a reader made.
        targets : str or xarray.DataArray, optional
            A variable of `ds` (or a DataArray on its dims) with one target per record or per
            base: its kind (values or classes) and classes are recorded.
        where : selection, optional
            The records to learn from (see :func:`seqattn.data.protocol.sample_selection`).
        """
        self.check(ds, "fit")
        return super().fit(ds, targets=targets, where=where)

    def _fit(self, ds, targets):
        self.check(ds, "fit")
        lengths = (ds[self.variable] != PAD).sum(self.position_dim) \
            if ds[self.variable].dtype.kind in "ui" else ds.sizes[self.position_dim]
        self.max_tokens = self.n_tokens(int(np.max(lengths)))
        self.target_specs, self.per_base = (), None
        if targets is not None:
            name, da = self._target_array(ds, targets)
            self.per_base = self.position_dim in da.dims
            self.target_specs = (describe_targets(self._labelled(ds, da), name),)
        self._fitted = True

    def _target_array(self, ds, targets):
        """(name, DataArray) of `targets`: a variable of `ds` or a DataArray on its dims."""
        if isinstance(targets, str):
            if targets not in ds.data_vars:
                raise ValueError(f"targets={targets!r} is not a variable of the dataset (it has "
                                 f"{sorted(map(str, ds.data_vars))})")
            name, da = targets, ds[targets]
        elif isinstance(targets, xr.DataArray):
            name, da = targets.name or "target", targets
        else:
            raise TypeError(f"targets is a {type(targets).__name__}; expected the name of a "
                            "variable of the dataset (one label or value per record, or per base) "
                            "or a DataArray on the records' dims")
        sample_dims = self.sample_dims(ds)
        allowed = (set(sample_dims), set(sample_dims) | {self.position_dim})
        if set(da.dims) not in allowed:
            raise ValueError(f"target {name!r} has dims {da.dims}; expected the sample dims "
                             f"{sample_dims} (one per record) or those and "
                             f"{self.position_dim!r} (one per base)")
        for d in da.dims:
            if da.sizes[d] != ds.sizes[d]:
                raise ValueError(f"target {name!r} has {da.sizes[d]} entries along {d!r}, the "
                                 f"sequences {ds.sizes[d]}")
        if self.position_dim in da.dims and (self.k != 1 or self.stride != 1):
            raise ValueError(f"target {name!r} is per base, which needs single-base tokens "
                             f"(k=1, stride=1; this adapter has k={self.k}, "
                             f"stride={self.stride}); with k-mers give one target per record")
        return name, da

    def _labelled(self, ds, da):
        """The target's entries on real bases only (per base), so padding adds no label."""
        if self.position_dim not in da.dims or ds[self.variable].dtype.kind not in "ui":
            return da
        real = (ds[self.variable] != PAD).transpose(*da.dims).values
        return xr.DataArray(da.values[real], dims="entry", attrs=da.attrs)

    def _resolved_targets(self, ds, targets):
        """(spec, per_base, values with the sample dims first) for GenomeBatches, or None."""
        if targets is None:
            if not self.target_specs or self.target_specs[0].name not in ds.data_vars:
                return None
            targets = self.target_specs[0].name
        name, da = self._target_array(ds, targets)
        spec = next((s for s in self.target_specs if s.name == name), None)
        if spec is None:
            fitted = [s.name for s in self.target_specs]
            raise ValueError(f"targets={name!r}, but the adapter was fitted with targets "
                             f"{fitted or 'none'}; fit it with targets={name!r} (fit records "
                             "the classes or values a model must predict)")
        per_base = self.position_dim in da.dims
        order = self.sample_dims(ds) + ((self.position_dim,) if per_base else ())
        values = np.asarray(da.transpose(*order).values)
        if spec.kind == "classes":  # a label fit never saw is an error now, not mid-epoch
            class_indices(spec, pd.unique(np.asarray(self._labelled(ds, da).values).ravel()))
        return spec, per_base, values

    def batches(self, ds, *, targets=None, where=None, batch_size=32, shuffle=False, seed=0,
                drop_last=False, reverse_complement=False, weights=None):
        """Batches of the records `where` selects (a :class:`GenomeBatches`).

        Parameters
        ----------
        ds : xarray.Dataset
            The genome Dataset.
        targets : str or xarray.DataArray, optional
            The target (default: the one given to ``fit``, when `ds` holds it).
        where : selection, optional
            The records to batch (see :func:`seqattn.data.protocol.sample_selection`).
        batch_size, shuffle, seed, drop_last
            As in :class:`seqattn.data.protocol.Batches`.
        reverse_complement : bool
            Put each record on the reverse strand with probability 1/2 (seeded per epoch and
            batch); per-base targets go with their bases.
        weights : str, optional
            A variable of `ds` with a weight per record (finite, >= 0; for measurements with
            errors dy, ``1 / dy**2``), given to the batches as ``coords["weight"]`` for
            :class:`seqattn.train.weighted_mse.WeightedMSELoss`.
        """
        self.require_fitted("batches")
        self.check(ds, "batches")
        ds = self.select(ds, where)
        return GenomeBatches(self, ds, self._resolved_targets(ds, targets),
                             batch_size=batch_size, shuffle=shuffle, seed=seed,
                             drop_last=drop_last, reverse_complement=reverse_complement,
                             weights=None if weights is None else self._weights(ds, weights))

    def _weights(self, ds, name):
        """The weight per sample of variable `name`, checked."""
        sample_dims = self.sample_dims(ds)
        if not isinstance(name, str) or name not in ds.data_vars:
            raise ValueError(f"weights={name!r}; expected the name of a variable of the dataset "
                             f"with one weight per record ({sorted(map(str, ds.data_vars))})")
        if set(ds[name].dims) != set(sample_dims):
            raise ValueError(f"weights {name!r} have dims {ds[name].dims}; expected one weight "
                             f"per record, on {sample_dims}")
        values = np.asarray(ds[name].transpose(*sample_dims).values, np.float64)
        bad = ~np.isfinite(values) | (values < 0)
        if bad.any():
            index = tuple(int(i) for i in np.argwhere(bad)[0])
            label = ", ".join(f"{d} {ds[d].values[i]!r}" if d in ds.coords else f"{d} {i}"
                              for d, i in zip(sample_dims, index))
            raise ValueError(f"weights {name!r} are {values[index]} at {label}; expected finite "
                             "weights >= 0 (0 leaves a record out of the loss)")
        return values

    def encode(self, ds, *, where=None):
        """Every record `where` selects as one Batch (shorter records padded)."""
        self.check(ds, "encode")
        return super().encode(ds, where=where)

    def decode(self, batch, values):
        """`values` for `batch` as a Dataset on its records' coordinates.

        Parameters
        ----------
        batch : Batch
            A batch of this adapter.
        values : array
            (B, F) one output vector per record, or (B, N, F) per token (each base gets the
            mean of the unmasked tokens covering it); F = the number of classes for a class
            target, 1 for values.

        Returns
        -------
        xarray.Dataset
            See :mod:`seqattn.adapters.genome_decode`.
        """
        spec = self.target_specs[0] if self.target_specs else None
        return decode_outputs(self, batch.placement.template, batch.placement.starts,
                              batch.key_padding_mask, batch.valid, values, spec, self.per_base)

    def model_config(self, task=None, **options):
        """The config of the task model that reads these batches: a SequenceModelConfig for a
        target per record, a TokenModelConfig for one per base.

        Parameters
        ----------
        task : {"classification", "regression"}
            Must agree with the fitted target (classes or values).
        **options
            Other config fields (d_model, nhead, num_layers, positions, pooling, ...).
            ``max_len`` defaults to the longest record's tokens (at least 512).

        Returns
        -------
        SequenceModelConfig or TokenModelConfig
            ``vocab_size`` (ids) or ``in_features`` (one-hot) from the tokens,
            ``out_features`` the number of classes or 1.
        """
        from ..models import SequenceModelConfig, TokenModelConfig

        self.require_fitted("model_config")
        if task not in TASKS:
            raise ValueError(f"task={task!r}; expected one of {sorted(TASKS)}")
        if not self.target_specs:
            raise ValueError("model_config needs the target's kind and width: fit the adapter "
                             "with targets=<variable> (one per record or per base)")
        spec = self.target_specs[0]
        if TASKS[task] != spec.kind:
            raise ValueError(f"task={task!r}, but target {spec.name!r} holds {spec.kind} "
                             f"(task={next(t for t, k in TASKS.items() if k == spec.kind)!r})")
        sizes = {"vocab_size": self.vocab_size} if self.tokens == "ids" \
            else {"in_features": self.in_features}
        sizes["out_features"] = spec.n_classes if spec.kind == "classes" else 1
        for name, value in sizes.items():
            if name in options and options[name] != value:
                raise ValueError(f"{name}={options[name]!r}, but this adapter's batches need "
                                 f"{name}={value}; leave it out")
        config_class = TokenModelConfig if self.per_base else SequenceModelConfig
        defaults = {"max_len": max(DEFAULT_MAX_LEN, self.max_tokens + 1), **sizes}
        return config_class(**{**defaults, **options})

    def predict(self, model, ds, *, where=None, batch_size=64):
        """`model`'s predictions for the records `where` selects, as a Dataset on their
        coordinates (see :meth:`decode`); N -> 1 and N -> N models alike."""
        self.require_fitted("predict")
        self.check(ds, "predict")
        ds = self.select(ds, where)
        run = ModelCall(model)
        batches = GenomeBatches(self, ds, batch_size=batch_size)
        parts = []
        for batch in batches:
            values = run(batch)
            if values.ndim not in (2, 3) or values.shape[:min(values.ndim - 1, 2)] != \
                    batch.key_padding_mask.shape[:values.ndim - 1]:
                raise ValueError(f"the model returned shape {values.shape} for tokens of shape "
                                 f"{batch.tokens.shape}; expected (B, F) per record or (B, N, "
                                 "F) per token")
            parts.append((batch.placement.starts, batch.key_padding_mask, batch.valid, values))
        spec = self.target_specs[0] if self.target_specs else None
        starts, mask, valid, values = (np.concatenate(p) for p in zip(*parts))
        return decode_outputs(self, batches.template, starts, mask, valid, values, spec,
                              self.per_base)

    def reverse_complement(self, batch, which=None):
        """`batch` with the samples `which` (B,) bool (default all) on the reverse strand (see
        :func:`seqattn.adapters.genome_batches.reverse_complement`)."""
        per_base = batch.targets is not None and bool(self.per_base)
        return genome_batches.reverse_complement(self, batch, which, per_base)

    # ---- fitted state --------------------------------------------------------------------------

    def get_state(self):
        return {**super().get_state(), "per_base": self.per_base, "max_tokens": self.max_tokens}

    def set_state(self, state):
        super().set_state(state)
        self.per_base = state.get("per_base")
        self.max_tokens = int(state.get("max_tokens", 0))
        self._fitted = True
