"""Structured attention biases: computed inside the attention kernels from per-token data.

A dense float bias costs B x H x N x M floats and as much again for its gradient. The two biases
here are evaluated tile by tile inside the fused attention kernels from O(N + M) data per batch,
forward and backward, so memory stays O(N + M) per batch and head.

* :class:`DistanceBias`: ``score(h, i, j) += f_h(d_ij)`` with ``d_ij = |x_i - y_j|`` (minimum
  image in a periodic cell), f_h a learnable table over distance bins, optional per atom-type
  pair.
* :class:`PairBias`: score(h, i, j) += table[h, code_ij] with an integer code per pair, given as
  an array (graph hops, edge types) or computed from per-token integers (a clipped relative
  offset, so nothing N x M is stored).

Pass them to ``seqattn.ops.attention(..., distance_bias=..., pair_bias=...)`` and, with the same
objects, to ``attention_backward``, whose result then carries the gradients of the tables and of
the positions (:class:`DistanceBiasGradients`, :class:`PairBiasGradients`).

:func:`prepare_distance_bias` and :func:`prepare_pair_bias` check the arguments and return the
canonical form the kernels read (:class:`DistanceCall`, :class:`PairCall`); absent biases become
placeholders with ``has = False`` so that each dtype compiles one kernel signature.
"""
from collections import namedtuple
from dataclasses import dataclass
import functools
import itertools
import math
import numbers

import numpy as np

from ..backend import CUDA, empty_like_on
from ..kernels.structured_bias_math import (CODE_ARRAY, NO_PAIR, NOT_PERIODIC, ORTHORHOMBIC,
                                            RELATIVE_OFFSET, TRICLINIC)
from .checks import FLOAT_DTYPES, shape_of

CODE_DTYPES = (np.dtype(np.int8), np.dtype(np.int16), np.dtype(np.int32))


@dataclass(frozen=True, eq=False)
class DistanceBias:
    """score(h, i, j) += f_h(d_ij): a learnable function of the distance between two tokens.

    Shapes: x (B, N, 3) query positions; y (B, M, 3) key positions, or None for self-attention
    (then y = x and N == M). ``d_ij = |x_i - y_j|``; with ``cell`` (B, 3, 3) or (3, 3), whose
    rows are the lattice vectors, d_ij is the minimum-image distance: orthorhombic cells exactly,
    other (triclinic) cells by searching the 27 images around the wrapped displacement, which is
    exact for reduced cells (e.g. after a Niggli reduction) and for any cell once d is below half
    the smallest distance between lattice planes.

    ``table`` (H, C) holds f_h at C >= 2 equally spaced distances 0, r_max / (C - 1), ..., r_max;
    f_h is linearly interpolated between them and constant (the last entry) beyond r_max. With
    ``types`` (B, N) small non-negative ints (and ``key_types`` (B, M) when y is given), the table
    is (T, T, H, C) and pair (type_i, type_j) uses table[type_i, type_j].

    ``cutoff``: keys farther than it are hidden from the query (-inf score: neighbour attention).
    ``smooth_cutoff=True`` (needs ``cutoff``) also multiplies each attention weight by the cosine
    envelope 0.5 (1 + cos(pi d / cutoff)), i.e. adds log of it to the score, so weights fall to
    zero continuously at the cutoff and the attention output is smooth in the positions.

    A position containing NaN hides the pair (as a mask would); a query that sees nothing returns
    zeros. Gradients w.r.t. positions (forces) are those of d; at d = 0 (a token and itself) the
    direction is undefined and contributes zero.

    Parameters
    ----------
    x : array (B, N, 3)
        Query positions.
    table : array (H, C) or (T, T, H, C)
        f_h at C equally spaced distances, per head (and per pair of types).
    r_max : float
        The distance of the table's last entry.
    y : array (B, M, 3), optional
        Key positions; None for self-attention.
    types : int array (B, N), optional
        Query token types, for a per-type-pair table.
    key_types : int array (B, M), optional
        Key token types, when ``y`` is given.
    cell : array (B, 3, 3) or (3, 3), optional
        Lattice vectors as rows, for minimum-image distances.
    cutoff : float, optional
        Keys farther than this are hidden.
    smooth_cutoff : bool, default False
        Fade the weights to zero at ``cutoff`` with a cosine envelope.
    """

    x: object
    table: object
    r_max: float
    y: object = None
    types: object = None
    key_types: object = None
    cell: object = None
    cutoff: float = None
    smooth_cutoff: bool = False


