"""Linear map y = x W^T + b on the CPU.

Shapes: x (R, K) with R = B * N token rows, weight (O, K), bias (O,), y (R, O).

Each op is one parallel region in which every Numba thread runs single-threaded products on its
own block (a task, an @njit function of its own that the serial and the parallel kernel call by
symbol: threads.py): forward and dx on a block of token rows, db on a block of output features,
dW on a block of output or of input features, whichever are more. The products go through
``packed_gemm``: dW register-blocked on AVX-512 CPUs with OpenBLAS (which it beat on these
products with their inner dimension of all R token rows), forward and dx register-blocked
where OpenBLAS runs a kernel narrower than the CPU's AVX-512 (``NT_NN_IN_REGISTERS``: 1.8-2.0x
as fast there, as fast as an AVX-512 OpenBLAS); on CPUs with AVX2 but not AVX-512 all three for
small weights, products of 16 columns or more (``packed_gemm.avx2_in_registers``: faster
than OpenBLAS's Haswell kernel there, not at the encoder's sizes); BLAS elsewhere. On the
register path the threads' blocks of token rows are whole strips of the driver's, so that the
bits do not depend on the thread count; the path itself is chosen from the layer's shape,
never from the thread count. There
is no synchronisation inside a GEMM, which matters on our shared 2-core machines: OpenBLAS's own
threads hand packed panels to each other and spin whenever the other one is descheduled. The
bias goes into the output before the GEMM (beta = 1) and the bias gradient is summed in the
same task as dW, so neither costs a separate pass or parallel region.

On CPUs with AMX tiles, the forward, dx and dW of large enough products run there instead
(tile_linear.py), each in a parallel region of its own; db stays here.
"""
import numpy as np
from numba import prange

from .gemm import tile_linear
from .gemm.blas_library import single_threaded_blas
from ..compiled_elsewhere import compile_function_elsewhere
from .gemm.packed_gemm import (AVX2_IN_REGISTERS, DRIVER, MIN_WORK, NT_NN_IN_REGISTERS,
                               TN_IN_REGISTERS, avx2_in_registers, driver_address, gemm_tn,
                               packed_gemm, strip_block)
from .called_by_name import called_natively
from .jit_options import njit
from .threads import sized_kernel

# Multiply-adds a thread must have before a launch takes it (benchmarks/small_launches.py).
GRAIN = 1 << 20


@njit(inline="always")
def _block(t, tasks, size):
    """Task t's share [start, stop) of range(size)."""
    return t * size // tasks, (t + 1) * size // tasks


@njit(inline="always")
def _row_block(t, tasks, R, in_registers):
    """Task t's token rows: the register path's in whole strips, so that the bits do not
    depend on the thread count (``packed_gemm.strip_block``)."""
    return strip_block(t, tasks, R) if in_registers else _block(t, tasks, R)


@njit(cache=True)
def _fill_rows(out, bias, r0, r1):
    for r in range(r0, r1):
        for o in range(out.shape[1]):
            out[r, o] = bias[o]


@njit(cache=True)
def _add_column_sums(dbias, dout, o0, o1):
    """dbias[o0:o1] += sums over rows of dout[:, o0:o1], accumulated in float64."""
    n = o1 - o0
    total = np.zeros(n, dtype=np.float64)
    for r in range(dout.shape[0]):
        # Indexing a row slice from 0 lets LLVM vectorise the loop (7x faster than dout[r, o]
        # over range(o0, o1)).
        row = dout[r, o0:o1]
        for o in range(n):
            total[o] += row[o]
    for o in range(n):
        dbias[o0 + o] += total[o]


