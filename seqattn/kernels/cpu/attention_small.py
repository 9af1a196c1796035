"""Fused attention for short sequences on the CPU: one task per (batch, head), whole rows.

Legend: q (B, H, N, D); k, v (B, Hkv, M, D); query head h reads key/value head h // (H // Hkv);
off = M - N aligns the last query with the last key. Arguments are an ``AttentionCall`` already
checked by ``seqattn.ops.attention_inputs``.

At the lengths small models train on (up to a few hundred tokens, head dims of 4-32), the
tiled kernel of attention.py spends its time on what makes it fast at long sequences: panels of
k and v prepared per call, query blocks and key blocks, strips of rows. Here a task takes one
(batch, head) whole: the (N, M) score matrix is one tile, each of its products one call of the
register-blocked ``register_gemm`` (k and v transposed into (D, M) rows of the task's own where
a product runs along the keys), and a query's row of scores is complete at once: an exact
softmax (max, exp and sum over the row), no online rescaling. The same numbers come out (the
same masks, band, biases, scale, lse saved per row), within rounding. The scratch (transposed
k and v, score tiles) is allocated once per chunk of tasks, not per task; a chunk's work is an
@njit function of its own, which the serial and the parallel kernel call by symbol
(threads.py). With a key padding mask, a batch's tasks take its keys up to the last unpadded
one only (the score tile then has fewer columns): the keys after it add nothing to any output
or gradient.

Forward, per (b, h): S = scale q k^T; per query row i the dense score modifications (bias,
ALiBi, attn_mask, key padding) and the band (keys outside it -inf); m = max s_i,
p_i = exp(s_i - m), lse_i = m + log(sum p_i); out = (P v) / sum p row by row. A row that sees
no key gets zeros and -inf.

Backward, one task per (batch, kv head) so that the query heads sharing k and v add their dK and
dV into the task's own rows (no two tasks write the same memory: deterministic). Per query head:
P = exp(S - lse) recomputed (the same modifications; zeros for a row that saw no key),
dV += P^T dout, dS = P (dout v^T - delta) with delta_i = dout_i . out_i, dq = scale dS k,
dK += scale dS^T q (dK and dV summed transposed, then transposed into place).

The structured biases (distances, pair codes; attention_bias.py) are added to each (b, h) score
tile whole, and their gradients gathered from its dS tile into the task's own buffers, as the
tiled kernel does per tile (its flat ``mods`` tuple, the same per-task buffers and sum), but
for the distance table: a set of consecutive tasks adds into one copy (``task_parts``). A
distance bias takes its per-pair geometry from buffers filled once for the batch, which its heads,
the next layer and the backward share (batch_geometry.py). The op
(``seqattn.ops.attention``) sends the longer sequences (beyond MAX_LENGTH) to attention.py.
"""
import numpy as np
from numba import prange, types
from numba.extending import overload

from .attention import (PAIR_AT, STRUCTURED_AT, _mods, _structured_biases, _structured_parts,
                        _sum_structured_parts)
from .attention_bias import DistanceArgs, add_pair_bias, pair_bias_grads
from .batch_geometry import batch_view, shared_geometry
from .called_by_name import called_natively
from .distance_geometry import add_shared_distance_bias, shared_distance_bias_grads
from .float32_math import FASTMATH
from .gemm.register_gemm import (register_gemm, register_gemm_softmax_grad,
                                 register_gemm_untransposed, transpose)
from .jit_options import njit
from .softmax_rows import exp_shifted, row_max
from .threads import sized_kernel

NEG_INF = -np.inf

# This path serves calls whose longest length (N or M) is at most this, whatever the head dim.
# benchmarks/attention_short.py, one thread, forward and backward with padding masks: faster
# here than on the tiled kernel at every length measured up to 768 with head dims 8-64 and up
# to 512 with 128 and 256, level at 768 with those, and a tie or a loss from 1024 on
# (BENCHMARKS.md): the score tile a task keeps whole outgrows the caches with the length, not
# with the head dim. seqattn/compile.py's long job, which must reach the tiled kernel, runs
# beyond it (tests/kernels/test_first_run.py).
MAX_LENGTH = 768

# Multiply-adds of q k^T a thread must have before a launch takes it, as attention.py's GRAIN.
GRAIN = 2 ** 20


def _score_work(B, H, N, M, D):
    return B * H * N * M * D


