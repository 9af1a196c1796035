"""ResidueAdapter: protein and RNA sequences as one token per residue, on the adapter protocol.

It reads the residue Dataset of :mod:`seqattn.readers.residues` (``from_residues`` for strings,
``from_mutations`` for the variants of one wild type) and offers the same calls as
:class:`~seqattn.adapters.GenomeAdapter` (``fit``, ``batches``, ``encode``, ``decode``,
``model_config``, ``predict``, targets per record or per residue, values or classes), with the
alphabet's policies for ambiguity codes and stops (:mod:`seqattn.readers.alphabets`). Residues
have no reverse strand: ``reverse_complement`` is refused.

Variants of one wild type (a deep mutational scan) can instead be read as *mutation tokens*
(``wild_type=...``): a token for the wild type, then one per substituted residue in position
order, its id ``1 + position * alphabet.size + residue code`` (each mutation its own token, so
an embedding of it is that mutation's effect, and attention between the tokens is where
mutations combine). A scan's variants then cost a few tokens each instead of the whole
sequence. Every batch has as many mutation slots as the most mutated variant ``fit`` saw
(padding masked), so batches and predictions line up; a variant with more is refused.
"""
import numpy as np

from ..readers.alphabets import POLICIES, alphabet_named
from ..readers.dna_codes import PAD
from .genome import GenomeAdapter
from .genome_tokens import Tokenized


