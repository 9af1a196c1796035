"""Alphabets of biological sequences: DNA, RNA and protein residues as integer codes, with an
explicit policy for what is not a plain residue.

An :class:`Alphabet` has its residues (codes 0 .. n-1, in the order given), its ambiguity codes
(IUPAC N, R, Y, ... for nucleic acids; B, Z, J, X and the rare U (selenocysteine) and O
(pyrrolysine) for proteins, which most models and deep mutational scans do not have), and its
stop symbol (``*`` for proteins). :meth:`Alphabet.codes` reads a string: residue ``i`` is code
``i``, an ambiguity code is ``UNKNOWN = n``, a stop is ``STOP = n + 1``; lower case is read as
upper case; any other character is an error naming the record and position.

What the non-residues become is :meth:`Alphabet.tokens`' choice, one option each:

* ``ambiguous``: ``"mask"`` (the token is masked out, as in ``key_padding_mask``), ``"token"``
  (the unknown token, which a model sees and learns) or ``"error"`` (refused, naming where);
* ``stop``: the same three choices, for the stop symbol (a nonsense mutant in a scan is a real
  variant with its own effect, so ``"token"`` is the default).
"""
from dataclasses import dataclass

import numpy as np

POLICIES = ("mask", "token", "error")


@dataclass(frozen=True)
class Alphabet:
    """Residues, ambiguity codes and stop symbols of one kind of sequence (module docstring)."""

    name: str
    residues: str
    ambiguous: str = ""
    stop: str = ""

    @property
    def size(self):
        """Codes 0 .. size - 1: the residues, then the unknown and the stop code."""
        return len(self.residues) + 2

    @property
    def unknown(self):
        return len(self.residues)

    @property
    def stop_code(self):
        return len(self.residues) + 1

    def _table(self):
        table = np.full(256, -1, np.int64)
        for code, letter in enumerate(self.residues):
            table[ord(letter)] = table[ord(letter.lower())] = code
        for letter in self.ambiguous:
            table[ord(letter)] = table[ord(letter.lower())] = self.unknown
        for letter in self.stop:
            table[ord(letter)] = self.stop_code
        return table

    def codes(self, sequence, record="sequence"):
        """int64 codes (L,) of `sequence` (see the module docstring)."""
        if not isinstance(sequence, str):
            raise TypeError(f"record {record!r}: expected a {self.name} string, got "
                            f"{type(sequence).__name__}")
        raw = np.frombuffer(sequence.encode("ascii", "replace"), np.uint8)
        codes = self._table()[raw]
        bad = np.flatnonzero(codes < 0)  # a non-ASCII character was replaced by "?"
        if bad.size:
            position = int(bad[0])
            raise ValueError(f"record {record!r}, position {position} (0-based): "
                             f"{sequence[position]!r} is not a {self.name} letter (residues "
                             f"{self.residues}{self._others()})")
        return codes

    def _others(self):
        extra = [f"ambiguity codes {self.ambiguous}"] if self.ambiguous else []
        extra += [f"stop {self.stop}"] if self.stop else []
        return "; " + ", ".join(extra) if extra else ""

    def letters(self, codes):
        """The string of codes (the unknown code as the first ambiguity letter, e.g. N or X)."""
        spelled = self.residues + (self.ambiguous[:1] or "?") + (self.stop[:1] or "?")
        return "".join(spelled[int(c)] for c in np.asarray(codes))

    def tokens(self, codes, ambiguous="mask", stop="token", where=None):
        """(ids, masked) of codes (..., L): ids in 0 .. size - 1 for an embedding, and which
        tokens the policies mask out. `where(index)` names a position for the errors."""
        for name, value in (("ambiguous", ambiguous), ("stop", stop)):
            if value not in POLICIES:
                raise ValueError(f"{name}={value!r}; expected one of {POLICIES}")
        codes = np.asarray(codes)
        masked = np.zeros(codes.shape, bool)
        for policy, code, what in ((ambiguous, self.unknown, "an ambiguity code"),
                                   (stop, self.stop_code, "a stop")):
            hit = codes == code
            if policy == "error" and hit.any():
                index = tuple(int(i) for i in np.argwhere(hit)[0])
                place = where(index) if where else f"position {index[-1]}"
                option = "ambiguous" if code == self.unknown else "stop"
                raise ValueError(f"{place}: {what} with {option}='error'; choose "
                                 f"{option}='mask' or 'token' to keep such sequences")
            if policy == "mask":
                masked |= hit
        return codes.astype(np.int64), masked

    def one_hot(self, codes, ambiguous="mask", stop="token", dtype=np.float32):
        """(..., L, F) one-hot rows: F = the residues, plus a column for each of the unknown
        and stop tokens that the alphabet has and whose policy is ``"token"``; masked tokens
        are rows of zeros."""
        ids, masked = self.tokens(codes, ambiguous, stop)
        columns = list(range(len(self.residues)))
        columns += [self.unknown] if ambiguous == "token" and self.ambiguous else []
        columns += [self.stop_code] if stop == "token" and self.stop else []
        column_of = np.full(self.size, -1)
        column_of[columns] = np.arange(len(columns))
        out = np.zeros(ids.shape + (len(columns),), dtype)
        hot = ~masked & (column_of[ids] >= 0)
        out[hot, column_of[ids[hot]]] = 1
        return out


DNA = Alphabet("DNA", "ACGT", ambiguous="NRYSWKMBDHV")
RNA = Alphabet("RNA", "ACGU", ambiguous="NRYSWKMBDHV")
PROTEIN = Alphabet("protein", "ACDEFGHIKLMNPQRSTVWY", ambiguous="XBZJUO", stop="*")

# the three-letter names of HGVS protein notation
THREE_LETTER = {"Ala": "A", "Arg": "R", "Asn": "N", "Asp": "D", "Cys": "C", "Gln": "Q",
                "Glu": "E", "Gly": "G", "His": "H", "Ile": "I", "Leu": "L", "Lys": "K",
                "Met": "M", "Phe": "F", "Pro": "P", "Ser": "S", "Thr": "T", "Trp": "W",
                "Tyr": "Y", "Val": "V", "Sec": "U", "Pyl": "O", "Xaa": "X", "Asx": "B",
                "Glx": "Z", "Xle": "J", "Ter": "*"}

ALPHABETS = {a.name: a for a in (DNA, RNA, PROTEIN)}


def alphabet_named(name):
    """The Alphabet called `name` ("DNA", "RNA" or "protein"), or `name` itself if it is one."""
    if isinstance(name, Alphabet):
        return name
    if name not in ALPHABETS:
        raise ValueError(f"alphabet={name!r}; expected one of {sorted(ALPHABETS)}")
    return ALPHABETS[name]
