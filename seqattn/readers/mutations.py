"""Mutations written the way the field writes them, parsed and applied to a wild type.

Accepted notations (positions 1-based by default, as the field numbers residues; a scan that
numbers from another residue passes ``first_position``):

* ``T2A`` or ``T02A``: the wild-type residue, its position (leading zeros allowed), the new one;
* several joined by ``:``, ``,``, ``;`` or spaces: ``A23G:K45R``;
* HGVS-like protein notation with three-letter names (or one-letter ones after ``p.``):
  ``p.Thr2Ala``, ``p.(Thr2Ala)``, ``p.[Thr2Ala;Lys45Arg]``, a stop as ``Ter`` or ``*``, a
  silent change as ``p.Thr2=``;
* the wild type itself: ``""``, ``"WT"``, ``"wt"``, ``"_wt"``, ``"p.="`` (no mutation).

Every error names the text, the part that failed and what was expected; applying a mutation
whose wild-type residue does not match the sequence names the position and both residues.
"""
import re
from dataclasses import dataclass

from .alphabets import PROTEIN, THREE_LETTER

WILD_TYPE = ("", "wt", "_wt", "wildtype", "wild-type", "p.=")
_ONE = re.compile(r"^([A-Za-z*])(\d+)([A-Za-z*=])$")
_THREE = re.compile(r"^([A-Z][a-z]{2}|\*)(\d+)([A-Z][a-z]{2}|\*|=)$")
_SEPARATORS = re.compile(r"[:,;\s]+")


@dataclass(frozen=True)
class Mutation:
    """A substitution at 0-based `index` of the sequence: `wild` -> `mutant` (one letter each;
    ``*`` a stop)."""

    index: int
    wild: str
    mutant: str

    def label(self, first_position=1):
        """The short notation, e.g. ``T2A`` (positions from `first_position`)."""
        return f"{self.wild}{self.index + first_position}{self.mutant}"


def parse_mutations(text, alphabet=PROTEIN, first_position=1):
    """The :class:`Mutation` tuple that `text` writes (see the module docstring), sorted by
    position; a position mutated twice, or a letter outside `alphabet`, is a ValueError."""
    if not isinstance(text, str):
        raise TypeError(f"mutations must be written as a string such as 'T2A' or 'A23G:K45R', "
                        f"got {type(text).__name__}")
    stripped = text.strip()
    if stripped.lower() in WILD_TYPE:
        return ()
    hgvs = stripped.startswith("p.")
    body = stripped[2:] if hgvs else stripped
    if hgvs:
        body = body.strip()
        if body[:1] in "([" and body[-1:] in ")]":
            body = body[1:-1]
    parts = [p for p in _SEPARATORS.split(body) if p]
    if not parts:
        raise ValueError(f"{text!r} holds no mutation; expected e.g. 'T2A', 'A23G:K45R' or "
                         "'p.Thr2Ala' (or 'WT' for the wild type)")
    mutations = [_parse_one(part, text, hgvs, alphabet, first_position) for part in parts]
    seen = {}
    for m in mutations:
        if m.index in seen:
            raise ValueError(f"{text!r} mutates position {m.index + first_position} twice "
                             f"({seen[m.index].label(first_position)} and "
                             f"{m.label(first_position)})")
        seen[m.index] = m
    return tuple(sorted(mutations, key=lambda m: m.index))


def _parse_one(part, text, hgvs, alphabet, first_position):
    match = _THREE.match(part) if hgvs else None
    hgvs = match is not None
    match = match or _ONE.match(part)  # p.T2A: one-letter names after the prefix
    if match is None:
        expected = ("a residue, a position and a residue, e.g. 'T2A', or after 'p.' "
                    "three-letter names, e.g. 'p.Thr2Ala', 'p.Lys45Ter', 'p.Thr2='")
        raise ValueError(f"{text!r}: cannot read {part!r}; expected {expected}")
    wild, position, mutant = match.groups()
    if hgvs:
        wild, mutant = (_one_letter(name, part, text) for name in (wild, mutant))
    wild = wild.upper()
    mutant = wild if mutant == "=" else mutant.upper()
    for letter in (wild, mutant):
        alphabet.codes(letter, record=f"{text!r}, mutation {part!r}")
    index = int(position) - first_position
    if index < 0:
        raise ValueError(f"{text!r}: position {position} in {part!r} comes before the first "
                         f"position {first_position}")
    return Mutation(index, wild, mutant)


def _one_letter(name, part, text):
    if name in ("*", "="):
        return name
    if name not in THREE_LETTER:
        raise ValueError(f"{text!r}: {name!r} in {part!r} is not a three-letter amino-acid "
                         f"name (one of {', '.join(sorted(THREE_LETTER))})")
    return THREE_LETTER[name]


def apply_mutations(wild_type, mutations, alphabet=PROTEIN, first_position=1):
    """The sequence `wild_type` with `mutations` (a string in one of the notations, or Mutation
    objects) applied. A position past the sequence, or a wild-type residue that does not match
    it, is a ValueError naming the mutation and what the sequence holds there."""
    alphabet.codes(wild_type, record="wild_type")
    if isinstance(mutations, str):
        text = mutations
        mutations = parse_mutations(mutations, alphabet, first_position)
    else:
        text = ":".join(m.label(first_position) for m in mutations)
    residues = list(wild_type)
    for m in mutations:
        if not 0 <= m.index < len(residues):
            raise ValueError(f"{text!r}: {m.label(first_position)} is at position "
                             f"{m.index + first_position}, but the wild type has positions "
                             f"{first_position} .. {len(residues) + first_position - 1}")
        found = residues[m.index].upper()
        if found != m.wild:
            raise ValueError(f"{text!r}: {m.label(first_position)} expects {m.wild!r} at "
                             f"position {m.index + first_position}, but the wild type holds "
                             f"{found!r} there (check the numbering: first_position="
                             f"{first_position})")
        residues[m.index] = m.mutant
    return "".join(residues)


def mutations_between(wild_type, variant, first_position=1):
    """The substitutions that turn `wild_type` into `variant` (sequences of one length), as the
    short notation joined by ``:`` (``""`` for the wild type itself)."""
    if len(wild_type) != len(variant):
        raise ValueError(f"the variant has {len(variant)} residues and the wild type "
                         f"{len(wild_type)}; substitutions keep the length")
    return ":".join(f"{w}{i + first_position}{v}" for i, (w, v) in
                    enumerate(zip(wild_type.upper(), variant.upper())) if w != v)


def single_mutants(wild_type, alphabet=PROTEIN, first_position=1, stops=True):
    """Every single substitution of `wild_type` in the short notation (``M1A``, ``M1C``, ...),
    position by position, residues in the alphabet's order, then the stop (with `stops` and an
    alphabet that has one): what an in-silico scan predicts."""
    alphabet.codes(wild_type, record="wild_type")
    targets = alphabet.residues + (alphabet.stop[:1] if stops else "")
    return [f"{w}{i + first_position}{m}" for i, w in enumerate(wild_type.upper())
            for m in targets if m != w]