class ResidueAdapter(GenomeAdapter):
    """Residue Dataset <-> token batches (module docstring).

    Parameters
    ----------
    alphabet : {"protein", "RNA", "DNA"}
        The alphabet the Dataset's codes are in (its ``alphabet`` attr must agree).
    tokens : {"onehot", "ids"}
        One-hot rows (B, N, ``in_features``) or ids (B, N) for an embedding (``vocab_size``).
    ambiguous : {"mask", "token", "error"}
        What an ambiguity code (X, B, Z, J, U, O; N, R, Y, ... for RNA) does.
    stop : {"token", "mask", "error"}
        What a stop (``*``) does.
    variable, position_dim : str
        The codes' variable and the dim along a sequence's residues.
    dtype : str
        The float dtype of one-hot tokens.
    wild_type : str, optional
        Read each record as mutation tokens of this wild type (module docstring): every
        record must have its length; targets per record only.
    """

    k = stride = 1
    soft_masked = "upper"
    dataset_kind = "residue"
    readers = ("seqattn.readers.residues.from_residues(strings) or "
               "from_mutations(wild_type, mutations)")

    def __init__(self, *, alphabet="protein", tokens="onehot", ambiguous="mask", stop="token",
                 variable="sequence", position_dim="position", dtype="float32",
                 wild_type=None):
        super().__init__(tokens=tokens, ambiguous=ambiguous, variable=variable,
                         position_dim=position_dim, dtype=dtype)
        if stop not in POLICIES:
            raise ValueError(f"stop={stop!r}; expected one of {POLICIES}")
        self.alphabet = alphabet_named(alphabet).name
        self.stop = stop
        if wild_type is not None and (not isinstance(wild_type, str) or not wild_type):
            raise ValueError(f"wild_type={wild_type!r}; expected the wild type's {self.alphabet} "
                             "string, of which every record is a variant")
        self.wild_type = wild_type
        self.max_mutations = 0  # the most mutations of a variant fit saw
        self._wild_codes = None if wild_type is None else self.letters.codes(
            wild_type, record="wild_type")

    @property
    def letters(self):
        return alphabet_named(self.alphabet)

    @property
    def unknown_id(self):
        return self.letters.unknown

    @property
    def vocab_size(self):
        """Ids 0 .. n-1 are the residues, n the unknown residue, n + 1 the stop; with a wild
        type, 0 is the wild type's token and the rest the mutations (module docstring)."""
        if self.wild_type is not None:
            return 1 + len(self.wild_type) * self.letters.size
        return self.letters.size

    @property
    def in_features(self):
        if self.wild_type is not None:
            return self.vocab_size
        return self.letters.one_hot(np.zeros(0, np.int64), self.ambiguous, self.stop).shape[-1]

    @property
    def complement(self):
        raise self._no_strand()

    def _no_strand(self):
        return ValueError(f"{self.alphabet} residues have no reverse strand; strand symmetry and "
                          "reverse_complement are for DNA (GenomeAdapter)")

    def check(self, ds, call="check"):
        super().check(ds, call)
        named = ds.attrs.get("alphabet")
        if named is not None and named != self.alphabet:
            raise ValueError(f"the Dataset's codes are in the {named} alphabet (attrs "
                             f"'alphabet'), this adapter reads {self.alphabet}; pass "
                             f"alphabet={named!r}")
        length = ds.sizes[self.position_dim]
        if self.wild_type is not None and length != len(self.wild_type):
            raise ValueError(f"the Dataset's sequences have {length} positions, but wild_type "
                             f"has {len(self.wild_type)} residues; mutation tokens need the "
                             "variants of that wild type (substitutions only)")

    def _fit(self, ds, targets):
        super()._fit(ds, targets)
        if self.wild_type is not None and self.per_base:
            self._fitted = False
            raise ValueError("mutation tokens (wild_type=...) predict one value per variant; "
                             "targets per residue need the residue tokens (wild_type=None)")
        if self.wild_type is not None:  # every batch gets this many mutation slots
            codes = ds[self.variable].transpose(..., self.position_dim).values
            self.max_mutations = int((codes != self._wild_codes).sum(axis=-1).max(initial=0))

    def read_codes(self, values, name=None):
        values = np.asarray(values)
        if values.dtype.kind not in "ui":
            raise TypeError(f"residues must be the uint8 codes of seqattn.readers.from_residues, "
                            f"got dtype {values.dtype}")
        bad = (values >= self.letters.size) & (values != PAD)
        if bad.any():
            index = tuple(int(i) for i in np.argwhere(bad)[0])
            where = name(index) if name else f"position {index[-1]}"
            raise ValueError(f"{where}: code {int(values[index])} is not a {self.alphabet} code "
                             f"(0 .. {self.letters.size - 1}, {PAD} past the end)")
        return values.astype(np.uint8)

    def tokenize(self, codes, where):
        if self.wild_type is not None:
            return self._mutation_tokens(codes, where)
        padding = codes == PAD
        ids, masked = self.letters.tokens(np.where(padding, 0, codes), self.ambiguous, self.stop,
                                          lambda index: where(*index))
        masked = masked | padding
        ids = np.where(padding, self.unknown_id, ids)
        tokens = ids if self.tokens == "ids" else self.letters.one_hot(
            ids, self.ambiguous, self.stop, self.dtype) * ~padding[..., None]
        return Tokenized(tokens, masked, ~padding[..., None], np.arange(codes.shape[1]))

    def _mutation_tokens(self, codes, where):
        """The wild type's token and one per mutation of `codes` (B, L), in position order."""
        short = (codes == PAD).any(axis=1)
        if short.any():
            b = int(np.flatnonzero(short)[0])
            end = int(np.argmax(codes[b] == PAD))
            raise ValueError(f"{where(b, end)}: the variant ends there, the wild type has "
                             f"{len(self.wild_type)} residues; mutation tokens need "
                             "substitutions of the wild type")
        ids, masked = self.letters.tokens(codes, self.ambiguous, self.stop,
                                          lambda index: where(*index))
        changed = codes != self._wild_codes
        counts = changed.sum(axis=1)
        slots = self.max_mutations
        if (counts > slots).any():
            b = int(np.argmax(counts > slots))
            raise ValueError(f"{where(b, np.flatnonzero(changed[b])[slots])}: the variant has "
                             f"{counts[b]} mutations, the adapter was fitted on variants with at "
                             f"most {slots}; fit it on data that holds such variants (batches "
                             "have as many mutation tokens as fit saw)")
        # (B, slots) the mutated positions, ascending, then unmutated ones past each count
        position = np.argsort(~changed, axis=1, kind="stable")[:, :slots]
        exists = np.arange(slots) < counts[:, None]
        rows = np.arange(len(codes))[:, None]
        first = np.concatenate([np.zeros((len(codes), 1), np.int64),
                                np.where(exists, position, 0)], axis=1)
        token_ids = np.where(exists, 1 + position * self.letters.size + ids[rows, position], 0)
        token_ids = np.concatenate([np.zeros((len(codes), 1), np.int64), token_ids], axis=1)
        valid = np.concatenate([np.ones((len(codes), 1), bool), exists], axis=1)
        padding_mask = ~valid
        padding_mask[:, 1:] |= masked[rows, position]
        if self.tokens == "ids":
            return Tokenized(token_ids, padding_mask, valid[..., None], first)
        tokens = np.zeros(token_ids.shape + (self.vocab_size,), self.dtype)
        np.put_along_axis(tokens, token_ids[..., None], ~padding_mask[..., None], axis=-1)
        return Tokenized(tokens, padding_mask, valid[..., None], first)

    def batches(self, ds, *, reverse_complement=False, **options):
        """Batches of the sequences `where` selects: see :meth:`GenomeAdapter.batches`
        (without ``reverse_complement``)."""
        if reverse_complement:
            raise self._no_strand()
        return super().batches(ds, **options)

    def reverse_complement(self, batch, which=None):
        raise self._no_strand()

    def get_state(self):
        return {**super().get_state(), "max_mutations": self.max_mutations}

    def set_state(self, state):
        super().set_state(state)
        self.max_mutations = int(state.get("max_mutations", 0))