@njit(cache=True, fastmath=FASTMATH)
def _add_dense_modifications(s, b, h, i, off, bias, attn_mask, alibi_slopes, has_bias,
                             has_mask, has_alibi):
    """Add the dense bias and ALiBi to the scores s (M,) of query i, and set the keys that
    attn_mask hides to -inf."""
    width = s.shape[0]
    if has_bias:
        # A dim of size 1 broadcasts: index 0 there.
        brow = bias[b if bias.shape[0] > 1 else 0, h if bias.shape[1] > 1 else 0,
                    i if bias.shape[2] > 1 else 0]
        if brow.shape[0] > 1:
            for c in range(width):
                s[c] += brow[c]
        else:
            for c in range(width):
                s[c] += brow[0]
    if has_alibi:
        slope = alibi_slopes[h]
        for c in range(width):
            s[c] -= slope * abs(i + off - c)
    if has_mask:
        mrow = attn_mask[b if attn_mask.shape[0] > 1 else 0,
                         h if attn_mask.shape[1] > 1 else 0,
                         i if attn_mask.shape[2] > 1 else 0]
        for c in range(width):
            if not mrow[c if mrow.shape[0] > 1 else 0]:
                s[c] = NEG_INF


def _add_dense_modifications_if_any(s, b, h, i, off, bias, attn_mask, alibi_slopes, has_bias,
                                    has_mask, has_alibi):
    """:func:`_add_dense_modifications` where the call has any (its arrays are given), nothing
    where it has none (its arrays are None: :func:`_mods_and_geometry`), chosen once per
    signature: the kernels of the calls without them, nearly all, compile none of their code."""
    raise NotImplementedError("callable from @njit code only")


@overload(_add_dense_modifications_if_any, inline="always")
def _choose_dense_modifications(s, b, h, i, off, bias, attn_mask, alibi_slopes, has_bias,
                                has_mask, has_alibi):
    if isinstance(bias, types.NoneType):
        return lambda s, b, h, i, off, bias, attn_mask, alibi_slopes, has_bias, has_mask, \
            has_alibi: None
    return lambda s, b, h, i, off, bias, attn_mask, alibi_slopes, has_bias, has_mask, \
        has_alibi: _add_dense_modifications(s, b, h, i, off, bias, attn_mask, alibi_slopes,
                                            has_bias, has_mask, has_alibi)


@njit(inline="always")
def _band(i, off, left, right, M):
    """[lo, hi): the keys query i may see through the band (causal and window)."""
    return max(0, i + off - left), min(M, i + off + right + 1)


# inlined: compiled apart, it would add a compilation to a first run
@njit(inline="always")
def _keys_of_task(padded, has_kpm, M, structured):
    """(keys, hide_padded) for the tasks of a batch whose key padding mask row is ``padded``
    (M,): their products take its first ``keys`` keys, those up to its last unpadded one (a
    padded key adds 0 to every sum it is in; test: key_padding_lengths in
    tests/helpers/attention_cases.py), all M where a structured bias is added (its geometry
    spans all keys); hide_padded: whether a padded key lies among them, so that the rows must
    hide it."""
    if not has_kpm:
        return M, False
    keys = M
    while keys > 0 and padded[keys - 1]:
        keys -= 1
    first = 0
    while first < keys and not padded[first]:
        first += 1
    if structured:
        keys = M
    return keys, first < keys


@njit(inline="always")
def _hide_keys(s, padded, hide_padded, lo, hi):
    """Set the scores s (keys,) of the keys outside the band [lo, hi) to -inf, and with
    ``hide_padded`` those of the padded keys (padded (M,) bool). Takes one row of the padding
    mask, not the call's arrays: inlined, each array it took cost reference counting per row
    (with all of them, as much as a third of the row's softmax; measured)."""
    if hide_padded:
        hidden = s.dtype.type(NEG_INF)
        for c in range(s.shape[0]):
            # a select, not a branch: the loop stays on the vector path
            s[c] = hidden if padded[c] else s[c]
    # loops, not slice assignments: those took a view and a call per row
    for c in range(lo):
        s[c] = NEG_INF
    for c in range(hi, s.shape[0]):
        s[c] = NEG_INF


def _batch_view_if_any(geometry, b):
    """batch_view(geometry, b), or None for a call without a distance bias (geometry None)."""
    raise NotImplementedError("callable from @njit code only")


