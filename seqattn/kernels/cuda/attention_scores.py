"""Attention scores on NVIDIA GPUs: every score modification, in one place (``score_at``).

The CUDA attention kernels (``cuda/attention.py``, ``cuda/attention_forward.py``) compute the dot
products of a tile of queries and keys and ask :func:`score_functions` for everything else: the
band (causal masks, windows), key padding, attn_mask, dense bias, ALiBi and the structured biases
(distances and pair codes, with the per-pair formulas of ``kernels/structured_bias_math``), and
for the structured biases' gradients. The kernels receive the modifications as one tuple,
``mods``, built by :func:`score_args`.

Scores are kept in units of log2: the kernels fold scale * log2(e) into q, and the softmax takes
exp2 (one multiply fewer per score than exp, which multiplies by log2(e) itself); the saved
log-sum-exp stays in natural units.

The structured biases' tables receive their gradients from every (query, key) pair; they are
summed as 64-bit fixed-point integers (``structured_grads``), so that they are the same bits
whatever order the atomics land in.
"""
import collections
import functools
import math

import numba
import numpy as np
from numba import cuda

from .. import structured_bias_math as sbm

NEG_INF = -math.inf  # score of a key a query may not see; lse of a row that sees no key
LOG2E = math.log2(math.e)

_fractional = cuda.jit(device=True)(sbm.fractional)
_cartesian = cuda.jit(device=True)(sbm.cartesian)
_nearest_image = cuda.jit(device=True)(sbm.nearest_image)
_table_coordinate = cuda.jit(device=True)(sbm.table_coordinate)
_log_envelope = cuda.jit(device=True)(sbm.log_cosine_envelope)
_log_envelope_grad = cuda.jit(device=True)(sbm.log_cosine_envelope_grad)

# Positions in the tuple score_args builds: the dense modifications, then the distance bias's
# fields, then the pair bias's. Plain names, since numba.cuda folds a global used as an index
# into a constant but not an expression such as DISTANCE_AT + 1.
DENSE_FIELDS = 11
SCALE, LEFT, RIGHT = 4, 5, 6
(D_HAS, D_X, D_Y, D_TABLE, D_TYPES_Q, D_TYPES_K, D_N_TYPES, D_HAS_TYPES, D_CELL, D_INV_CELL,
 D_IMAGES, D_PERIODIC, D_INV_STEP, D_LAST, D_CUTOFF, D_SMOOTH, D_SMOOTH_A) = range(11, 28)
P_MODE, P_CODES, P_QUERY_POSITIONS, P_KEY_POSITIONS, P_TABLE, P_MAX_OFFSET = range(28, 34)


def score_args(call):
    """The tuple ``mods`` that defines each score (see ``score_at``), scalars in the q dtype:
    bias, attn_mask, key_padding_mask, alibi_slopes, scale, left, right, has_bias, has_mask,
    has_kpm, has_alibi; then the distance bias (has, x, y, table, types_q, types_k, n_types,
    has_types, cell, inv_cell, images, periodic, inv_step, last, cutoff, smooth, smooth_a);
    then the pair bias (mode, codes, query_positions, key_positions, table, max_offset)."""
    f = np.dtype(call.q.dtype).type
    d, p = call.distance, call.pair
    C = int(d.table.shape[2])
    return (call.bias, call.attn_mask, call.key_padding_mask, call.alibi_slopes, f(call.scale),
            call.left, call.right, call.has_bias, call.has_mask, call.has_kpm, call.has_alibi,
            d.has, d.x, d.y, d.table, d.types_q, d.types_k, d.n_types, d.has_types, d.cell,
            d.inv_cell, d.images, d.periodic, f((C - 1) / d.r_max), f(C - 1), f(d.cutoff),
            d.smooth, f(math.pi / (2 * d.cutoff)),
            p.mode, p.codes, p.query_positions, p.key_positions, p.table, p.max_offset)


ScoreFunctions = collections.namedtuple(
    "ScoreFunctions", "score_at modified structured_grads position_grads displacement "
    "distance_position_grad key_tiles query_tiles band_covers_tile")


