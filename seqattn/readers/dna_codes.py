"""DNA letters as uint8 codes, the storage of the genome Dataset's ``sequence`` variable.

Codes 0-3 = A, C, G, T, 4 = N, 5-14 = the other IUPAC codes R Y S W K M B D H V, +16 = soft-masked
(lower case, repeats), 255 = no base (the end of a record shorter than the longest one). Every
conversion refuses what is not a base and names the record and position.
"""
import numpy as np

LETTERS = "ACGTNRYSWKMBDHV"  # code = index; codes >= 4 are ambiguous
N_CODE = 4
SOFT = 16  # added to the code of a lower-case (soft-masked) base
PAD = 255  # no base: past the end of a record
COMPLEMENT = dict(zip("ACGTNRYSWKMBDHV", "TGCANYRSWMKVHDB"))

CODE_OF_BYTE = np.full(256, PAD, np.uint8)  # PAD here marks "not a base letter"
for _code, _letter in enumerate(LETTERS):
    CODE_OF_BYTE[ord(_letter)] = _code
    CODE_OF_BYTE[ord(_letter.lower())] = _code + SOFT
VALID_CODE = np.zeros(256, bool)
VALID_CODE[: len(LETTERS)] = VALID_CODE[SOFT: SOFT + len(LETTERS)] = VALID_CODE[PAD] = True
_LETTER_OF_CODE = {c: l for c, l in enumerate(LETTERS)}
_LETTER_OF_CODE.update({c + SOFT: l.lower() for c, l in enumerate(LETTERS)})


def reverse_complement(sequence):
    """The reverse complement of a DNA string (IUPAC codes complemented, case kept).

    Parameters
    ----------
    sequence : str
        DNA letters (A, C, G, T, N and the other IUPAC codes, upper or lower case).

    Returns
    -------
    str
        The reverse complement.
    """
    table = str.maketrans({**COMPLEMENT, **{k.lower(): v.lower() for k, v in COMPLEMENT.items()}})
    return sequence.translate(table)[::-1]


def codes_of(sequence, record="sequence"):
    """uint8 codes (L,) of a DNA string; an invalid character is a ValueError naming `record`
    and the 0-based position.

    Parameters
    ----------
    sequence : str, length L
        DNA letters (upper case, or lower case for soft-masked bases).
    record : str, default "sequence"
        The record's name, for the error message.

    Returns
    -------
    numpy.ndarray of uint8, shape (L,)
        The codes (module docstring).
    """
    try:
        raw = np.frombuffer(sequence.encode("ascii"), np.uint8)
    except UnicodeEncodeError as e:
        _invalid(record, e.start, sequence[e.start])
    codes = CODE_OF_BYTE[raw]
    bad = np.flatnonzero(codes == PAD)
    if bad.size:
        _invalid(record, int(bad[0]), sequence[bad[0]])
    return codes


def _invalid(record, position, character):
    raise ValueError(f"record {record!r}, position {position} (0-based): {character!r} is not a "
                     f"DNA base or IUPAC code (one of {' '.join(LETTERS)}, upper or lower case)")


def letters_of(codes):
    """The DNA string of uint8 codes (the inverse of :func:`codes_of`); padding is dropped.

    Parameters
    ----------
    codes : array_like of uint8, shape (L,)
        Base codes (module docstring); 255 is padding.

    Returns
    -------
    str
        The letters, lower case for soft-masked bases.
    """
    return "".join(_LETTER_OF_CODE[int(c)] for c in np.asarray(codes) if c != PAD)


def plain(value):
    """A NumPy scalar as the Python value it holds (so messages read 's2', not np.str_('s2'))."""
    return value.item() if isinstance(value, np.generic) else value


def as_codes(values, name=None):
    """uint8 codes of an array of base letters (str/bytes) or of codes; an invalid element is a
    ValueError naming its record and position (`name(index)` says where an element is).

    Parameters
    ----------
    values : array_like of str, bytes or int, any shape
        One letter per element, or codes (module docstring).
    name : callable or None, default None
        ``name(index)`` says where the element at that index tuple is, for the error message;
        None: its position along the last axis.

    Returns
    -------
    numpy.ndarray of uint8, the shape of ``values``
        The codes.
    """
    values = np.asarray(values)
    if values.dtype.kind in "USO":
        text = values.astype(str)
        try:
            raw = text.astype("S1")
        except UnicodeEncodeError:  # a non-ASCII letter: find it below
            raw = np.char.encode(text, "ascii", "replace").astype("S1")
        codes = CODE_OF_BYTE[raw.view(np.uint8).reshape(values.shape)]
        bad = (codes == PAD) | (np.char.str_len(text) != 1)
    elif values.dtype.kind in "ui":
        codes = values.astype(np.uint8)
        bad = (values < 0) | (values > 255) | ~VALID_CODE[codes]
    else:
        raise TypeError(f"bases must be letters (str or bytes) or uint8 codes, got dtype "
                        f"{values.dtype}")
    if bad.any():
        index = tuple(int(i) for i in np.argwhere(bad)[0])
        where = name(index) if name else f"position {index[-1]}"
        raise ValueError(f"{where}: {plain(values[index])!r} is not a DNA "
                         f"base or IUPAC code (letters {' '.join(LETTERS)} in either case, or "
                         f"uint8 codes 0-{len(LETTERS) - 1}, +{SOFT} soft-masked, {PAD} none)")
    return codes