@njit(cache=True, error_model="numpy")
def _linear_forward_task(t, out, x, weight, bias, has_bias, in_registers, tasks):
    """Task t of ``tasks``: its block of token rows of out = x W^T + b."""
    r0, r1 = _row_block(t, tasks, x.shape[0], in_registers)
    if r1 > r0:
        if has_bias:
            _fill_rows(out, bias, r0, r1)
        # views of any layout, as gemm_tn's: one compiled packed_gemm for every product
        packed_gemm(out[r0:r1, :], x[r0:r1, :], weight[:, :], False, True, has_bias,
                    in_registers)


_linear_forward_task_by_symbol = called_natively(_linear_forward_task)


@sized_kernel(GRAIN, chunk=_linear_forward_task)
def _linear_forward(out, x, weight, bias, has_bias, in_registers, tasks):
    for t in prange(tasks):
        _linear_forward_task_by_symbol((np.int64(t), out, x, weight, bias, has_bias,
                                        in_registers, tasks))


@njit(cache=True, error_model="numpy")
def _linear_backward_task(t, dx, dweight, dbias, dout, x, weight, need_dx, need_dweight,
                          has_bias, nn_in_registers, dweight_driver, tasks):
    """Task t of ``tasks``: its block of token rows of dx, and its block of dW's output (or
    input) features and of db."""
    R, O = dout.shape
    K = x.shape[1]
    r0, r1 = _row_block(t, tasks, R, nn_in_registers)
    if need_dx and r1 > r0:
        # out = x W^T  ->  dx = dout W
        packed_gemm(dx[r0:r1, :], dout[r0:r1, :], weight[:, :], False, False, False,
                    nn_in_registers)
    # out = x W^T  ->  dW += dout^T x, summed over all token rows. Each task packs the
    # whole of one operand and its block of the other: blocks of the wider one, so that
    # less is packed (with K > O, 256 -> 1024 features, 1.19x faster a block, measured).
    o0, o1 = _block(t, tasks, O)
    if need_dweight and K > O:
        k0, k1 = _block(t, tasks, K)
        if k1 > k0:
            gemm_tn(dweight[:, k0:k1], dout[:, :], x[:, k0:k1], True, dweight_driver)
    elif need_dweight and o1 > o0:
        # views of any layout, as in the branch above: gemm_tn compiles once
        gemm_tn(dweight[o0:o1, :], dout[:, o0:o1], x[:, :], True, dweight_driver)
    if has_bias and o1 > o0:
        # out += b  ->  db += sum of dout over rows
        _add_column_sums(dbias, dout, o0, o1)


_linear_backward_task_by_symbol = called_natively(_linear_backward_task)


@sized_kernel(GRAIN, chunk=_linear_backward_task)
def _linear_backward(dx, dweight, dbias, dout, x, weight, need_dx, need_dweight, has_bias,
                     nn_in_registers, dweight_driver, tasks):
    for t in prange(tasks):
        _linear_backward_task_by_symbol((np.int64(t), dx, dweight, dbias, dout, x, weight,
                                         need_dx, need_dweight, has_bias, nn_in_registers,
                                         dweight_driver, tasks))


def _vector(x):
    """The ops layer passes a stand-in for an absent bias (or its gradient), possibly the 2-D
    weight; the kernels type-check the bias branch anyway, so give them a 1-D view."""
    return x.reshape(-1)


def _rows_in_registers(x, weight, columns):
    """True where x W^T (``columns`` the weight's rows) or dout W (its columns) takes the
    register path (float32 only: float64 keeps BLAS's blocks of rows as well as its products;
    on AVX2 small weights only), else None: then the kernels compile BLAS's path only
    (packed_gemm), unless :func:`_path_argument` passes False for it."""
    in_registers = NT_NN_IN_REGISTERS or avx2_in_registers(AVX2_IN_REGISTERS, weight.shape,
                                                           columns)
    return True if in_registers and x.dtype == np.float32 else None


# The launchers (forward, backward) that have run a layer on the register path in this process.
_FLAGGED = set()


