"""GenomeAdapter: DNA as token sequences, and per-base results back on genomic positions.

**Sequences as a Dataset.** Sequences of any source become one Dataset that the library's path
(:class:`BatchIterator`, :func:`predict`, ``fit``) reads like any other:

* variable ``sequence`` (record, position) uint8 base codes: 0-3 = A, C, G, T, 4 = N, 5-14 =
  the other IUPAC codes R Y S W K M B D H V, +16 = soft-masked (lower case), 255 = no base
  (the end of a record shorter than the longest one);
* coords ``record`` (names: the first word of a FASTA header), ``position`` (0 .. L-1, the
  offset in the record), per record ``chrom``, ``start``, ``strand``, ``length``, and per base
  ``genomic_position`` = start + position (NaN where unknown or past the record's end).

A header ``chrom:start-end`` (as ``bedtools getfasta`` writes, 0-based half-open, optionally
with a ``(+)``/``(-)`` strand; or 1-based inclusive as ``samtools faidx`` writes, told apart by
the record's length) gives ``chrom``, ``start`` and ``strand``; other records have chrom ``""``
and start NaN. Build one with :func:`from_sequences` (strings), :func:`open_fasta` (a FASTA
file streamed line by line, gzip detected by its magic bytes; :func:`read_fasta` yields the
records), :func:`from_faidx` (regions of an indexed FASTA through pyfaidx, an optional
dependency) or :func:`from_dataarray` (a DataArray of bases, as letters or as the codes above).

**Tokens** (``GenomeAdapter(tokens=..., k=..., stride=...)``): ``k`` consecutive bases every
``stride`` bases make a token: ``k=1`` single bases, ``stride=1`` overlapping k-mers, ``stride=k``
non-overlapping ones (a last k-mer running past the end is partial). Token ids are
``sum(base_j * 4 ** (k - 1 - j))`` (A, C, G, T = 0-3), so ``vocab_size = 4 ** k + 1``: id
``4 ** k`` is the *unknown* k-mer (one holding an N or another IUPAC code, or a partial one).
``tokens="ids"`` gives (B, N) int64 ids for an embedding; ``tokens="onehot"`` gives (B, N, 4 ** k)
float one-hot rows (with ``ambiguous="token"`` one more column for the unknown k-mer).

Never a silent A: what an ambiguous base does is the ``ambiguous`` option:

* ``"mask"`` (default): a token holding one is masked out in ``key_padding_mask`` (attention
  ignores it; its one-hot row is all zeros);
* ``"token"``: it is the unknown token, which the model sees and learns;
* ``"error"``: a ValueError naming the record and position.

Soft-masked (lower-case, repeat) bases are read as their base with ``soft_masked="upper"``
(default) or masked out like ambiguous ones with ``soft_masked="mask"``. Records shorter than the
longest are padded (``key_padding_mask`` True, ``valid`` False).

**Batches.** ``valid`` (B, N, k) says which of a token's k bases exist (False past a record's end),
``coords["position"]`` (B, N) is the offset of each token's first base (NaN for padding) and
``coords["record"]`` the record's index. :meth:`GenomeAdapter.batches` gives training batches
with targets (per record, or per base for single-base tokens) and reverse-complement
augmentation; :meth:`GenomeAdapter.reverse_complement` flips a batch.

**Decoding.** Per-token predictions go back per base: a base gets the mean of the tokens that
cover it (an overlapping k-mer model's outputs are spread over its k bases), on the record's
positions, with its name and genomic coordinates (:meth:`GenomeAdapter.decode`,
:func:`seqattn.adapters.predict`).

**Variants.** :func:`variant_windows` cuts a window around each variant with the reference and
the alternate allele (SNVs and short indels) starting at the centre base; :func:`variant_effects`
scores both with an N -> 1 model and their difference. :func:`mutagenesis` scores every
alternative base at every position of a sequence as a (position, base) DataArray.
"""
import gzip
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import xarray as xr

from ..data.batch import Batch
from ..data.batching import BatchIterator
from ..data.checks import require_dims, require_variables
from ..data.coords import canonical_names
from ..data.model_call import ModelCall
from ..data.persistence import Persistable
from ..data.stitch import PutBack

LETTERS = "ACGTNRYSWKMBDHV"  # code = index; codes >= 4 are ambiguous
N_CODE = 4
SOFT = 16  # added to the code of a lower-case (soft-masked) base
PAD = 255  # no base: past the end of a record
COMPLEMENT = dict(zip("ACGTNRYSWKMBDHV", "TGCANYRSWMKVHDB"))
TOKENS = ("onehot", "ids")
AMBIGUOUS = ("mask", "token", "error")
SOFT_MASKED = ("upper", "mask")
MAX_K = 8

_CODE_OF_BYTE = np.full(256, PAD, np.uint8)  # PAD here marks "not a base letter"
for _code, _letter in enumerate(LETTERS):
    _CODE_OF_BYTE[ord(_letter)] = _code
    _CODE_OF_BYTE[ord(_letter.lower())] = _code + SOFT