@dataclass(frozen=True, eq=False)
class PairBias:
    """score(h, i, j) += table[h, code_ij]: a learnable per-head table indexed by pair codes.

    ``table`` (H, C). ``codes`` (B, N, M) or (N, M) of dtype int8, int16 or int32, with values
    < C: shortest-path hops, edge types. A negative code means "not connected" and hides the key
    from the query (-inf, like False in attn_mask); give unconnected pairs a code of their own
    when they should stay visible with a learnable bias.

    Build the relative-position form with :meth:`relative`, which stores no N x M array.

    Parameters
    ----------
    table : array (H, C)
        The bias per head and code.
    codes : int8, int16 or int32 array (B, N, M) or (N, M), optional
        A code per pair (negative: hidden).
    query_positions : int array (B, N) or (N,), optional
        Query positions, for the relative form.
    key_positions : int array (B, M) or (M,), optional
        Key positions, for the relative form.
    relative_form : bool, default False
        Codes from clipped relative positions instead of ``codes`` (set by :meth:`relative`).
    """

    table: object
    codes: object = None
    query_positions: object = None
    key_positions: object = None
    relative_form: bool = False

    @classmethod
    def relative(cls, table, query_positions=None, key_positions=None):
        """code_ij = clip(p_j - p_i, -R, R) + R with C = 2 R + 1 (table (H, C), C odd).

        ``query_positions`` (B, N) or (N,) and ``key_positions`` (B, M) or (M,) are integers;
        by default query i sits at i + M - N and key j at j (aligned like ``causal``).
        """
        return cls(table, query_positions=query_positions, key_positions=key_positions,
                   relative_form=True)


DistanceBiasGradients = namedtuple("DistanceBiasGradients", "table x y")
DistanceBiasGradients.__doc__ = (
    "Gradients of a DistanceBias: ``table`` shaped like its table; ``x`` (B, N, 3); ``y`` "
    "(B, M, 3), or None in self-attention, where ``x`` holds the whole gradient of the shared "
    "positions (query and key parts added).\n\n"
    "Parameters\n"
    "----------\n"
    "table : array (H, C) or (T, T, H, C)\n"
    "    dLoss/dtable, shaped like the bias's table.\n"
    "x : array (B, N, 3)\n"
    "    dLoss/dx, the gradient of the query positions (of all positions in self-attention).\n"
    "y : array (B, M, 3) or None\n"
    "    dLoss/dy, the gradient of the key positions; None in self-attention.\n")
PairBiasGradients = namedtuple("PairBiasGradients", "table")
PairBiasGradients.__doc__ = (
    "Gradient of a PairBias's table, shaped (H, C) like the table.\n\n"
    "Parameters\n"
    "----------\n"
    "table : array (H, C)\n"
    "    dLoss/dtable: one value per head and pair code.\n")

DistanceCall = namedtuple(
    "DistanceCall",
    "has x y table types_q types_k n_types has_types cell inv_cell images periodic r_max cutoff "
    "smooth self_attention table_shape position_dtype",
)
DistanceCall.__doc__ = """A checked DistanceBias in kernel form.

x (B, 3, N) and y (B, 3, M): positions coordinate-major, in q's dtype; table (H, P, C) with
P = n_types**2 pairs (pair p = type_i * n_types + type_j); types_q (B, N), types_k (B, M) int32;
cell, inv_cell (B, 3, 3); images (B, I, 3) lattice translations searched for the nearest image
(only the zero shift unless triclinic); periodic one of NOT_PERIODIC, ORTHORHOMBIC, TRICLINIC;
cutoff inf when absent. table_shape and position_dtype restore the user's layout of gradients."""

PairCall = namedtuple("PairCall",
                      "mode codes query_positions key_positions table max_offset")
PairCall.__doc__ = """A checked PairBias in kernel form: mode NO_PAIR, CODE_ARRAY or
RELATIVE_OFFSET; codes (Bc, N, M) int8/16/32 with Bc 1 or B; query_positions (Bp, N) and
key_positions (Bp, M) int32 with Bp 1 or B; table (H, C); max_offset R of the relative form."""


def bias_arrays(distance_bias, pair_bias):
    """The arrays inside the structured biases, by argument name, for the device check."""
    named = {}
    for prefix, bias in (("distance_bias", distance_bias), ("pair_bias", pair_bias)):
        if bias is not None and hasattr(bias, "__dataclass_fields__"):
            for field in bias.__dataclass_fields__:
                value = getattr(bias, field)
                if hasattr(value, "shape"):
                    named[f"{prefix}.{field}"] = value
    return named


