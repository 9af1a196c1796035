"""Fused attention on NVIDIA GPUs (numba.cuda): forward, backward, bias gradient and weights.

The CUDA twin of ``seqattn/kernels/cpu/attention.py``: the same launchers with the same semantics
(see :class:`seqattn.ops.attention_inputs.AttentionCall`). Shapes: q (B, H, N, D); k, v (B, Hkv,
M, D). Every score modification (band, masks, dense bias, ALiBi, and the structured biases) is
made in one device function, ``score_at`` in ``cuda/attention_scores.py``; the kernels receive
them as one tuple, ``mods`` (see ``attention_scores.score_args``). Scores are in log2 units and
the softmax takes exp2; lse is saved in natural units. The plan is FlashAttention-2's, on CUDA
cores (Numba has no tensor-core intrinsics):

* forward (``cuda/attention_forward.py``): one block per (batch x head, query tile), each thread
  owning a register tile of scores and of the output; the row statistics stay in registers.
* backward: delta = rowsum(dout * out) first; then a pass parallel over key tiles
  (``cuda/attention_backward.py``) that recomputes the scores once per (query tile, key tile):
  dk and dv in registers, the key positions' gradient summed inside the block, the structured
  biases' tables summed as 64-bit fixed-point integers (all deterministic). dq and the query
  positions' gradient come, by default (``deterministic=True``), from a second pass parallel over
  query tiles (``cuda/attention_backward_dq.py``) that computes the scores again and gives each
  element of dq one writer: the same bits every run. With ``deterministic=False`` the key-tile
  pass adds them with atomics instead (one pass, the scores computed once; not bit-reproducible,
  since the order of the adds follows the blocks' timing).
* bias gradient (``cuda/attention_bias_grad.py``): one block per tile of the bias's own
  (broadcast) shape, looping over the dims it was broadcast along, so every dbias element has
  exactly one writer.
* weights (``cuda/attention_weights.py``): the forward's tiles, in two passes (each row's
  log-sum-exp, then exp2(score - lse) for every key).

All of them share the forward's thread layout (16 x 8 threads, register tiles, shuffles across a
row's lanes, 16-byte vector loads from shared memory at unsigned 32-bit offsets) and fill their
tiles with ``attention_forward.tile_loader``. Tile shapes are picked per kernel and head dim to
fit 48 KiB of static shared memory (:func:`_plan`); kernels compile lazily, once per (dtype,
head tile, tile shape), from each module's factory, which bakes dtype-typed constants into the
code so that float32 kernels never promote to float64.
"""
from collections import namedtuple
import functools

import numpy as np
from numba import cuda

from . import attention_backward as fused_backward
from . import attention_backward_dq as dq_tiles
from . import attention_bias_grad as bias_grad_tiles
from . import attention_forward as fused_forward
from . import attention_weights as weights_tiles
from .attention_score_tile import THREADS
from .elementwise import fill
from .attention_scores import score_args

SHARED_BYTES = 48 * 1024  # the static shared memory one block may declare
LARGEST_HEAD_TILE = 256
MAX_GRID_Y = 65535  # CUDA's limit on the grid's second dim (the first allows 2**31 - 1)

Tiles = namedtuple("Tiles", "head_tile block_q block_k")
StructuredGrads = namedtuple("StructuredGrads", "distance_table x y pair_table")
StructuredGrads.__doc__ = """Outputs for the structured biases' gradients, in kernel layout:
distance_table (H, P, C), x (B, 3, N), y (B, 3, M), pair_table (H, C); None where absent."""

# Per kernel kind: the module with its tile shapes, buffer sizes and kernel factory, the
# factory's name (looked up at each call, so that tests/helpers/cuda_kernel_census.py can wrap it), and
# the arguments after the tiles that both buffer_sizes and the factory take.
_KINDS = {
    "forward": (fused_forward, "forward_kernel", ()),
    "backward": (fused_backward, "backward_kernel", (True,)),  # dq by atomics
    "backward_keys": (fused_backward, "backward_kernel", (False,)),  # no dq: see backward_dq
    "backward_dq": (dq_tiles, "backward_dq_kernel", ()),
    "weights": (weights_tiles, "weights_kernel", ()),
    "dbias": (bias_grad_tiles, "bias_grad_kernel", ()),
}