@overload(_batch_view_if_any, inline="always")
def _choose_batch_view(geometry, b):
    if isinstance(geometry, types.NoneType):
        return lambda geometry, b: None
    return lambda geometry, b: batch_view(geometry, b)


@njit(cache=True)
def _structured_biases_added(s, b, h, mods, geometry):
    """Add the call's structured biases to the (N, M) scores s of (b, h); geometry: the
    batch geometry of batch_geometry.py, None without a distance bias."""
    distance, pair = _structured_biases(mods)
    add_shared_distance_bias(s, b, h, distance, _batch_view_if_any(geometry, b))
    add_pair_bias(s, b, h, 0, 0, pair)


@njit(cache=True)
def _structured_grads(ds, b, h, mods, geometry, task_grads):
    """Gradients of the structured biases from the (N, M) dS tile of (b, h), into the task's
    buffers: task_grads = (dtable (H, 1, P, C), its set's, dpair (group, LANES, C), dx (3, N),
    dy (3, M), the task's own) of :func:`task_parts`, where h % group picks the head's slot
    (h itself in the distance table's)."""
    distance, pair = _structured_biases(mods)
    dtable, dpair, dx, dy = task_grads
    shared_distance_bias_grads(ds, b, h, distance, _batch_view_if_any(geometry, b),
                               dtable[h % dtable.shape[0]], dx, dy)
    pair_bias_grads(ds, b, 0, 0, pair, dpair[h % dpair.shape[0]])


def _with_structured_biases(kernel):
    """A function for @njit code that runs ``kernel`` (same arguments, the flat mods tuple
    among them) where the call has a structured bias, and nothing where it has none: a call
    without one then compiles none of their code (chosen once per signature)."""
    def run(*args):
        raise NotImplementedError("callable from @njit code only")

    # not cache=True, as in attention_bias._where_present; the cached kernels cache it
    @overload(run)
    def _choose(*args):
        mods = next(a for a in args if isinstance(a, types.BaseTuple) and len(a) > PAIR_AT)
        if isinstance(mods[STRUCTURED_AT], types.NoneType) and \
                isinstance(mods[PAIR_AT], types.NoneType):
            return lambda *args: None
        return lambda *args: kernel(*args)
    return run


_add_structured_biases = _with_structured_biases(_structured_biases_added)
_add_structured_grads = _with_structured_biases(_structured_grads)


@njit(cache=True)
def _chunk(chunk, chunks, tasks):
    """[start, stop) of the tasks in chunk number ``chunk`` of ``chunks``."""
    return chunk * tasks // chunks, (chunk + 1) * tasks // chunks


@njit(inline="always")
def _set_of(task, tasks, sets):
    """The set whose _chunk of ``tasks`` holds ``task``."""
    return ((task + 1) * sets - 1) // tasks