def _to_host(x):
    return x.copy_to_host() if hasattr(x, "copy_to_host") else np.asarray(x)


def _on(device, x):
    """A host array moved to ``device`` (a contiguous copy either way: user data stays as is)."""
    if device == CUDA:
        from numba import cuda

        return cuda.to_device(np.ascontiguousarray(x))
    return np.array(x, order="C")  # one copy, where a contiguous copy of a view copied twice


def _float_array(name, x, dtype=None):
    x = _to_host(x)
    if np.dtype(x.dtype) not in FLOAT_DTYPES:
        raise TypeError(f"{name} has dtype {x.dtype}; expected float32 or float64")
    if dtype is not None and np.dtype(x.dtype) != dtype:
        raise TypeError(f"{name} has dtype {x.dtype} but q has dtype {dtype}; cast it to "
                        f"q's dtype (e.g. {name}.astype(q.dtype))")
    return x


def _int_array(name, x, shape, legend, upper=None):
    """x as int32, of ``shape`` (or broadcastable in its leading dim), values in [0, upper)."""
    x = _to_host(x)
    if not np.issubdtype(x.dtype, np.integer):
        raise TypeError(f"{name} has dtype {x.dtype}; expected integers")
    if shape_of(x) not in shape:
        raise ValueError(f"{name} has shape {shape_of(x)}; expected {legend}")
    if upper is not None and x.size and (x.min() < 0 or x.max() >= upper):
        raise ValueError(f"{name} has values in [{x.min()}, {x.max()}]; expected 0 <= "
                         f"{name} < {upper} (the table's number of types)")
    return x.astype(np.int32)


def _positions(name, x, B, n, dtype):
    x = _float_array(name, x)
    if shape_of(x) != (B, n, 3):
        raise ValueError(f"{name} has shape {shape_of(x)}; expected (B, {'N' if name == 'x' else 'M'}"
                         f", 3) = {(B, n, 3)}")
    return np.ascontiguousarray(x.transpose(0, 2, 1), dtype=dtype)


def _cell(cell, B, dtype):
    """(cell (B, 3, 3), inverse, images (B, I, 3), periodicity) for a checked cell."""
    cell = _float_array("cell", cell).astype(np.float64)
    if shape_of(cell) == (3, 3):
        cell = np.broadcast_to(cell, (B, 3, 3))
    if shape_of(cell) != (B, 3, 3):
        raise ValueError(f"cell has shape {shape_of(cell)}; expected (B, 3, 3) = {(B, 3, 3)} or "
                         "(3, 3), rows the lattice vectors")
    # every layer of a model, and each pass of a step on forces, brings the batch's cells
    # again: their inverses and images are looked up by the cells' values (callers copy them)
    return _cell_of_values(np.ascontiguousarray(cell).tobytes(), B, np.dtype(dtype))


@functools.lru_cache(maxsize=64)
def _cell_of_values(values, B, dtype):
    """_cell's work on cells (B, 3, 3) given as the bytes of their float64 values."""
    cell = np.frombuffer(values, np.float64).reshape(B, 3, 3)
    if not np.isfinite(cell).all() or np.any(np.abs(np.linalg.det(cell)) == 0):
        raise ValueError("cell must be finite with non-zero volume (rows: lattice vectors)")
    off_diagonal = cell * (1 - np.eye(3))
    periodic = ORTHORHOMBIC if not off_diagonal.any() else TRICLINIC
    shifts = [(0, 0, 0)]
    if periodic == TRICLINIC:
        shifts += [n for n in itertools.product((-1, 0, 1), repeat=3) if any(n)]
    images = np.einsum("in,bnk->bik", np.array(shifts, np.float64), cell)
    arrays = (cell.astype(dtype), np.linalg.inv(cell).astype(dtype), images.astype(dtype))
    for a in arrays:  # shared by every call with these cells
        a.setflags(write=False)
    return (*arrays, periodic)


# The placeholders stand in for an absent bias (the kernels never read them), so each is made
# once per (device, dtype) and shared by every attention call, as backend.placeholder_on does:
# allocating their arrays anew took microseconds on each call.
@functools.lru_cache(maxsize=None)
def _distance_placeholder(device, dtype):
    empty = lambda shape, dt=dtype: empty_like_on(device, shape, dt)  # noqa: E731
    return DistanceCall(False, empty((1, 3, 1)), empty((1, 3, 1)), empty((1, 1, 2)),
                        empty((1, 1), np.int32), empty((1, 1), np.int32), 1, False,
                        empty((1, 3, 3)), empty((1, 3, 3)), empty((1, 1, 3)), NOT_PERIODIC,
                        1.0, math.inf, False, False, None, None)