def _fitting_tiles(kind, itemsize, head_tile):
    module, _, extra = _KINDS[kind]
    for block_q, block_k in module.TILE_SHAPES:
        tiles = Tiles(head_tile, block_q, block_k)
        if sum(module.buffer_sizes(*tiles, *extra).values()) * itemsize <= SHARED_BYTES:
            return tiles
    return None


def _largest_head_dim(kind, itemsize):
    step = fused_forward.HEAD_TILE_STEP
    return max(t for t in range(step, LARGEST_HEAD_TILE + 1, step)
               if _fitting_tiles(kind, itemsize, t) is not None)


@functools.lru_cache(maxsize=None)
def _plan(kind, dtype_name, D):
    """The tiles kernel ``kind`` uses for head dim D, or a ValueError if its buffers cannot fit.
    Every kind pads D with zeros to a multiple of 32 (``attention_forward.head_tile``)."""
    itemsize = np.dtype(dtype_name).itemsize
    tiles = _fitting_tiles(kind, itemsize, fused_forward.head_tile(D))
    if D > LARGEST_HEAD_TILE or tiles is None:
        float32_hint = " or use float32" if dtype_name == "float64" else ""
        raise ValueError(
            f"q has head dim D={D}, but the CUDA attention kernels ({kind}) hold their "
            f"{dtype_name} tiles in {SHARED_BYTES // 1024} KiB of shared memory and support "
            f"D <= {_largest_head_dim(kind, itemsize)}; use more, smaller heads{float32_hint}"
        )
    return tiles


def _kernel(kind, dtype, D):
    """(kernel, tiles) of kernel ``kind`` at this dtype and head dim."""
    dtype_name = np.dtype(dtype).name
    tiles = _plan(kind, dtype_name, D)
    module, factory, extra = _KINDS[kind]
    return getattr(module, factory)(dtype_name, *tiles, *extra), tiles