@njit(cache=True, error_model="numpy")
def _forward_tasks_chunk(chunk, chunks, out, lse, q, k, v, scale, structured, mods, geometry):
    """The forward of the tasks in chunk number ``chunk`` of ``chunks`` (_chunk)."""
    bias, attn_mask, key_padding_mask, alibi_slopes, left, right, \
        has_bias, has_mask, has_kpm, has_alibi = mods[:STRUCTURED_AT]
    B, H, N, D = q.shape
    Hkv, M = k.shape[1], k.shape[2]
    group, off = H // Hkv, M - N
    one = q.dtype.type(1)
    kt_buffer = np.empty(D * M, q.dtype)
    scores_buffer = np.empty(N * M, q.dtype)
    factors = np.empty(N, q.dtype)
    start, stop = _chunk(chunk, chunks, B * H)
    for task in range(start, stop):
        b, h = task // H, task % H
        hk = h // group
        padded = key_padding_mask[b if has_kpm else 0]
        keys, hide_padded = _keys_of_task(padded, has_kpm, M, structured)
        if keys == 0 or N == 0:  # no key to see: zeros (BLAS rejects empty operands)
            out[b, h] = 0
            lse[b, h] = NEG_INF
            continue
        # C-contiguous (D, keys) and (N, keys), as the whole buffers were: no new signature
        kt = kt_buffer[:D * keys].reshape((D, keys))
        scores = scores_buffer[:N * keys].reshape((N, keys))
        transpose(kt, k[b, hk, :keys])
        # s = scale q k^T (every product's operands as views of any layout, [:, :]: one
        # compiled register_gemm serves them all, where C, F and A layouts compiled three)
        register_gemm_untransposed(scores[:, :], q[b, h, :, :], kt[:, :], scale, False)
        # a run-time flag as well as the compile-time choice of _with_structured_biases:
        # the backward would otherwise take views of its gradient buffers per head
        if structured:
            _add_structured_biases(scores, b, h, mods, geometry)
        for i in range(N):
            s = scores[i]
            factors[i] = 0
            lse[b, h, i] = NEG_INF
            lo, hi = _band(i, off, left, right, keys)
            if hi <= lo:  # the band leaves it no key: zeros
                s[:] = 0
                continue
            # the modifications of s; the rare dense ones in a call of their own
            if has_bias or has_mask or has_alibi:
                _add_dense_modifications_if_any(s, b, h, i, off, bias, attn_mask,
                                                alibi_slopes, has_bias, has_mask, has_alibi)
            _hide_keys(s, padded, hide_padded, lo, hi)
            m = row_max(s)
            if m == NEG_INF:  # every key it may see is masked: zeros
                s[:] = 0
                continue
            total = exp_shifted(s, m)  # s holds exp(s - m) from here
            factors[i] = one / total
            lse[b, h, i] = m + np.log(total)
        # out_i = p_i v / sum p_i
        register_gemm_untransposed(out[b, h, :, :], scores[:, :], v[b, hk, :keys, :], one,
                                   False)
        for i in range(N):
            for d in range(D):
                out[b, h, i, d] *= factors[i]


