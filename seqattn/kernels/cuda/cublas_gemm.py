"""GEMMs through cuBLAS, by nvmath-python's bindings (the optional ``seqattn[cuda]`` extra).

nvmath-python was chosen over CuPy by dependency weight (nothing was measured on a GPU): it is a
5 MB wheel over cuda-bindings and cuda-core, which numba-cuda already brings, while CuPy brings a
second array library and memory pool. Both reach the same cuBLAS library.

cuBLAS is column-major; seqattn's arrays are row-major. A row-major (R, C) matrix with row stride
ld is, read column-major, its transpose (C, R) with leading dimension ld. So row-major
c = op(a) @ op(b) is column-major c^T = op(b)^T @ op(a)^T: the operands swap places, M and N
swap, and each keeps its own transposition flag (see :func:`column_major_call`).
"""
import functools
from collections import namedtuple

import numpy as np

ColumnMajorCall = namedtuple("ColumnMajorCall",
                             "first_transposed second_transposed m n k first second ldf lds ldc")


def column_major_call(M, N, K, a_transposed, b_transposed, lda, ldb, ldc):
    """The column-major GEMM that computes row-major c (M, N) = op(a) (M, K) @ op(b) (K, N).

    lda, ldb, ldc are the row strides, in elements, of a, b and c as stored. Returns the cuBLAS
    arguments: which stored operand goes ``first`` ("a" or "b") and whether it is transposed,
    the same for ``second``, the sizes m, n, k and the leading dimensions of first, second and c.
    """
    return ColumnMajorCall(b_transposed, a_transposed, N, M, K, "b", "a", ldb, lda, ldc)


def row_stride(shape, strides, itemsize):
    """The leading dimension cuBLAS needs for a row-major 2-D array, in elements, or None when
    its rows are not contiguous or overlap (a transposed or broadcast view)."""
    rows, cols = shape
    if cols > 1 and strides[1] != itemsize:
        return None
    if rows <= 1:
        return max(cols, 1)  # one row: any leading dim >= its width describes it
    if strides[0] % itemsize or strides[0] // itemsize < cols:
        return None
    return strides[0] // itemsize


def _row_stride(x):
    return row_stride(x.shape, x.strides, np.dtype(x.dtype).itemsize)


def _pointer(x):
    return x.__cuda_array_interface__["data"][0]


@functools.lru_cache(maxsize=None)
def _bindings():
    """nvmath's cuBLAS module and a handle, or None when nvmath-python is not installed."""
    try:
        from nvmath.bindings import cublas
    except ImportError:
        return None
    return cublas, cublas.create()


def available():
    """True when nvmath-python's cuBLAS bindings can be imported."""
    return _bindings() is not None


def supports(c, a, b):
    """True when cuBLAS can take these operands as they are (float32/float64, unit inner stride)."""
    dtype = np.dtype(c.dtype)
    if dtype.name not in ("float32", "float64") or np.dtype(a.dtype) != dtype \
            or np.dtype(b.dtype) != dtype:
        return False
    return all(_row_stride(x) is not None for x in (c, a, b))


def cublas_gemm(c, a, b, a_transposed, b_transposed, accumulate):
    """c = op(a) @ op(b) (+ c) by cuBLAS sgemm/dgemm; requires :func:`available` and
    :func:`supports`. Runs on the default stream, like the numba kernels around it."""
    cublas, handle = _bindings()
    M, N = c.shape
    K = a.shape[0] if a_transposed else a.shape[1]
    call = column_major_call(M, N, K, a_transposed, b_transposed, _row_stride(a), _row_stride(b),
                             _row_stride(c))
    operands = {"a": a, "b": b}
    dtype = np.dtype(c.dtype)
    # cuBLAS reads alpha and beta through host pointers (its default pointer mode).
    alpha = np.ones(1, dtype)
    beta = np.full(1, 1 if accumulate else 0, dtype)
    routine = cublas.sgemm if dtype == np.float32 else cublas.dgemm
    op = {False: cublas.Operation.N, True: cublas.Operation.T}
    routine(handle, op[call.first_transposed], op[call.second_transposed], call.m, call.n, call.k,
            alpha.ctypes.data, _pointer(operands[call.first]), call.ldf,
            _pointer(operands[call.second]), call.lds, beta.ctypes.data, _pointer(c), call.ldc)