def prepare_distance_bias(bias, device, dtype, B, H, N, M):
    """A :class:`DistanceCall` for ``bias`` (a DistanceBias or None) in an attention of these
    sizes; arrays end up on ``device`` in q's ``dtype``."""
    if bias is None:
        return _distance_placeholder(device, dtype)
    if not isinstance(bias, DistanceBias):
        raise TypeError(f"distance_bias must be a DistanceBias, got {type(bias).__name__}")
    self_attention = bias.y is None
    if self_attention and N != M:
        raise ValueError(f"distance_bias has no y (key positions), which means self-attention, "
                         f"but q has N={N} and k has M={M}; pass y=key positions (B, M, 3)")
    x = _positions("x", bias.x, B, N, dtype)
    x_dtype = np.dtype(_to_host(bias.x).dtype)
    y = x if self_attention else _positions("y", bias.y, B, M, dtype)
    if not isinstance(bias.r_max, numbers.Real) or not bias.r_max > 0 \
            or not math.isfinite(bias.r_max):
        raise ValueError(f"r_max must be a positive finite number, got {bias.r_max!r}")
    table = _float_array("distance_bias.table", bias.table, dtype)
    has_types = bias.types is not None
    if has_types:
        if table.ndim != 4 or table.shape[0] != table.shape[1] or table.shape[2] != H:
            raise ValueError(f"distance_bias.table has shape {shape_of(table)}; with types it "
                             f"must be (T, T, H, C) with H = {H}")
        n_types = int(table.shape[0])
        types_q = _int_array("types", bias.types, [(B, N)], f"(B, N) = {(B, N)}", n_types)
        if self_attention:
            types_k = types_q
        elif bias.key_types is None:
            raise ValueError("distance_bias has types and y but no key_types; pass key_types "
                             "(B, M), the types of the key tokens")
        else:
            types_k = _int_array("key_types", bias.key_types, [(B, M)], f"(B, M) = {(B, M)}",
                                 n_types)
        kernel_table = table.transpose(2, 0, 1, 3).reshape(H, n_types * n_types, -1)
    else:
        if bias.key_types is not None:
            raise ValueError("distance_bias has key_types but no types; pass both or neither")
        if table.ndim != 2 or table.shape[0] != H:
            raise ValueError(f"distance_bias.table has shape {shape_of(table)}; expected (H, C) "
                             f"with H = {H} (or (T, T, H, C) with types)")
        n_types = 1
        types_q = types_k = np.zeros((1, 1), np.int32)
        kernel_table = table.reshape(H, 1, -1)
    if kernel_table.shape[2] < 2:
        raise ValueError(f"distance_bias.table has {kernel_table.shape[2]} distance bins; "
                         "expected C >= 2 (values at 0 and at r_max at least)")
    cutoff = math.inf
    if bias.cutoff is not None:
        if not isinstance(bias.cutoff, numbers.Real) or not bias.cutoff > 0:
            raise ValueError(f"cutoff must be a positive number or None, got {bias.cutoff!r}")
        cutoff = float(bias.cutoff)
    if bias.smooth_cutoff and bias.cutoff is None:
        raise ValueError("smooth_cutoff=True needs a cutoff radius (cutoff=...)")
    if bias.cell is None:
        cell = inv_cell = np.zeros((1, 3, 3), dtype)
        images = np.zeros((1, 1, 3), dtype)
        periodic = NOT_PERIODIC
    else:
        cell, inv_cell, images, periodic = _cell(bias.cell, B, dtype)
    arrays = [_on(device, a) for a in (x, y, kernel_table, types_q, types_k, cell, inv_cell,
                                       images)]
    if self_attention:
        arrays[1] = arrays[0]
    return DistanceCall(True, *arrays[:5], n_types, has_types, *arrays[5:], periodic,
                        float(bias.r_max), cutoff, bool(bias.smooth_cutoff), self_attention,
                        shape_of(table), x_dtype)


@functools.lru_cache(maxsize=None)
def _pair_placeholder(device, dtype):
    return PairCall(NO_PAIR, empty_like_on(device, (1, 1, 1), np.int8),
                    empty_like_on(device, (1, 1), np.int32),
                    empty_like_on(device, (1, 1), np.int32), empty_like_on(device, (1, 1), dtype),
                    0)