def _path_argument(launcher, in_registers, dtype):
    """The ``in_registers`` argument of ``launcher``'s kernel for a layer whose products take
    the register path (``in_registers`` True) or BLAS's (None, :func:`_rows_in_registers`).
    A float32 layer on BLAS passes False instead of None once a layer of this process took the
    register path through the same launcher: the version compiled for that layer (a flag,
    checked at run time) runs BLAS's products as well, where None would compile the kernel a
    second time, for BLAS alone. Most models have both kinds on AVX2: a narrow input or
    output layer, wider ones inside."""
    if in_registers:
        _FLAGGED.add(launcher)
        return True
    if dtype == np.float32 and launcher in _FLAGGED:
        return False
    return None


def _dweight_in_registers(x, weight):
    """Whether dW of a layer with these x (R, K) and weight (O, K) may take the register path
    (AVX-512, gemm_tn: a block of at least MIN_WORK multiply-adds, which the whole product
    bounds; AVX2: a small weight, ``avx2_in_registers``)."""
    return x.dtype == np.float32 and (
        (TN_IN_REGISTERS and x.shape[0] * x.shape[1] * weight.shape[0] >= MIN_WORK)
        or avx2_in_registers(AVX2_IN_REGISTERS, weight.shape, weight.shape[1]))


def linear_forward(out, x, weight, bias, has_bias):
    """out (R, O) = x (R, K) @ weight (O, K)^T (+ bias (O,))."""
    if tile_linear.forward_on_tiles(x, weight) and out.flags.c_contiguous:
        tile_linear.rows_times_weight(out, np.ascontiguousarray(x),
                                      tile_linear.weight_over_inputs(weight), _vector(bias),
                                      has_bias)
        return
    # The thread count is passed in as the number of tasks (a kernel that reads it cannot be
    # cached), the product's path as an argument (so that cached code does not keep it).
    tasks = _linear_forward.threads(x.shape[0] * x.shape[1] * weight.shape[0])
    with single_threaded_blas():
        _linear_forward.run(tasks, out, x, weight, _vector(bias), has_bias, _path_argument(
            "forward", _rows_in_registers(x, weight, weight.shape[0]), x.dtype), tasks)
    if _dweight_in_registers(x, weight):
        # on a first run, a helper compiles the driver for this product's dW meanwhile
        compile_function_elsewhere(DRIVER)


def linear_backward(dx, dweight, dbias, dout, x, weight, need_dx, has_bias):
    """Gradients of linear_forward; dweight and dbias are accumulated (+=), dx is overwritten.

    dx (R, K) is written only when ``need_dx`` (the first layer of a model has no input gradient),
    dweight only when it is not None (a frozen weight).
    """
    if need_dx and tile_linear.backward_on_tiles(x, weight) and dx.flags.c_contiguous:
        tile_linear.rows_times_weight(dx, np.ascontiguousarray(dout),
                                      tile_linear.weight_over_outputs(weight), _vector(dbias),
                                      False)
        need_dx = False
    need_dweight = dweight is not None
    if need_dweight and tile_linear.weight_gradient_on_tiles(x, weight) and \
            dweight.flags.c_contiguous:
        tile_linear.weight_gradient(dweight, np.ascontiguousarray(dout), np.ascontiguousarray(x))
        need_dweight = False
    if not (need_dx or need_dweight or has_bias):
        return
    if dweight is None:
        dweight = weight  # a stand-in of the same type, never written
    tasks = _linear_backward.threads(x.shape[0] * x.shape[1] * weight.shape[0])
    with single_threaded_blas():
        # The products' choices are arguments, so that cached code does not keep them; dW's
        # driver only for a product that may take it: a run of small layers never compiles it.
        _linear_backward.run(tasks, dx, dweight, _vector(dbias), dout, x, weight, need_dx,
                             need_dweight, has_bias, _path_argument(
                                 "backward", _rows_in_registers(x, weight, weight.shape[1]),
                                 x.dtype),
                             driver_address() if _dweight_in_registers(x, weight) else 0,
                             tasks)
