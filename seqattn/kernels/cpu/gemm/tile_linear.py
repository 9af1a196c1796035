"""The linear layers' row products, x W^T and dout W, on AMX tiles at float32 accuracy
(bf16x3_gemm.py), where the CPU has them (amx_tiles.py).

Both are products of a block of token rows with the whole weight: y (R, O) = x (R, K) W^T over K,
and dx (R, K) = dout (R, O) W over O. The weight is split into its bf16 terms once per call, as the
right operand of the product (:func:`weight_over_inputs` for x W^T, :func:`weight_over_outputs`
for dout W), into a scratch buffer (workspace.py). Each task takes whole strips of 32 token rows:
it splits a strip (an L2-sized left operand), computes its 32 x 32 blocks over the whole depth
in one fixed order, and writes them through an aligned buffer (adding the bias). A row's result
is thus one product, whatever the number of tasks: its bits do not depend on the thread count.

dW = dout^T x is a product over all R token rows, its depth (:func:`weight_gradient`). Each task
takes whole strips of the features of one operand and, chunk by chunk of token rows, splits
them as the right operand (pairs of token rows interleaved, :func:`pairs_as_depth`) and all of
the other operand's features, transposed to rows over the chunk's tokens, as the left; so
neither is ever split whole in memory. Each element of dW adds up its chunks' sums in token
order whatever the number of tasks, so its bits do not depend on it either.
"""
import numpy as np
from numba import prange

from .amx_tiles import AMX_BF16, TILE_ELEMENTS, TILE_ROWS, tile_config, tile_configuration, \
    tile_release
from .bf16x3_gemm import (TERMS, TILE_DEPTH, aligned_empty, keys_as_columns, pairs_as_depth,
                          product_32x32, rows_as_depth, split_rows_into)
from ..jit_options import njit
from .register_gemm import transpose
from ..threads import sized_kernel
from ..workspace import scratch

STRIP = 2 * TILE_ROWS  # token rows per strip: one row of 32 x 32 blocks
# Multiply-adds a thread must have before a launch takes it (as linear.py's).
GRAIN = 1 << 20
# Where the tiles were measured faster, in multiply-adds R K O (2 threads, tiles / registers,
# linear.py's launchers on benchmarks/encoder.py's shapes and smaller, Intel Xeon, Sapphire
# Rapids class; BENCHMARKS.md, "Linear layers on AMX tiles"):
# * the forward: from 2^24 with K >= 64 inputs; not below, or at K 32, where each strip's split
#   and stores weigh more than its products;
# * the backward, whose dx here and dW in registers take two parallel regions instead of one:
#   from 2^28, not below.
FORWARD_MIN_WORK = 1 << 24
FORWARD_MIN_INPUTS = 64
BACKWARD_MIN_WORK = 1 << 28
# * dW: from 2^26 with 64 or more features on each side, by a smaller margin at 2^25; slower
#   with 32 inputs and outputs, where the transposes and splits weigh more.
GRADIENT_MIN_WORK = 1 << 26
GRADIENT_MIN_FEATURES = 64
# dW's token rows per chunk: a task's operands for a chunk (in three terms) and its sums stay in
# its core's L2. Chunks of 256 and 1024 were no faster (2 threads, R 8192, the encoder's four
# layers' shapes; same section).
GRADIENT_CHUNK = 512


def _whole_tiles(x, weight):
    O, K = weight.shape
    return (AMX_BF16 and x.dtype == np.float32 and weight.dtype == np.float32
            and O % TILE_DEPTH == 0 and K % TILE_DEPTH == 0)


def forward_on_tiles(x, weight):
    """Whether x (R, K) W^T with weight (O, K) runs on the tiles."""
    return (_whole_tiles(x, weight) and weight.shape[1] >= FORWARD_MIN_INPUTS
            and x.shape[0] * weight.size >= FORWARD_MIN_WORK)


def backward_on_tiles(x, weight):
    """Whether the backward's dx = dout W runs on the tiles."""
    return _whole_tiles(x, weight) and x.shape[0] * weight.size >= BACKWARD_MIN_WORK


def weight_gradient_on_tiles(x, weight):
    """Whether dW = dout^T x runs on the tiles."""
    return (_whole_tiles(x, weight) and min(weight.shape) >= GRADIENT_MIN_FEATURES
            and x.shape[0] * weight.size >= GRADIENT_MIN_WORK)


def weight_over_inputs(weight):
    """weight (O, K) as the right operand of x W^T: its O rows as columns, depth K."""
    O, K = weight.shape
    tiles = scratch("weight over inputs", (TERMS, 1, 1, O // TILE_ROWS, K // TILE_DEPTH,
                                           TILE_ROWS, TILE_DEPTH), np.uint16)
    keys_as_columns(tiles, weight.reshape(1, 1, O, K))
    return tiles


def weight_over_outputs(weight):
    """weight (O, K) as the right operand of dout W: K columns, depth O."""
    O, K = weight.shape
    tiles = scratch("weight over outputs", (TERMS, 1, 1, K // TILE_ROWS, O // TILE_DEPTH,
                                            TILE_ROWS, TILE_DEPTH), np.uint16)
    rows_as_depth(tiles, weight.reshape(1, 1, O, K))
    return tiles


@njit(cache=True)
def _write_strip(out, block, r0, rows, bias, has_bias):
    for r in range(rows):
        row, values = out[r0 + r], block[r]
        if has_bias:
            for o in range(row.shape[0]):
                row[o] = values[o] + bias[o]
        else:
            for o in range(row.shape[0]):
                row[o] = values[o]