def _cdiv(a, b):
    return -(-a // b)


def _launch(kernel, grid, *args):
    """Launch over ``grid`` blocks of THREADS threads; an empty grid has nothing to compute."""
    if grid[1] > MAX_GRID_Y:
        raise ValueError(f"attention on the GPU needs a grid of {grid} blocks, but CUDA allows at "
                         f"most {MAX_GRID_Y} along y; split the batch or the sequence")
    if min(grid) > 0:
        kernel[grid, THREADS](*args)


def _sizes(call):
    """(B, H, Hkv, N, M, D) of a prepared call."""
    B, H, N, D = (int(s) for s in call.q.shape)
    return B, H, int(call.k.shape[1]), N, int(call.k.shape[2]), D


@functools.lru_cache(maxsize=None)
def _row_delta_kernel(dtype_name):
    zero = np.dtype(dtype_name).type(0)

    @cuda.jit
    def row_delta_kernel(delta, dout, out):
        """delta (B, H, N) = rowsum(dout * out): the softmax backward's per-row term."""
        n_heads, n_q, D = out.shape[1], out.shape[2], out.shape[3]
        row = cuda.grid(1)
        if row < out.shape[0] * n_heads * n_q:
            b = row // (n_heads * n_q)
            h = (row // n_q) - b * n_heads
            i = row - (row // n_q) * n_q
            total = zero
            for d in range(D):
                total += dout[b, h, i, d] * out[b, h, i, d]
            delta[b, h, i] = total

    return row_delta_kernel


def _row_delta(dout, out, call):
    B, H, Hkv, N, M, D = _sizes(call)
    delta = cuda.device_array((B, H, N), dtype=call.q.dtype)
    rows = B * H * N
    if rows > 0:
        _row_delta_kernel(np.dtype(call.q.dtype).name)[_cdiv(rows, THREADS), THREADS](
            delta, dout, out)
    return delta


def attention_forward(out, lse, call):
    """out (B, H, N, D) and lse (B, H, N) for a prepared call; empty rows get 0 and -inf."""
    B, H, Hkv, N, M, D = _sizes(call)
    kernel, tiles = _kernel("forward", call.q.dtype, D)
    _launch(kernel, (B * H, _cdiv(N, tiles.block_q)), out, lse, call.q, call.k, call.v,
            score_args(call))


def _zeros(shape, dtype):
    return cuda.to_device(np.zeros(shape, dtype))


@functools.lru_cache(maxsize=None)
def _row_abs_sums_kernel(dtype_name):
    zero = np.dtype(dtype_name).type(0)

    @cuda.jit
    def row_abs_sums_kernel(sums, x):
        """sums (B, H, N) = the sum over d of |x (B, H, N, D)|: each row's L1 norm."""
        n_heads, n_rows, D = x.shape[1], x.shape[2], x.shape[3]
        row = cuda.grid(1)
        if row < x.shape[0] * n_heads * n_rows:
            b = row // (n_heads * n_rows)
            h = (row // n_rows) - b * n_heads
            i = row - (row // n_rows) * n_rows
            total = zero
            for d in range(D):
                total += abs(x[b, h, i, d])
            sums[b, h, i] = total

    return row_abs_sums_kernel


def _row_abs_sums(x):
    """Each row's L1 norm of x (B, H, N, D), on the host (float64)."""
    B, H, N, D = (int(s) for s in x.shape)
    sums = cuda.device_array((B, H, N), dtype=x.dtype)
    if B * H * N > 0:
        _row_abs_sums_kernel(np.dtype(x.dtype).name)[_cdiv(B * H * N, THREADS), THREADS](sums, x)
    return sums.copy_to_host().astype(np.float64)


# The tables' gradients are summed as int64 fixed-point numbers (atomics in any order give the
# same sum); a bound on every partial sum is scaled to 2**TABLE_SUM_BITS, a quarter of int64's
# range, which leaves room for the rounding of each term and of the bound itself.
TABLE_SUM_BITS = 61
# Limits of the scale's exponent, so that the scale and value * scale stay finite in the dtype.
_SCALE_EXPONENTS = {"float32": 100, "float64": 1000}


def table_sum_scale(dout, v, dtype_name):
    """The fixed-point scale (a power of two) for the tables' gradients, and whether their
    bound is finite. Every table entry's gradient is a sum of terms g_ij (or parts of one) with
    g = dS = P (dP - delta), and since a row's P sums to at most 1 and |delta_i| <= max_j
    |dP_ij|, sum over j of |g_ij| <= 2 max_j |dP_ij| <= 2 |dout_i|_1 max_j |v_j|_1; so no
    partial sum exceeds 2 (sum_i |dout_i|_1) max_j |v_j|_1."""
    bound = 2.0 * _row_abs_sums(dout).sum() * _row_abs_sums(v).max(initial=0.0)
    if not np.isfinite(bound):
        return np.dtype(dtype_name).type(1), False
    limit = _SCALE_EXPONENTS[dtype_name]
    exponent = TABLE_SUM_BITS - (int(np.ceil(np.log2(bound))) if bound > 0 else 0)
    return np.dtype(dtype_name).type(2.0 ** min(max(exponent, -limit), limit)), True


@functools.lru_cache(maxsize=None)
def _from_fixed_point_kernel(dtype_name):
    ftype = np.dtype(dtype_name).type

    @cuda.jit
    def from_fixed_point_kernel(out, fixed, unit):
        """out = fixed * unit, both flat: int64 fixed-point sums back to floats."""
        i = cuda.grid(1)
        if i < out.size:
            out[i] = ftype(fixed[i]) * unit

    return from_fixed_point_kernel


def _from_fixed_point(out, fixed, scale, finite):
    """out (any shape) = the fixed-point sums ``fixed`` (int64, out's shape) / scale; NaN
    everywhere when their bound was not finite (a NaN or inf in dout or v)."""
    if not finite:
        out.copy_to_device(np.full(out.shape, np.nan, out.dtype))
    elif out.size > 0:
        ftype = np.dtype(out.dtype).type
        _from_fixed_point_kernel(np.dtype(out.dtype).name)[_cdiv(out.size, THREADS), THREADS](
            out.reshape(out.size), fixed.reshape(fixed.size), ftype(1 / scale))


def attention_backward(dq, dk, dv, structured, dout, out, lse, call, deterministic=True):
    """dq (B, H, N, D), dk and dv (B, Hkv, M, D), and the :class:`StructuredGrads`
    ``structured`` (its arrays not None where the call has that bias), given dout and the
    forward's out and lse. ``deterministic``: dq and the query positions' gradient from a
    second pass over query tiles, the same bits every run (else added with atomics by the
    key-tile pass: faster, but the last bits vary from run to run)."""
    B, H, Hkv, N, M, D = _sizes(call)
    dtype = call.q.dtype
    delta = _row_delta(dout, out, call)
    has_distance = call.distance.has
    structured_bias = has_distance or bool(call.pair.mode)
    P, C = (int(n) for n in call.distance.table.shape[1:])
    # The query positions' gradient per head (summed over heads below) and the tables' int64
    # fixed-point sums are zeroed first; 1-element placeholders where unused.
    dx = _zeros((H, B, 3, N) if has_distance else (1, 1, 3, 1), dtype)
    dy = cuda.device_array((Hkv, B, 3, M) if has_distance else (1, 1, 3, 1), dtype)
    dtable = _zeros((H, P, C) if has_distance else (1, 1, 2), np.int64)
    dpair = _zeros(tuple(call.pair.table.shape) if call.pair.mode else (1, 1), np.int64)
    table_scale, finite = (table_sum_scale(dout, call.v, np.dtype(dtype).name) if structured_bias
                           else (np.dtype(dtype).type(1), True))
    mods = score_args(call)
    if deterministic:
        kernel, tiles = _kernel("backward_keys", dtype, D)
    else:
        fill(dq.reshape(dq.size), 0.0)  # receives atomic adds from every key tile
        kernel, tiles = _kernel("backward", dtype, D)
    _launch(kernel, (B * Hkv, _cdiv(M, tiles.block_k)), dq, dk, dv, dx, dy, dtable, dpair,
            table_scale, dout, lse, delta, call.q, call.k, call.v, mods)
    if deterministic:
        kernel, tiles = _kernel("backward_dq", dtype, D)
        _launch(kernel, (B * H, _cdiv(N, tiles.block_q)), dq, dx, dout, lse, delta, call.q,
                call.k, call.v, mods)
    if has_distance:
        _from_fixed_point(structured.distance_table, dtable, table_scale, finite)
        structured.x.copy_to_device(dx.copy_to_host().sum(axis=0))
        structured.y.copy_to_device(dy.copy_to_host().sum(axis=0))
    if call.pair.mode:
        _from_fixed_point(structured.pair_table, dpair, table_scale, finite)


def attention_bias_grad(dbias, dout, out, lse, call):
    """dbias, shaped like call.bias (each dim full or 1): dS summed over the broadcast dims."""
    B, H, Hkv, N, M, D = _sizes(call)
    delta = _row_delta(dout, out, call)
    kernel, tiles = _kernel("dbias", call.q.dtype, D)
    bias_b, bias_h, bias_n, bias_m = (int(s) for s in dbias.shape)
    grid = (_cdiv(bias_n, tiles.block_q) * _cdiv(bias_m, tiles.block_k), bias_b * bias_h)
    _launch(kernel, grid, dbias, dout, lse, delta, call.q, call.k, call.v,
            score_args(call))


def attention_weights(weights, call):
    """weights (B, H, N, M): the attention probabilities."""
    B, H, Hkv, N, M, D = _sizes(call)
    kernel, tiles = _kernel("weights", call.q.dtype, D)
    _launch(kernel, (B * H, _cdiv(N, tiles.block_q)), weights, call.q, call.k,
            score_args(call))