_VALID_CODE = np.zeros(256, bool)
_VALID_CODE[: len(LETTERS)] = _VALID_CODE[SOFT: SOFT + len(LETTERS)] = _VALID_CODE[PAD] = True
_LETTER_OF_CODE = {c: l for c, l in enumerate(LETTERS)}
_LETTER_OF_CODE.update({c + SOFT: l.lower() for c, l in enumerate(LETTERS)})
_COMPLEMENT_CODE = np.arange(256, dtype=np.uint8)
for _letter, _other in COMPLEMENT.items():
    _a, _b = LETTERS.index(_letter), LETTERS.index(_other)
    _COMPLEMENT_CODE[_a], _COMPLEMENT_CODE[_a + SOFT] = _b, _b + SOFT
_REGION = re.compile(r"^(?P<chrom>[^:\s]+):(?P<start>[\d,]+)-(?P<end>[\d,]+)"
                     r"(\((?P<strand>[+-])\))?$")


def reverse_complement(sequence):
    """The reverse complement of a DNA string (IUPAC codes complemented, case kept)."""
    table = str.maketrans({**COMPLEMENT, **{k.lower(): v.lower() for k, v in COMPLEMENT.items()}})
    return sequence.translate(table)[::-1]


def codes_of(sequence, record="sequence"):
    """uint8 codes (L,) of a DNA string; an invalid character is a ValueError naming `record`
    and the 0-based position."""
    try:
        raw = np.frombuffer(sequence.encode("ascii"), np.uint8)
    except UnicodeEncodeError as e:
        _invalid(record, e.start, sequence[e.start])
    codes = _CODE_OF_BYTE[raw]
    bad = np.flatnonzero(codes == PAD)
    if bad.size:
        _invalid(record, int(bad[0]), sequence[bad[0]])
    return codes


def _invalid(record, position, character):
    raise ValueError(f"record {record!r}, position {position} (0-based): {character!r} is not a "
                     f"DNA base or IUPAC code (one of {' '.join(LETTERS)}, upper or lower case)")


def letters_of(codes):
    """The DNA string of uint8 codes (the inverse of :func:`codes_of`); padding is dropped."""
    return "".join(_LETTER_OF_CODE[int(c)] for c in np.asarray(codes) if c != PAD)


# ---- reading sequences ---------------------------------------------------------------------


@dataclass(frozen=True)
class FastaRecord:
    name: str  # the header's first word
    description: str  # the whole header line after ">"
    sequence: str


def _open_text(path):
    with open(path, "rb") as f:
        gzipped = f.read(2) == b"\x1f\x8b"
    return gzip.open(path, "rt", newline="") if gzipped else open(path, newline="")


def read_fasta(path):
    """Yield the :class:`FastaRecord` of a FASTA file (plain or gzip) one by one, streaming.
    Windows line ends and blank lines are accepted; a record with no sequence lines is yielded
    with an empty sequence (:func:`from_sequences` then says so)."""
    with _open_text(path) as f:
        header, lines = None, []
        for number, line in enumerate(f, 1):
            line = line.rstrip("\r\n")
            if line.startswith(">"):
                if header is not None:
                    yield _record(header, lines)
                header, lines = line[1:].strip(), []
            elif line.strip() and not line.startswith(";"):
                if header is None:
                    raise ValueError(f"{path}: line {number} holds sequence before the first "
                                     "'>' header; is this a FASTA file?")
                lines.append(line.strip())
        if header is not None:
            yield _record(header, lines)


def _record(header, lines):
    name = header.split()[0] if header.split() else ""
    return FastaRecord(name, header, "".join(lines))


def parse_region(name, length):
    """(chrom, start, strand) of a ``chrom:start-end`` name, start 0-based; None otherwise.
    ``end - start`` equal to `length` reads it as 0-based half-open, ``end - start + 1`` as
    1-based inclusive; any other length is an error naming the record."""
    match = _REGION.match(name)
    if match is None:
        return None
    start, end = (int(match[g].replace(",", "")) for g in ("start", "end"))
    if end - start == length:
        begin = start
    elif end - start + 1 == length:
        begin = start - 1
    else:
        raise ValueError(f"record {name!r} names a region of {end - start} bases (0-based) or "
                         f"{end - start + 1} (1-based) but holds {length} bases; fix the header "
                         "or rename the record")
    return match["chrom"], begin, match["strand"] or "."