@njit(cache=True, error_model="numpy")
def _backward_tasks_chunk(chunk, chunks, dq, dk, dv, structured_parts, dout, out, lse, q, k, v,
                          scale, structured, mods, geometry):
    """The backward of the tasks in chunk number ``chunk`` of ``chunks``, whole sets of them.
    structured_parts: :func:`task_parts` (task b * Hkv + hk owns dpair[task], dx[0, hk, b],
    dy[hk, b] and adds into its set's dtable; a chunk takes whole sets); structured: whether
    the call has a structured bias."""
    bias, attn_mask, key_padding_mask, alibi_slopes, left, right, \
        has_bias, has_mask, has_kpm, has_alibi = mods[:STRUCTURED_AT]
    dtable, dpair, dx, dy = structured_parts
    B, H, N, D = q.shape
    Hkv, M = k.shape[1], k.shape[2]
    group, off = H // Hkv, M - N
    one = q.dtype.type(1)
    tasks, sets = B * Hkv, dtable.shape[0]
    # (D, keys) for k, v and dK, dV transposed (their products run along the keys, below)
    # and (N, keys) for P and dS, out of buffers for all M keys (see the forward)
    kt_buffer = np.empty(D * M, q.dtype)
    vt_buffer = np.empty(D * M, q.dtype)
    dkt_buffer = np.empty(D * M, q.dtype)
    dvt_buffer = np.empty(D * M, q.dtype)
    p_buffer = np.empty(N * M, q.dtype)
    ds_buffer = np.empty(N * M, q.dtype)
    delta = np.empty(N, q.dtype)
    first_set, stop_set = _chunk(chunk, chunks, sets)
    for task in range(first_set * tasks // sets, stop_set * tasks // sets):
        b, hk = task // Hkv, task % Hkv
        padded = key_padding_mask[b if has_kpm else 0]
        keys, hide_padded = _keys_of_task(padded, has_kpm, M, structured)
        if keys == 0 or N == 0:  # no key or no query: no gradient (BLAS rejects empty operands)
            dq[b, hk * group:(hk + 1) * group] = 0
            dk[b, hk] = 0
            dv[b, hk] = 0
            continue
        # the keys past the last unpadded one get no gradient
        dk[b, hk, keys:] = 0
        dv[b, hk, keys:] = 0
        kt = kt_buffer[:D * keys].reshape((D, keys))
        vt = vt_buffer[:D * keys].reshape((D, keys))
        dkt = dkt_buffer[:D * keys].reshape((D, keys))
        dvt = dvt_buffer[:D * keys].reshape((D, keys))
        p = p_buffer[:N * keys].reshape((N, keys))
        ds = ds_buffer[:N * keys].reshape((N, keys))
        transpose(kt, k[b, hk, :keys])
        transpose(vt, v[b, hk, :keys])
        for h in range(hk * group, (hk + 1) * group):
            # forward: s = scale q k^T, modified, outside the row's band -inf
            register_gemm(p[:, :], q[b, h, :, :], kt[:, :], scale, False)
            if structured:
                _add_structured_biases(p, b, h, mods, geometry)
            for i in range(N):
                row_lse = lse[b, h, i]
                delta[i] = 0
                lo, hi = _band(i, off, left, right, keys)
                if row_lse == NEG_INF or hi <= lo:  # saw no key: no gradient
                    p[i] = 0
                    continue
                if has_bias or has_mask or has_alibi:
                    _add_dense_modifications_if_any(p[i], b, h, i, off, bias, attn_mask,
                                                    alibi_slopes, has_bias, has_mask,
                                                    has_alibi)
                _hide_keys(p[i], padded, hide_padded, lo, hi)
                # forward: p = exp(s - m) / sum = exp(s - lse)
                exp_shifted(p[i], row_lse)
                total = dout.dtype.type(0)
                for d in range(D):
                    total += dout[b, h, i, d] * out[b, h, i, d]
                delta[i] = total
            first = h == hk * group  # the group's first head sets dK, dV; the others add
            # forward: out = P v  ->  dV^T += dout^T P, dP = dout v^T (as dV^T, the
            # product's rows run along the keys: from N 32 on faster than dV = P^T dout,
            # whose rows are only D wide; measured)
            register_gemm(dvt[:, :], dout[b, h].T[:, :], p[:, :], one, not first)
            # softmax: dS = P (dP - delta)
            register_gemm_softmax_grad(ds, dout[b, h], vt, one, p, delta)
            if structured:
                _add_structured_grads(ds, b, h, mods, geometry, (
                    dtable[_set_of(task, tasks, sets)], dpair[task % dpair.shape[0]],
                    dx[0, hk % dx.shape[1], b % dx.shape[2]],
                    dy[hk % dy.shape[0], b % dy.shape[1]]))
            # forward: s = scale q k^T  ->  dq = scale dS k, dK^T += scale q^T dS
            register_gemm(dq[b, h, :, :], ds[:, :], k[b, hk, :keys, :], scale, False)
            register_gemm(dkt[:, :], q[b, h].T[:, :], ds[:, :], scale, not first)
        transpose(dk[b, hk, :keys], dkt)
        transpose(dv[b, hk, :keys], dvt)


_forward_tasks_chunk_by_symbol = called_natively(_forward_tasks_chunk)
_backward_tasks_chunk_by_symbol = called_natively(_backward_tasks_chunk)


@sized_kernel(GRAIN, work=lambda chunks, out, lse, q, k, *rest: _score_work(
    *q.shape[:3], k.shape[2], q.shape[3]), chunk=_forward_tasks_chunk)
def _forward_tasks(chunks, out, lse, q, k, v, scale, structured, mods, geometry):
    for chunk in prange(chunks):
        _forward_tasks_chunk_by_symbol((np.int64(chunk), chunks, out, lse, q, k, v, scale,
                                        structured, mods, geometry))


@sized_kernel(GRAIN, work=lambda chunks, dq, dk, dv, parts, dout, out, lse, q, k, *rest:
              _score_work(*q.shape[:3], k.shape[2], q.shape[3]), chunk=_backward_tasks_chunk)
def _backward_tasks(chunks, dq, dk, dv, structured_parts, dout, out, lse, q, k, v, scale,
                    structured, mods, geometry):
    for chunk in prange(chunks):
        _backward_tasks_chunk_by_symbol((np.int64(chunk), chunks, dq, dk, dv, structured_parts,
                                         dout, out, lse, q, k, v, scale, structured, mods,
                                         geometry))


def _scale(call):
    return call.q.dtype.type(call.scale)


def _structured(call):
    return bool(call.distance.has or call.pair.mode)


def _launch(kernel, tasks, *args):
    """Run ``kernel`` on the threads its work pays for, its ``tasks`` split into one chunk per
    planned thread (each chunk allocates its scratch once)."""
    threads = kernel.threads(kernel.work(1, *args))  # the work does not depend on the chunks
    kernel.run(threads, min(threads, tasks), *args)


def _mods_and_geometry(call):
    """(the flat mods tuple, None in place of the dense modifications' placeholders where
    the call has none of them; the distance bias's batch geometry: shared with the other
    calls on the same positions, batch_geometry.py; None for a call without a distance
    bias)."""
    mods = _mods(call)
    if not (call.has_bias or call.has_mask or call.has_alibi):  # _add_dense_modifications_if_any
        mods = (None, None, mods[2], None) + mods[4:]
    if not call.distance.has:
        return mods, None
    B, N = call.q.shape[0], call.q.shape[2]
    # split in Python, not by the @njit _structured_biases: that would box the scalars as
    # Python floats, and a fill typed with float64 scalars compiles apart from the kernels'
    distance = DistanceArgs(*mods[STRUCTURED_AT:PAIR_AT])
    return mods, shared_geometry(distance, B, N, call.k.shape[2], call.q.dtype)


def attention_forward(out, lse, call):
    """Fill out (B, H, N, D) and lse (B, H, N) for a prepared call."""
    B, H = call.q.shape[:2]
    _launch(_forward_tasks, B * H, out, lse, call.q, call.k, call.v, _scale(call),
            _structured(call), *_mods_and_geometry(call))


def table_sets(call):
    """How many distance-table gradients the backward's tasks add into: one below two
    grains of work (one thread), else four per thread that the work could pay for, so that
    chunks of whole sets stay balanced. The count follows from the call's sizes alone: the
    tasks of a set add in their order, and the bits do not depend on the threads."""
    B, H, N, D = call.q.shape
    Hkv, M = call.k.shape[1], call.k.shape[2]
    grains = _score_work(B, H, N, M, D) // GRAIN
    return 1 if grains < 2 else int(min(B * Hkv, 4 * grains))


def task_parts(call, sets=None, table=None, positions=True):
    """Zeroed gradient buffers of the structured biases for the backward's tasks: their own
    for the pair table and the positions (attention._structured_parts; without
    ``positions``, position buffers of no columns, which the distance bias's gradient then
    skips), and for the distance table one (H, 1, P, C) per set of consecutive tasks
    (``sets``, default :func:`table_sets`): a table of many element types per task was
    megabytes to zero and sum (a molecule model's 36 x 36 types, 4 heads, 32 bins: 0.66 MB a
    task). One set adds straight into ``table`` (H, P, C), the output, where given (zeroed
    here)."""
    sets = table_sets(call) if sets is None else sets
    direct = table is not None and sets == 1
    dtable, dpair, dx, dy = _structured_parts(call, 1, 1, 0 if direct else sets)
    if not positions:
        dx, dy = (np.zeros(a.shape[:-1] + (0,), a.dtype) for a in (dx, dy))
    if direct:
        table[...] = 0
        dtable = table.reshape(1, table.shape[0], 1, *table.shape[1:])
    return dtable, dpair, dx, dy


def _sum_task_parts(grads, parts, call):
    """Add the tasks' parts into the outputs in a fixed order: the distance table's sets, then
    as attention._sum_structured_parts for the rest."""
    dtable, dpair, dx, dy = parts
    if grads.distance_table is not None:
        if not np.may_share_memory(dtable, grads.distance_table):  # else it is the output
            np.sum(dtable.reshape(dtable.shape[0], *grads.distance_table.shape), axis=0,
                   out=grads.distance_table)
        if grads.x is not None:
            grads.x[...] = dx.sum(axis=(0, 1))
            grads.y[...] = dy.sum(axis=0)
    _sum_structured_parts(grads._replace(distance_table=None), parts, call)


def attention_backward(dq, dk, dv, structured, dout, out, lse, call):
    """Fill dq, dk, dv and the structured biases' gradients ``structured`` (an
    attention.StructuredGrads, its arrays not None where the call has that bias, but for the
    positions' where they need none) for a prepared call, given the forward's out and lse (all
    C-contiguous)."""
    B, Hkv = call.k.shape[:2]
    parts = task_parts(call, table=structured.distance_table,
                       positions=structured.x is not None or structured.distance_table is None)
    _launch(_backward_tasks, B * Hkv, dq, dk, dv, parts, dout, out, lse, call.q, call.k, call.v,
            _scale(call), _structured(call), *_mods_and_geometry(call))
    _sum_task_parts(structured, parts, call)
