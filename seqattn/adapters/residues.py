"""ResidueAdapter: protein and RNA sequences as one token per residue, on the adapter protocol.

It reads the residue Dataset of :mod:`seqattn.readers.residues` (``from_residues`` for strings,
``from_mutations`` for the variants of one wild type) and offers the same calls as
:class:`~seqattn.adapters.GenomeAdapter` (``fit``, ``batches``, ``encode``, ``decode``,
``model_config``, ``predict``, targets per record or per residue, values or classes), with the
alphabet's policies for ambiguity codes and stops (:mod:`seqattn.readers.alphabets`). Residues
have no reverse strand: ``reverse_complement`` is refused.
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
    """

    k = stride = 1
    soft_masked = "upper"
    dataset_kind = "residue"
    readers = ("seqattn.readers.residues.from_residues(strings) or "
               "from_mutations(wild_type, mutations)")

    def __init__(self, *, alphabet="protein", tokens="onehot", ambiguous="mask", stop="token",
                 variable="sequence", position_dim="position", dtype="float32"):
        super().__init__(tokens=tokens, ambiguous=ambiguous, variable=variable,
                         position_dim=position_dim, dtype=dtype)
        if stop not in POLICIES:
            raise ValueError(f"stop={stop!r}; expected one of {POLICIES}")
        self.alphabet = alphabet_named(alphabet).name
        self.stop = stop

    @property
    def letters(self):
        return alphabet_named(self.alphabet)

    @property
    def unknown_id(self):
        return self.letters.unknown

    @property
    def vocab_size(self):
        """Ids 0 .. n-1 are the residues, n the unknown residue, n + 1 the stop."""
        return self.letters.size

    @property
    def in_features(self):
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
        padding = codes == PAD
        ids, masked = self.letters.tokens(np.where(padding, 0, codes), self.ambiguous, self.stop,
                                          lambda index: where(*index))
        masked = masked | padding
        ids = np.where(padding, self.unknown_id, ids)
        tokens = ids if self.tokens == "ids" else self.letters.one_hot(
            ids, self.ambiguous, self.stop, self.dtype) * ~padding[..., None]
        return Tokenized(tokens, masked, ~padding[..., None], np.arange(codes.shape[1]))

    def batches(self, ds, *, reverse_complement=False, **options):
        """Batches of the sequences `where` selects: see :meth:`GenomeAdapter.batches`
        (without ``reverse_complement``)."""
        if reverse_complement:
            raise self._no_strand()
        return super().batches(ds, **options)

    def reverse_complement(self, batch, which=None):
        raise self._no_strand()