@sized_kernel(GRAIN)
def _rows_times_weight(out, x, weight_tiles, config, bias, has_bias, tasks):
    """out (R, C) = x (R, depth) @ the weight whose right operand is weight_tiles (+ bias)."""
    R, depth = x.shape
    C = out.shape[1]
    steps = weight_tiles.shape[4]
    column_step = steps * TILE_ELEMENTS
    strips = (R + STRIP - 1) // STRIP
    for t in prange(tasks):
        terms = aligned_empty(TERMS * STRIP * depth, np.uint16).reshape((TERMS, STRIP, depth))
        block = aligned_empty(STRIP * C, np.float32).reshape((STRIP, C))
        tile_config(config)
        for s in range(t * strips // tasks, (t + 1) * strips // tasks):
            r0 = s * STRIP
            rows = min(STRIP, R - r0)
            split_rows_into(terms, x, r0, rows, np.float32(1))
            for c in range(0, C, TILE_DEPTH):
                product_32x32(block, c, C * 4, False, terms, 0, depth * 2, weight_tiles,
                              c // TILE_ROWS * column_step, column_step, steps)
            _write_strip(out, block, r0, rows, bias, has_bias)
        tile_release()


def rows_times_weight(out, x, weight_tiles, bias, has_bias):
    """out = x @ (the weight of weight_tiles) (+ bias), on the tiles: out (R, C) and x (R, depth)
    C-contiguous float32."""
    tasks = _rows_times_weight.threads(x.shape[0] * x.shape[1] * out.shape[1])
    _rows_times_weight.run(tasks, out, x, weight_tiles, tile_configuration(), bias, has_bias,
                           tasks)


@njit(cache=True)
def _add_block(dweight, block, c0, transposed):
    """dweight[:, c0:c0 + columns] += block (F, columns), or with ``transposed``
    dweight[c0:c0 + columns] += block^T."""
    for f in range(block.shape[0]):
        values = block[f]
        if transposed:
            for c in range(values.shape[0]):
                dweight[c0 + c, f] += values[c]
        else:
            row = dweight[f, c0:c0 + values.shape[0]]
            for c in range(values.shape[0]):
                row[c] += values[c]


@sized_kernel(GRAIN)
def _features_product(dweight, a, b, config, transposed, tasks):
    """dweight (F, C) += a (R, F)^T @ b (R, C); with ``transposed``, dweight (C, F) += its
    transpose. Each task takes whole strips of b's C features; for each chunk of token rows it
    transposes and splits all of a, and splits its strips of b as the right operand."""
    R, F = a.shape
    C = b.shape[1]
    strips = C // STRIP
    steps = GRADIENT_CHUNK // TILE_DEPTH
    for t in prange(tasks):
        c0, c1 = t * strips // tasks * STRIP, (t + 1) * strips // tasks * STRIP
        columns = c1 - c0
        features = aligned_empty(F * GRADIENT_CHUNK, np.float32).reshape((F, GRADIENT_CHUNK))
        terms = aligned_empty(TERMS * F * GRADIENT_CHUNK, np.uint16).reshape(
            (TERMS, F, GRADIENT_CHUNK))
        tiles = aligned_empty(TERMS * columns * GRADIENT_CHUNK, np.uint16).reshape(
            (TERMS, columns // TILE_ROWS, steps, TILE_ROWS, TILE_DEPTH))
        block = np.zeros((F, columns), np.float32)
        part = aligned_empty(F * columns, np.float32).reshape((F, columns))
        tile_config(config)
        for r0 in range(0, R, GRADIENT_CHUNK):
            tokens = min(GRADIENT_CHUNK, R - r0)
            # the chunk's tokens past R (to a whole tile's depth) add nothing
            features[:, tokens:] = 0
            transpose(features[:, :tokens], a[r0:r0 + tokens])
            split_rows_into(terms, features, 0, F, np.float32(1))
            pairs_as_depth(tiles, b, r0, tokens, c0)
            for c in range(0, columns, TILE_DEPTH):
                for r in range(0, F, STRIP):
                    product_32x32(part, r * columns + c, columns * 4, False, terms,
                                  r * GRADIENT_CHUNK, GRADIENT_CHUNK * 2, tiles,
                                  c // TILE_ROWS * steps * TILE_ELEMENTS, steps * TILE_ELEMENTS,
                                  (tokens + TILE_DEPTH - 1) // TILE_DEPTH)
            # the chunk's sums go into the whole sums apart, as BLAS adds its depth blocks:
            # one float32 sum over all R tokens had 4 times its error. After the chunk's
            # products, not after each: a read of what a tile store has just written waits.
            block += part
        tile_release()
        _add_block(dweight, block, c0, transposed)


def weight_gradient(dweight, dout, x):
    """dweight (O, K) += dout (R, O)^T @ x (R, K) on the tiles, for C-contiguous float32
    arrays. Every task transposes all of the operand with fewer features (its 16 x 16 block
    transposes cost more than a split of pairs) and splits its share of the other."""
    O, K = dweight.shape
    a, b, transposed = (dout, x, False) if O <= K else (x, dout, True)
    tasks = min(_features_product.threads(x.shape[0] * O * K), b.shape[1] // STRIP)
    _features_product.run(tasks, dweight, a, b, tile_configuration(), transposed, tasks)