def _relative_positions(name, p, B, n, default):
    if p is None:
        return default.reshape(1, n).astype(np.int32)
    p = _int_array(name, p, [(n,), (B, n)], f"({'N' if 'query' in name else 'M'},) or "
                   f"(B, {'N' if 'query' in name else 'M'}) = {(B, n)}")
    return p.reshape(-1, n)


def prepare_pair_bias(bias, device, dtype, B, H, N, M):
    """A :class:`PairCall` for ``bias`` (a PairBias or None) in an attention of these sizes."""
    if bias is None:
        return _pair_placeholder(device, dtype)
    if not isinstance(bias, PairBias):
        raise TypeError(f"pair_bias must be a PairBias, got {type(bias).__name__}")
    table = _float_array("pair_bias.table", bias.table, dtype)
    if table.ndim != 2 or table.shape[0] != H or table.shape[1] < 1:
        raise ValueError(f"pair_bias.table has shape {shape_of(table)}; expected (H, C) with "
                         f"H = {H}")
    C = int(table.shape[1])
    no_codes = np.zeros((1, 1, 1), np.int8)
    if bias.relative_form:
        if C % 2 == 0:
            raise ValueError(f"pair_bias.table has C={C} codes; the relative form needs an odd "
                             "C = 2 R + 1 (offsets -R..R)")
        qp = _relative_positions("query_positions", bias.query_positions, B, N,
                                 np.arange(N) + (M - N))
        kp = _relative_positions("key_positions", bias.key_positions, B, M, np.arange(M))
        if qp.shape[0] != kp.shape[0]:  # one per batch on one side: give both sides B rows
            qp, kp = np.broadcast_to(qp, (B, N)), np.broadcast_to(kp, (B, M))
        arrays = (no_codes, qp, kp)
        mode, max_offset = RELATIVE_OFFSET, (C - 1) // 2
    else:
        if bias.codes is None:
            raise ValueError("PairBias needs codes (B, N, M) or (N, M); use PairBias.relative "
                             "for codes computed from positions")
        on_device = hasattr(bias.codes, "copy_to_host")
        codes = bias.codes if on_device else np.asarray(bias.codes)
        if np.dtype(codes.dtype) not in CODE_DTYPES:
            raise TypeError(f"pair_bias.codes has dtype {np.dtype(codes.dtype)}; expected int8, "
                            "int16 or int32")
        if shape_of(codes) not in ((N, M), (B, N, M)):
            raise ValueError(f"pair_bias.codes has shape {shape_of(codes)}; expected (B, N, M) "
                             f"= {(B, N, M)} or (N, M)")
        if not on_device and codes.size and codes.max() >= C:
            raise ValueError(f"pair_bias.codes has a largest code {codes.max()}, but the table "
                             f"has C={C} codes; codes must be < C (negative = not connected)")
        codes = codes.reshape((-1, N, M))
        arrays = (codes, np.zeros((1, 1), np.int32), np.zeros((1, 1), np.int32))
        mode, max_offset = CODE_ARRAY, 0
    if device == CUDA and hasattr(arrays[0], "copy_to_host"):
        moved = [arrays[0]] + [_on(device, a) for a in arrays[1:]]
    else:
        moved = [a if hasattr(a, "copy_to_host") else _on(device, a) for a in arrays]
    return PairCall(mode, *moved, _on(device, table), max_offset)


def distance_gradients(call, dtable, dx, dy):
    """The user-facing :class:`DistanceBiasGradients` from kernel-layout gradients.

    dtable (H, P, C); dx (B, 3, N) and dy (B, 3, M) on the host, or None (positions that need
    no gradient: then the gradients' x and y are None).
    """
    shape = call.table_shape
    if call.has_types:
        T = shape[0]
        table = dtable.reshape(shape[2], T, T, shape[3]).transpose(1, 2, 0, 3)
    else:
        table = dtable.reshape(shape)
    if dx is None:
        return DistanceBiasGradients(np.ascontiguousarray(table), None, None)
    gx = dx.transpose(0, 2, 1)
    gy = dy.transpose(0, 2, 1)
    if call.self_attention:
        gx, gy = gx + gy, None
    cast = lambda a: None if a is None else np.ascontiguousarray(a, call.position_dtype)  # noqa
    return DistanceBiasGradients(np.ascontiguousarray(table), cast(gx), cast(gy))