def from_sequences(sequences, names=None, position_dim="position", variable="sequence"):
    """The genome Dataset (see the module docstring) of DNA strings.

    `sequences`: one string, a list of strings (named `names`, default ``seq0, seq1, ...``), a
    dict name -> string, or an iterable of :class:`FastaRecord` or (name, string) pairs. An empty
    sequence or a repeated name is a ValueError naming the record."""
    if isinstance(sequences, str):
        sequences = [sequences]
    if isinstance(sequences, dict):
        items = list(sequences.items())
    else:
        items = []
        for item in sequences:
            if isinstance(item, FastaRecord):
                items.append((item.name, item.sequence))
            elif isinstance(item, str):
                items.append((None, item))
            else:
                items.append(tuple(item))
        if names is not None:
            names = list(names)
            if len(names) != len(items):
                raise ValueError(f"names has {len(names)} entries for {len(items)} sequences")
            items = [(n, s) for n, (_, s) in zip(names, items)]
        items = [(f"seq{i}" if n is None else n, s) for i, (n, s) in enumerate(items)]
    if not items:
        raise ValueError("no sequences given: expected at least one DNA string")
    seen = set()
    for name, seq in items:
        if not isinstance(seq, str):
            raise TypeError(f"record {name!r}: expected a DNA string, got {type(seq).__name__}")
        if not seq:
            raise ValueError(f"record {name!r} is an empty sequence (position 0 holds no base); "
                             "drop it or give it bases")
        if name in seen:
            raise ValueError(f"record name {name!r} appears twice; names must be unique")
        seen.add(name)
    length = max(len(s) for _, s in items)
    codes = np.full((len(items), length), PAD, np.uint8)
    for i, (name, seq) in enumerate(items):
        codes[i, : len(seq)] = codes_of(seq, name)
    regions = [parse_region(name, len(seq)) for name, seq in items]
    return _dataset(codes, [n for n, _ in items], [len(s) for _, s in items], regions,
                    position_dim, variable)


def _dataset(codes, names, lengths, regions, position_dim, variable):
    lengths = np.asarray(lengths, np.int64)
    start = np.array([np.nan if r is None else r[1] for r in regions], np.float64)
    offsets = np.arange(codes.shape[1])
    genomic = start[:, None] + offsets
    genomic[offsets[None, :] >= lengths[:, None]] = np.nan
    return xr.Dataset(
        {variable: (("record", position_dim), codes)},
        coords={"record": np.array(names, dtype=object), position_dim: offsets,
                "chrom": ("record", np.array(["" if r is None else r[0] for r in regions],
                                             dtype=object)),
                "start": ("record", start),
                "strand": ("record", np.array(["." if r is None else r[2] for r in regions],
                                              dtype=object)),
                "length": ("record", lengths),
                "genomic_position": (("record", position_dim), genomic)})


def open_fasta(path, empty="error", **options):
    """The genome Dataset of a FASTA file (plain or gzip). `empty="skip"` drops records without
    bases (default: an error naming the record). `options` go to :func:`from_sequences`."""
    if empty not in ("error", "skip"):
        raise ValueError(f"empty={empty!r}; expected 'error' or 'skip'")
    records = read_fasta(path)
    if empty == "skip":
        records = (r for r in records if r.sequence)
    return from_sequences(list(records), **options)


def from_faidx(path, regions, **options):
    """The genome Dataset of `regions` ``[(chrom, start, end), ...]`` (0-based half-open) of an
    indexed FASTA, read with pyfaidx (``pip install seqattn[genome]``); records are named
    ``chrom:start-end``."""
    try:
        import pyfaidx
    except ImportError:
        raise ImportError("from_faidx needs pyfaidx: pip install pyfaidx (or seqattn[genome])") \
            from None
    fasta = pyfaidx.Fasta(str(path), sequence_always_upper=False, as_raw=True)
    records = {f"{chrom}:{start}-{end}": fasta[chrom][start:end] for chrom, start, end in regions}
    return from_sequences(records, **options)


def from_dataarray(da, position_dim="position", variable="sequence"):
    """The genome Dataset of a DataArray of bases along `position_dim`: single letters (str or
    bytes) or the uint8 codes of the module docstring. A 1-D array is one record named after the
    DataArray; its other coordinates are kept."""
    if not isinstance(da, xr.DataArray):
        raise TypeError(f"expected an xarray.DataArray of bases, got {type(da).__name__}")
    if position_dim not in da.dims:
        raise ValueError(f"the DataArray has dims {da.dims}, not the position dim "
                         f"{position_dim!r}; pass position_dim=")
    if da.ndim == 1:
        da = da.expand_dims(record=[da.name or "sequence"])
    codes = as_codes(da.values, _namer(da, position_dim))
    return da.copy(data=codes).rename(variable).to_dataset()


def _namer(da, position_dim):
    """f(index tuple) -> the record label and position of an element of `da`, for errors."""
    def name(index):
        labels = {d: (_plain(da[d].values[i]) if d in da.coords else i)
                  for d, i in zip(da.dims, index)}
        position = labels.pop(position_dim)
        return ", ".join([f"{d} {v!r}" for d, v in labels.items()] + [f"position {position}"])
    return name


def _plain(value):
    """A NumPy scalar as the Python value it holds (so messages read 's2', not np.str_('s2'))."""
    return value.item() if isinstance(value, np.generic) else value


def as_codes(values, name=None):
    """uint8 codes of an array of base letters (str/bytes) or of codes; an invalid element is a
    ValueError naming its record and position (`name(index)` says where an element is)."""
    values = np.asarray(values)
    if values.dtype.kind in "USO":
        text = values.astype(str)
        try:
            raw = text.astype("S1")
        except UnicodeEncodeError:  # a non-ASCII letter: find it below
            raw = np.char.encode(text, "ascii", "replace").astype("S1")
        codes = _CODE_OF_BYTE[raw.view(np.uint8).reshape(values.shape)]
        bad = (codes == PAD) | (np.char.str_len(text) != 1)
    elif values.dtype.kind in "ui":
        codes = values.astype(np.uint8)
        bad = (values < 0) | (values > 255) | ~_VALID_CODE[codes]
    else:
        raise TypeError(f"bases must be letters (str or bytes) or uint8 codes, got dtype "
                        f"{values.dtype}")
    if bad.any():
        index = tuple(int(i) for i in np.argwhere(bad)[0])
        where = name(index) if name else f"position {index[-1]}"
        raise ValueError(f"{where}: {_plain(values[index])!r} is not a DNA "
                         f"base or IUPAC code (letters {' '.join(LETTERS)} in either case, or "
                         f"uint8 codes 0-{len(LETTERS) - 1}, +{SOFT} soft-masked, {PAD} none)")
    return codes