@functools.lru_cache(maxsize=None)
def score_functions(dtype_name):
    """The device functions that define and differentiate the scores, for one float dtype
    (dtype-typed constants keep float32 code in float32)."""
    ftype = np.dtype(dtype_name).type
    zero, one, two, half = ftype(0), ftype(1), ftype(2), ftype(0.5)
    neg_inf = ftype(NEG_INF)
    log2e = ftype(LOG2E)
    device = cuda.jit(device=True)

    @device
    def floor(x):
        """floor(x) in the kernel's dtype (math.floor returns an int64)."""
        return ftype(math.floor(x))

    @device
    def displacement(b, i, j, mods):
        """(x_i - y_j by the minimum image, its length) for the distance bias."""
        x, y = mods[D_X], mods[D_Y]
        cell, inv_cell, images = mods[D_CELL], mods[D_INV_CELL], \
            mods[D_IMAGES]
        periodic = mods[D_PERIODIC]
        rx = x[b, 0, i] - y[b, 0, j]
        ry = x[b, 1, i] - y[b, 1, j]
        rz = x[b, 2, i] - y[b, 2, j]
        if periodic != sbm.NOT_PERIODIC:
            fx, fy, fz = _fractional(rx, ry, rz, inv_cell, b)
            rx, ry, rz = _cartesian(fx - floor(fx + half), fy - floor(fy + half),
                                    fz - floor(fz + half), cell, b)
            if periodic == sbm.TRICLINIC:
                rx, ry, rz = _nearest_image(rx, ry, rz, images, b)
        return rx, ry, rz, math.sqrt(rx * rx + ry * ry + rz * rz)

    @device
    def distance_entry(b, i, j, d, mods):
        """(pair p, bin c, weight w): f = (1 - w) table[h, p, c] + w table[h, p, c + 1]."""
        types_q, types_k = mods[D_TYPES_Q], mods[D_TYPES_K]
        p = 0
        if mods[D_HAS_TYPES]:
            p = types_q[b, i] * mods[D_N_TYPES] + types_k[b, j]
        u = _table_coordinate(d, mods[D_INV_STEP], mods[D_LAST])
        lower = min(floor(u), mods[D_LAST] - one)
        return p, int(lower), u - lower

    @device
    def distance_value(b, h, i, j, mods):
        """f_h(d_ij), or NEG_INF beyond the cutoff (and for NaN positions)."""
        rx, ry, rz, d = displacement(b, i, j, mods)
        if not d <= mods[D_CUTOFF]:
            return neg_inf
        table = mods[D_TABLE]
        p, c, w = distance_entry(b, i, j, d, mods)
        value = table[h, p, c] + w * (table[h, p, c + 1] - table[h, p, c])
        if mods[D_SMOOTH]:
            value += _log_envelope(d, mods[D_SMOOTH_A], two)
        return value

    @device
    def pair_code(b, i, j, mods):
        """The pair bias's code of (i, j); negative means hidden."""
        if mods[P_MODE] == sbm.CODE_ARRAY:
            codes = mods[P_CODES]
            return int(codes[min(b, codes.shape[0] - 1), i, j])
        query_positions, key_positions = mods[P_QUERY_POSITIONS], mods[P_KEY_POSITIONS]
        bp = min(b, query_positions.shape[0] - 1)
        max_offset = mods[P_MAX_OFFSET]
        offset = key_positions[bp, j] - query_positions[bp, i]
        return min(max(offset, -max_offset), max_offset) + max_offset

    @device
    def score_at(dot, b, h, i, j, n_q, n_k, mods):
        """Score of query i and key j, in units of log2 (exp2 of it is the softmax's weight),
        from their scaled dot product ``dot`` = scale * log2(e) * q_i . k_j; or NEG_INF where
        j is hidden.

        The one place a score is modified: the modifications are in natural units and are
        multiplied by log2(e) once. A dim of size 1 in bias or attn_mask is broadcast by
        clamping the index to 0.
        """
        bias, attn_mask, key_padding_mask, alibi_slopes, scale, left, right, has_bias, \
            has_mask, has_kpm, has_alibi = mods[:DENSE_FIELDS]
        aligned = i + n_k - n_q  # the query's position on the key axis (bottom-right alignment)
        if j < aligned - left or j > aligned + right:
            return neg_inf
        if has_kpm and key_padding_mask[b, j]:
            return neg_inf
        if has_mask and not attn_mask[min(b, attn_mask.shape[0] - 1),
                                      min(h, attn_mask.shape[1] - 1),
                                      min(i, attn_mask.shape[2] - 1),
                                      min(j, attn_mask.shape[3] - 1)]:
            return neg_inf
        added = zero
        if has_bias:
            added += bias[min(b, bias.shape[0] - 1), min(h, bias.shape[1] - 1),
                          min(i, bias.shape[2] - 1), min(j, bias.shape[3] - 1)]
        if has_alibi:
            added -= alibi_slopes[h] * ftype(abs(aligned - j))
        if mods[D_HAS]:
            added += distance_value(b, h, i, j, mods)
        if mods[P_MODE] != sbm.NO_PAIR:
            code = pair_code(b, i, j, mods)
            if code < 0:
                return neg_inf
            pair_table = mods[P_TABLE]
            added += pair_table[h, min(code, pair_table.shape[1] - 1)]
        return dot + log2e * added

    @device
    def distance_position_grad(g, b, h, i, j, rx, ry, rz, d, mods):
        """g df_h(d)/dx_i for the displacement r = x_i - y_j of length d (-that for y_j)."""
        table, inv_step = mods[D_TABLE], mods[D_INV_STEP]
        p, c, w = distance_entry(b, i, j, d, mods)
        slope = zero  # constant beyond r_max
        if d * inv_step < mods[D_LAST]:
            slope = (table[h, p, c + 1] - table[h, p, c]) * inv_step
        if mods[D_SMOOTH]:
            slope += _log_envelope_grad(d, mods[D_SMOOTH_A], two)
        # forward: d = |x_i - y_j|  =>  dd/dx_i = r / d (zero at d = 0)
        coef = zero
        if d > zero:
            coef = g * slope / d
        return coef * rx, coef * ry, coef * rz

    @device
    def fixed_point(value, table_scale):
        """value * table_scale rounded to a 64-bit integer (see ``structured_grads``)."""
        return numba.int64(math.floor(value * table_scale + half))

    @device
    def position_grads(g, b, h, i, j, mods):
        """g df_h(d_ij)/dx_i = -g df_h(d_ij)/dy_j for g = dL/dscore of (i, j) under a distance
        bias, as three components."""
        rx, ry, rz, d = displacement(b, i, j, mods)
        return distance_position_grad(g, b, h, i, j, rx, ry, rz, d, mods)

    @device
    def structured_grads(g, b, h, i, j, mods, dtable, dpair, table_scale):
        """The tables' gradients from g = dL/dscore of (i, j), added with atomics into the
        int64 arrays dtable and dpair as fixed-point numbers of unit 1 / table_scale: integer
        addition does not depend on the order of the adds, so the sums are the same bits every
        run (``attention.attention_backward`` picks table_scale so that no sum can overflow).
        Returns :func:`position_grads` (0 without distances)."""
        gx = gy = gz = zero
        if mods[D_HAS]:
            rx, ry, rz, d = displacement(b, i, j, mods)
            p, c, w = distance_entry(b, i, j, d, mods)
            # forward: value = (1 - w) T[c] + w T[c + 1]
            cuda.atomic.add(dtable, (h, p, c), fixed_point(g - g * w, table_scale))
            cuda.atomic.add(dtable, (h, p, c + 1), fixed_point(g * w, table_scale))
            gx, gy, gz = distance_position_grad(g, b, h, i, j, rx, ry, rz, d, mods)
        if mods[P_MODE] != sbm.NO_PAIR:
            code = pair_code(b, i, j, mods)
            if code >= 0:
                cuda.atomic.add(dpair, (h, min(code, dpair.shape[1] - 1)),
                                fixed_point(g, table_scale))
        return gx, gy, gz

    @device
    def key_tiles(q0, block_q, block_k, n_q, n_k, left, right):
        """(first tile start, stop) of the key tiles of block_k keys that any row of the query
        tile of block_q rows from q0 may see."""
        first = max(0, q0 + n_k - n_q - left)
        last = min(n_k - 1, min(q0 + block_q, n_q) - 1 + n_k - n_q + right)
        if last < first:
            return 0, 0
        return first - first % block_k, last + 1

    @device
    def query_tiles(k0, block_q, block_k, n_q, n_k, left, right):
        """(first tile start, stop) of the query tiles of block_q rows whose rows may see a key
        of the key tile of block_k keys from k0."""
        first = max(0, k0 - (n_k - n_q) - right)
        last = min(n_q - 1, min(k0 + block_k, n_k) - 1 - (n_k - n_q) + left)
        if last < first:
            return 0, 0
        return first - first % block_q, last + 1

    @device
    def band_covers_tile(q0, block_q, k0, block_k, n_q, n_k, left, right):
        """True when every (query, key) of the tile is inside the arrays and the band."""
        aligned0 = q0 + n_k - n_q  # the first row's position on the key axis
        return (q0 + block_q <= n_q and k0 + block_k <= n_k
                and k0 >= aligned0 + block_q - 1 - left and k0 + block_k - 1 <= aligned0 + right)

    @device
    def modified(mods):
        """True unless every score is the plain scaled dot product (the band aside): kernels
        then skip ``score_at`` on tiles the band covers."""
        return (mods[7] or mods[8] or mods[9] or mods[10] or mods[D_HAS]
                or mods[P_MODE] != sbm.NO_PAIR)

    return ScoreFunctions(score_at, modified, structured_grads, position_grads, displacement,
                          distance_position_grad, key_tiles, query_tiles, band_covers_tile)