def to_strings(ds, variable="sequence"):
    """record name -> DNA string of a genome Dataset (the inverse of :func:`from_sequences`)."""
    codes = ds[variable].transpose("record", ...).values
    return {str(name): letters_of(row) for name, row in zip(ds["record"].values, codes)}


def as_genome_dataset(sequences, position_dim="position", variable="sequence"):
    """A genome Dataset from a Dataset (returned as it is), a DataArray, a FASTA path (a
    :class:`pathlib.Path`) or what :func:`from_sequences` takes."""
    if isinstance(sequences, xr.Dataset):
        return sequences
    if isinstance(sequences, xr.DataArray):
        return from_dataarray(sequences, position_dim, variable)
    if isinstance(sequences, Path):
        return open_fasta(sequences, position_dim=position_dim, variable=variable)
    return from_sequences(sequences, position_dim=position_dim, variable=variable)


# ---- the adapter ---------------------------------------------------------------------------


class GenomeAdapter(Persistable):
    """Genome Dataset <-> token batches; see the module docstring.

    ``in_features`` (one-hot width) or ``vocab_size`` (ids) is what a model's config needs;
    ``complement`` is the permutation of token features or ids that the reverse strand applies
    (for :class:`seqattn.models.StrandSymmetric`)."""

    normalizer = None  # bases need no statistics

    def __init__(self, tokens="onehot", k=1, stride=1, ambiguous="mask", soft_masked="upper",
                 variable="sequence", position_dim="position", dtype="float32", normalizer=None):
        if tokens not in TOKENS:
            raise ValueError(f"tokens={tokens!r}; expected one of {TOKENS}")
        if not isinstance(k, (int, np.integer)) or not 1 <= k <= MAX_K:
            raise ValueError(f"k={k!r}; expected a whole number of bases from 1 to {MAX_K}")
        if not isinstance(stride, (int, np.integer)) or not 1 <= stride <= k:
            raise ValueError(f"stride={stride!r}; expected 1 (overlapping k-mers) up to k={k} "
                             "(non-overlapping)")
        if ambiguous not in AMBIGUOUS:
            raise ValueError(f"ambiguous={ambiguous!r}; expected one of {AMBIGUOUS}")
        if soft_masked not in SOFT_MASKED:
            raise ValueError(f"soft_masked={soft_masked!r}; expected one of {SOFT_MASKED}")
        if normalizer is not None:
            raise ValueError("GenomeAdapter takes no normalizer: bases need no statistics")
        self.tokens, self.k, self.stride = tokens, int(k), int(stride)
        self.ambiguous, self.soft_masked = ambiguous, soft_masked
        self.variable, self.position_dim = variable, position_dim
        self.dtype = np.dtype(dtype)

    def config(self):
        return {"tokens": self.tokens, "k": self.k, "stride": self.stride,
                "ambiguous": self.ambiguous, "soft_masked": self.soft_masked,
                "variable": self.variable, "position_dim": self.position_dim,
                "dtype": self.dtype.name}

    @property
    def variables(self):
        return [self.variable]

    @property
    def token_dims(self):
        return (self.position_dim,)

    @property
    def channel_dims(self):
        return ()

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
        return int(self._n_tokens(np.asarray(length)))

    def _n_tokens(self, lengths):
        return 1 + -(-np.maximum(lengths - self.k, 0) // self.stride)

    # ---- checking ------------------------------------------------------------------------------

    def check(self, ds):
        if not isinstance(ds, xr.Dataset):
            raise TypeError(f"expected a genome xarray.Dataset (from_sequences, open_fasta, "
                            f"from_dataarray build one), got {type(ds).__name__}")
        require_variables(ds, self.variables)
        require_dims(ds, (self.position_dim,), "position")
        da = ds[self.variable]
        if self.position_dim not in da.dims:
            raise ValueError(f"variable {self.variable!r} lacks the position dim "
                             f"{self.position_dim!r}; it has dims {da.dims}")
        if da.dtype.kind not in "uiUSO":
            raise TypeError(f"variable {self.variable!r} has dtype {da.dtype}; expected uint8 "
                            "base codes or letters (see seqattn.adapters.genome)")

    def sample_dims(self, ds):
        """Dims of the sequence variable other than the position dim, in ds order."""
        dims = ds[self.variable].dims
        return tuple(d for d in ds.dims if d in dims and d != self.position_dim)

    # ---- encoding ------------------------------------------------------------------------------

    def encode(self, sequences):
        """All records of a genome Dataset (or of what :func:`as_genome_dataset` takes) as one
        Batch, shorter records padded."""
        ds = as_genome_dataset(sequences, self.position_dim, self.variable)
        return next(iter(BatchIterator(ds, self, batch_size=None)))

    def _sample_codes(self, arrays, var_dims, sizes, placement):
        """(B, L) uint8 codes of stacked sample windows, checked."""
        dims = var_dims[self.variable]
        a = np.asarray(arrays[self.variable])
        a = a.transpose([0, 1 + dims.index(self.position_dim)]
                        + [1 + i for i, d in enumerate(dims) if d != self.position_dim])
        a = a.reshape(a.shape[0], sizes[self.position_dim])
        return as_codes(a, lambda index: self._where(placement, *index))

    def _where(self, placement, b, offset):
        """'record ..., position ...' of base `offset` of sample `b`, for error messages."""
        coords = placement.template.coords
        labels = []
        position = offset
        for i, d in enumerate(placement.dims):
            at = int(placement.starts[b, i])
            if d == self.position_dim:
                position = at + offset
            else:
                labels.append(f"{d} {_plain(coords[d].values[at])!r}" if d in coords.coords
                              else f"{d} {at}")
        return ", ".join(labels + [f"position {position}"])

    def encode_samples(self, arrays, var_dims, sizes, coords, placement):
        """Tokens of stacked sample windows (what :class:`BatchIterator` calls)."""
        codes = self._sample_codes(arrays, var_dims, sizes, placement)
        B, L = codes.shape
        pad = codes == PAD
        base = np.where(pad, 0, codes % SOFT)
        ambiguous = ~pad & (base >= N_CODE)
        soft = ~pad & (codes >= SOFT)
        if self.ambiguous == "error" and ambiguous.any():
            b, offset = np.argwhere(ambiguous)[0]
            raise ValueError(f"{self._where(placement, b, offset)}: ambiguous base "
                             f"{LETTERS[base[b, offset]]!r} with ambiguous='error'; choose "
                             "ambiguous='mask' or 'token' to keep such sequences")
        n = self.n_tokens(L)
        first = np.arange(n) * self.stride
        index = first[:, None] + np.arange(self.k)  # (n, k) base offsets of each token
        beyond = index >= L
        index = np.minimum(index, L - 1)
        # the tokens a record has alone, wherever padding puts it in the window: a token starts
        # on one of its bases and ends inside it, or is its first or its partial last one
        real = ~pad
        begin = np.where(real.any(axis=1), real.argmax(axis=1), L)[:, None]
        end = np.where(real.any(axis=1), L - real[:, ::-1].argmax(axis=1), 0)[:, None]
        own = (first >= begin) & (first < end) & (
            (first + self.k <= end) | (first - self.stride + self.k < end) | (first == begin))
        padding = ~own
        exists = ~(pad[:, index] | beyond) & ~padding[..., None]  # (B, n, k)
        unknown = (~exists | ambiguous[:, index]).any(axis=-1)
        powers = 4 ** np.arange(self.k - 1, -1, -1)
        ids = (np.where(exists, np.minimum(base[:, index], 3), 0) * powers).sum(axis=-1)
        ids = np.where(unknown, self.unknown_id, ids).astype(np.int64)
        masked = padding.copy()
        if self.ambiguous == "mask":
            masked |= unknown
        if self.soft_masked == "mask":
            masked |= soft[:, index].any(axis=-1)
        if self.tokens == "ids":
            tokens = ids
        else:
            tokens = np.zeros((B, n, self.in_features), self.dtype)
            hot = ~masked & (ids < self.in_features)
            rows, cols = np.nonzero(hot)
            tokens[rows, cols, ids[hot]] = 1
        position = coords.get(self.position_dim)
        position = (np.broadcast_to(np.arange(L, dtype=np.float64), (B, L)) if position is None
                    else np.asarray(position, np.float64).reshape(B, L))[:, first]
        token_coords = {self.position_dim: np.where(padding, np.nan, position)}
        for d, v in coords.items():
            if d != self.position_dim and np.ndim(v) == 1:
                token_coords[d] = np.repeat(np.asarray(v, np.float64)[:, None], n, axis=1)
        return Batch(tokens=tokens, key_padding_mask=masked, valid=exists,
                     coords=canonical_names(token_coords, {self.position_dim: "position"}),
                     placement=placement)

    # ---- decoding ------------------------------------------------------------------------------

    def decode_samples(self, batch, values=None, variables=None, mask_missing=True):
        """Per-token `values` (B, N) or (B, N, 1) spread back per base: {variable: (B, *window
        sizes of its dims)}; a base gets the mean of the tokens covering it, NaN past the end of
        its record (and, with `mask_missing`, where all covering tokens were masked out).
        Without `values`, single-base tokens decode to their base codes as floats."""
        L = batch.placement.window_sizes()[self.position_dim]
        B, n = batch.key_padding_mask.shape
        if values is None:
            if self.k != 1:
                raise ValueError("decoding a batch's own k-mer tokens is not defined; pass the "
                                 "per-token values to decode")
            ids = batch.tokens if self.tokens == "ids" else np.where(
                batch.tokens.any(axis=-1), batch.tokens.argmax(axis=-1), N_CODE)
            values = np.minimum(ids, N_CODE).astype(np.float64)
            mask_missing = False
        values = np.asarray(values)
        if values.ndim == 3 and values.shape[-1] == 1:
            values = values[..., 0]
        if values.shape != (B, n):
            raise ValueError(f"values have shape {values.shape}; expected one value per token, "
                             f"(B, N) = {(B, n)} or (B, N, 1); decode several outputs with "
                             "GenomeAdapter.decode")
        use = ~batch.key_padding_mask if mask_missing else batch.valid.any(axis=-1)
        total = np.zeros((B, L))
        count = np.zeros((B, L))
        first = np.arange(n) * self.stride
        for j in range(self.k):
            at = first + j
            inside = at < L
            keep = use[:, inside] & batch.valid[:, inside, j]
            total[:, at[inside]] += np.where(keep, values[:, inside], 0)
            count[:, at[inside]] += keep
        out = np.where(count > 0, total / np.maximum(count, 1), np.nan)
        dims = batch.placement.template.var_dims[self.variable]
        shape = [L if d == self.position_dim else 1 for d in dims]
        return {name: out.reshape(B, *shape) for name in (variables or self.variables)}

    def denormalize(self, ds):
        return ds

    def decode(self, batch, values, name="prediction", mask_missing=True):
        """Per-token `values` (B, N[, F]) as a DataArray on the records' positions (record,
        position[, output]) with their names and genomic coordinates."""
        values = np.asarray(values)
        columns = values[..., None] if values.ndim == 2 else values
        parts = []
        for f in range(columns.shape[-1]):
            put_back = PutBack(self, batch.placement.template, self.variables, mask_missing)
            put_back.add(batch, columns[..., f])
            parts.append(put_back.result()[self.variable])
        out = parts[0] if values.ndim == 2 else xr.concat(parts, dim="output")
        if values.ndim == 3:
            out = out.transpose(*[d for d in out.dims if d != "output"], "output")
        return out.rename(name)

    # ---- training batches and the reverse strand -----------------------------------------------

    def batches(self, ds, targets, batch_size=32, shuffle=True, seed=0, reverse_complement=False,
                input_dims=None, input_overlap=None):
        """Training batches over a genome Dataset, as (Batch, targets) pairs (what ``fit``
        takes); see :class:`GenomeBatches`."""
        return GenomeBatches(ds, self, targets, batch_size=batch_size, shuffle=shuffle,
                             seed=seed, reverse_complement=reverse_complement,
                             input_dims=input_dims, input_overlap=input_overlap)

    def reverse_complement(self, batch, which=None, per_base=None):
        """`batch` with the samples `which` (B,) bool (default all) on the reverse strand: each
        record's tokens reversed (padding stays at the end) and complemented. `per_base` (B, N,
        ...) arrays (per-base targets of single-base tokens) are reversed alike; returns
        (batch, per_base)."""
        B, n = batch.key_padding_mask.shape
        which = np.ones(B, bool) if which is None else np.asarray(which, bool)
        lengths = batch.valid.any(axis=-1).sum(axis=1)
        order = reversal_order(lengths, n, which)
        rows = np.arange(B)[:, None]
        if self.tokens == "ids":
            tokens = np.where(which[:, None], self.complement[batch.tokens[rows, order]],
                              batch.tokens)
        else:
            flipped = batch.tokens[rows, order][..., self.complement]
            tokens = np.where(which[:, None, None], flipped, batch.tokens)
        valid = np.where(which[:, None, None], batch.valid[rows, order][..., ::-1], batch.valid)
        out = Batch(tokens=tokens, key_padding_mask=batch.key_padding_mask[rows, order],
                    valid=valid, coords=batch.coords, placement=batch.placement)
        if per_base is not None:
            per_base = np.asarray(per_base)[rows, order]
        return out, per_base


def reversal_order(lengths, n, which):
    """(B, n) token order that reverses the first `lengths[b]` tokens of the rows `which`."""
    t = np.arange(n)[None, :]
    lengths = np.asarray(lengths)[:, None]
    flip = np.asarray(which, bool)[:, None] & (t < lengths)
    return np.where(flip, lengths - 1 - t, t)


class GenomeBatches:
    """(Batch, targets) pairs over a genome Dataset for ``fit``, a new order every epoch that
    depends on (`seed`, epoch) only (``epoch(e)`` replays epoch e).

    `targets`: a DataArray on the Dataset's sample dims (one target per record: (record,) or
    (record, target)) or on them and the position dim (per base, single-base tokens only, NaN
    past a record's end; a batch's are (B, N, 1) or (B, N, T)), or a NumPy array whose first
    axis is the record (a batch's per-record targets are (B, 1) or (B, T)). With
    `reverse_complement`, each sample is put on the reverse strand with probability 1/2 (drawn
    from (seed, epoch, batch)); per-base targets are reversed with it. `input_dims` and
    `input_overlap` cut long records into windows as in :class:`BatchIterator`."""

    def __init__(self, ds, adapter, targets, batch_size=32, shuffle=True, seed=0,
                 reverse_complement=False, input_dims=None, input_overlap=None):
        self.adapter = adapter
        self.iterator = BatchIterator(ds, adapter, input_dims=input_dims,
                                      input_overlap=input_overlap, batch_size=batch_size,
                                      shuffle=shuffle, seed=seed)
        self.sample_dims = adapter.sample_dims(ds)
        self.seed, self.reverse_complement = seed, bool(reverse_complement)
        self._epoch = 0
        if isinstance(targets, xr.DataArray):
            self.per_base = adapter.position_dim in targets.dims
            missing = [d for d in self.sample_dims if d not in targets.dims]
            if missing:
                raise ValueError(f"targets lack the sample dims {missing} of the sequences; "
                                 f"give one target per {self.sample_dims}")
            lead = self.sample_dims + ((adapter.position_dim,) if self.per_base else ())
            self.targets = targets.transpose(*lead, ...).values
        else:
            self.per_base = False
            self.targets = np.asarray(targets)
            if len(self.sample_dims) != 1:
                raise ValueError(f"the sequences have sample dims {self.sample_dims}; give "
                                 "targets as a DataArray on them")
        expected = tuple(ds.sizes[d] for d in self.sample_dims)
        if self.targets.shape[: len(expected)] != expected:
            raise ValueError(f"targets have shape {self.targets.shape}; expected a leading "
                             f"{expected} for sample dims {self.sample_dims}")
        if self.per_base and (adapter.k != 1 or adapter.stride != 1):
            raise ValueError("per-base targets need single-base tokens (k=1); with k-mers give "
                             "one target per record")

    def __len__(self):
        return len(self.iterator)

    def __iter__(self):
        epoch = self._epoch
        self._epoch += 1
        return self.epoch(epoch)

    def epoch(self, epoch):
        for i, batch in enumerate(self.iterator.epoch(epoch)):
            targets = self._targets_of(batch)
            if self.reverse_complement:
                flip = np.random.default_rng([self.seed, epoch, i]).random(len(batch)) < 0.5
                batch, flipped = self.adapter.reverse_complement(
                    batch, flip, targets if self.per_base else None)
                targets = flipped if self.per_base else targets
            yield batch, targets

    def _targets_of(self, batch):
        placement = batch.placement
        columns = [placement.dims.index(d) for d in self.sample_dims]
        index = tuple(placement.starts[:, c] for c in columns)
        if not self.per_base:
            targets = self.targets[index]
            return targets[:, None] if targets.ndim == 1 else targets  # (B, targets)
        L = placement.window_sizes()[self.adapter.position_dim]
        if self.adapter.position_dim in placement.dims:
            offset = placement.starts[:, placement.dims.index(self.adapter.position_dim)]
        else:
            offset = np.zeros(len(batch), np.int64)
        positions = offset[:, None] + np.arange(L)
        targets = self.targets[tuple(i[:, None] for i in index) + (positions,)]
        return targets[..., None] if targets.ndim == 2 else targets  # (B, N, targets)


# ---- variants and in-silico mutagenesis ----------------------------------------------------


@dataclass(frozen=True)
class Variant:
    """A variant at 0-based `position` on `chrom` (a record's genomic coordinates, or a record
    name and the offset in it): `ref` the reference allele, `alt` the alternate (SNV or a short
    indel; '' or '-' for none)."""

    chrom: str
    position: int
    ref: str
    alt: str

    @property
    def label(self):
        return f"{self.chrom}:{self.position}:{self.ref or '-'}>{self.alt or '-'}"


def _locate(ds, variant, variable):
    """(record index, offset in the record) of a variant."""
    lengths = _lengths(ds, variable)
    if "chrom" in ds.coords and "start" in ds.coords:
        for i, (chrom, start) in enumerate(zip(ds["chrom"].values, ds["start"].values)):
            if chrom == variant.chrom and start <= variant.position < start + lengths[i]:
                return i, int(variant.position - start)
    names = list(ds["record"].values)
    if variant.chrom in names:
        i = names.index(variant.chrom)
        if 0 <= variant.position < lengths[i]:
            return i, int(variant.position)
    raise ValueError(f"variant {variant.label}: no record covers {variant.chrom} position "
                     f"{variant.position} (records: {names[:5]}{'...' if len(names) > 5 else ''})")


def _lengths(ds, variable):
    """Bases per record: the ``length`` coordinate, else counted (codes before padding)."""
    if "length" in ds.coords:
        return ds["length"].values.astype(np.int64)
    return (ds[variable].transpose("record", ...).values != PAD).sum(axis=-1)


def variant_windows(sequences, variants, window, position_dim="position", variable="sequence"):
    """A genome Dataset (variant, allele, position) of `window`-base windows around each variant:
    allele ``ref`` is the reference sequence, ``alt`` the same with the alternate allele; both
    alleles start at base ``window // 2`` (attr ``centre``), the rest of the window is the
    sequence around them (an indel shifts the right flank), padding where the record ends.

    `variants`: :class:`Variant` objects or (chrom, position, ref, alt) tuples. A reference
    allele that does not match the sequence is a ValueError naming the variant, record and
    position."""
    ds = as_genome_dataset(sequences, position_dim, variable)
    codes = ds[variable].transpose("record", position_dim).values
    variants = [v if isinstance(v, Variant) else Variant(*v) for v in variants]
    if not variants:
        raise ValueError("no variants given")
    centre = window // 2
    out = np.full((len(variants), 2, window), PAD, np.uint8)
    where = np.zeros((len(variants), 2), np.int64)
    for n, v in enumerate(variants):
        ref, alt = ("" if a in ("-", ".") else a for a in (v.ref, v.alt))
        record, offset = _locate(ds, v, variable)
        row = codes[record, : _lengths(ds, variable)[record]]
        found = letters_of(row[offset: offset + len(ref)])
        if found.upper() != ref.upper():
            raise ValueError(f"variant {v.label}: the reference allele {ref!r} does not match "
                             f"record {ds['record'].values[record]!r} at position {offset} "
                             f"(0-based offset), which holds {found!r}")
        left = row[max(0, offset - centre): offset]
        for a, allele in enumerate((ref, alt)):
            right = row[offset + len(ref):]
            middle = codes_of(allele, v.label) if allele else np.zeros(0, np.uint8)
            seq = np.concatenate([left, middle, right])[: window - centre + len(left)]
            at = centre - len(left)
            out[n, a, at: at + len(seq)] = seq[: window - at]
        where[n] = (record, offset)
    names = [v.label for v in variants]
    return xr.Dataset(
        {variable: (("variant", "allele", position_dim), out)},
        coords={"variant": np.array(names, dtype=object), "allele": ["ref", "alt"],
                position_dim: np.arange(window) - centre,
                "record": ("variant", ds["record"].values[where[:, 0]]),
                "offset": ("variant", where[:, 1]),
                "ref": ("variant", np.array([v.ref for v in variants], dtype=object)),
                "alt": ("variant", np.array([v.alt for v in variants], dtype=object))},
        attrs={"centre": centre})


def variant_effects(model, sequences, variants, adapter, window, batch_size=64):
    """Scores of an N -> 1 `model` for the reference and alternate window of every variant and
    their difference: a Dataset on ``variant`` (and ``output`` when the model has several) with
    ``ref_score``, ``alt_score`` and ``difference`` = alt - ref."""
    from .predict import predict

    windows = variant_windows(sequences, variants, window, adapter.position_dim, adapter.variable)
    scores = predict(model, windows, adapter, per_sample=True, batch_size=batch_size)["prediction"]
    if scores.sizes["output"] == 1:
        scores = scores.isel(output=0, drop=True)
    ref, alt = scores.sel(allele="ref", drop=True), scores.sel(allele="alt", drop=True)
    return xr.Dataset({"ref_score": ref, "alt_score": alt, "difference": alt - ref},
                      attrs=windows.attrs)


def mutagenesis(model, sequence, adapter, output=0, batch_size=64):
    """In-silico mutagenesis of one sequence (a string or a one-record genome Dataset) by an
    N -> 1 `model`: a DataArray (position, base) of score(sequence with `base` at `position`) -
    score(sequence), 0 at the reference base, on the record's positions (with its
    ``genomic_position``), attrs ``record`` and ``reference_score``. `output` picks the model
    output to attribute."""
    ds = as_genome_dataset(sequence, adapter.position_dim, adapter.variable)
    if ds.sizes["record"] != 1:
        raise ValueError(f"mutagenesis takes one sequence; got {ds.sizes['record']} records: "
                         "select one with ds.isel(record=[i])")
    length = int(_lengths(ds, adapter.variable)[0])
    codes = ds[adapter.variable].transpose("record", adapter.position_dim).values[0, :length]
    mutants = np.repeat(codes[None, None, :], length, axis=0).repeat(4, axis=1)  # (L, 4, L)
    positions = np.arange(length)
    soft = np.where(codes >= SOFT, SOFT, 0).astype(np.uint8)
    for b in range(4):
        mutants[positions, b, positions] = b + soft
    run = ModelCall(model)
    reference_score = float(np.asarray(run(adapter.encode(ds)))[0, output])
    flat = mutants.reshape(4 * length, length)
    scores = np.empty(len(flat))
    for lo in range(0, len(flat), batch_size):
        rows = flat[lo: lo + batch_size]
        batch = adapter.encode(_dataset(rows, [f"m{i}" for i in range(lo, lo + len(rows))],
                                        [length] * len(rows), [None] * len(rows),
                                        adapter.position_dim, adapter.variable))
        scores[lo: lo + len(rows)] = np.asarray(run(batch))[:, output]
    effect = scores.reshape(length, 4) - reference_score
    is_base = codes % SOFT < N_CODE  # at an ambiguous reference every base is a change
    effect[positions[is_base], (codes % SOFT)[is_base]] = 0.0
    position = ds[adapter.position_dim].values[:length]
    return xr.DataArray(
        effect, dims=(adapter.position_dim, "base"),
        coords={adapter.position_dim: position, "base": list("ACGT"),
                "genomic_position": (adapter.position_dim,
                                     ds["genomic_position"].values[0, :length]
                                     if "genomic_position" in ds.coords else position)},
        name="mutation_effect",
        attrs={"record": str(ds["record"].values[0]), "reference_score": reference_score})
