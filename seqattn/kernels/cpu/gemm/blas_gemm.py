"""C = alpha * op(A) @ op(B) + beta * C on row-major 2-D views, callable from @njit code.

Numba's ``np.dot`` allocates its result and takes only contiguous operands. The layer kernels
need more: write a block of rows or columns of an existing array in place, accumulate into a
gradient (beta = 1), and read a column block of a row-major matrix without copying it. This
calls the BLAS library chosen in ``blas_library.py`` (MKL or SciPy's OpenBLAS) through its
Fortran interface.

Operands must have unit stride along their last axis (C-contiguous arrays and their row or
column slices do); the leading dimension is the row stride. Callers keep BLAS single-threaded
around parallel regions that call this (``blas_library.single_threaded_blas``).
"""
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from .blas_library import SYMBOLS

_CHAR = ir.IntType(8)
_INT = ir.IntType(32)


@intrinsic
def gemm(typingctx, c, a, b, transpose_a, transpose_b, alpha, beta):
    """c (M, N) = alpha * op(a) @ op(b) + beta * c, op transposing when its flag is true.

    Shapes: op(a) (M, K), op(b) (K, N); a, b and c share a float dtype.
    """
    if not all(isinstance(x, types.Array) and x.ndim == 2 for x in (c, a, b)):
        return None
    if not (c.dtype == a.dtype == b.dtype) or c.dtype not in (types.float32, types.float64):
        return None
    dtype = c.dtype

    def codegen(context, builder, signature, args):
        c_arr, a_arr, b_arr = (context.make_array(t)(context, builder, v)
                               for t, v in zip(signature.args[:3], args[:3]))
        flag_a, flag_b = args[3], args[4]
        void_p = cgutils.voidptr_t
        itemsize = context.get_constant(types.intp, context.get_abi_sizeof(
            context.get_data_type(dtype)))

        def by_pointer(value, kind=_INT):
            """A stack slot holding value (Fortran passes every argument by reference)."""
            if kind is _INT:
                value = builder.trunc(value, _INT)
            return builder.bitcast(cgutils.alloca_once_value(builder, value), void_p)

        def shape(arr, i):
            return builder.extract_value(arr.shape, i)

        def leading(arr):
            return by_pointer(builder.sdiv(builder.extract_value(arr.strides, 0), itemsize))

        def trans_char(flag):
            return by_pointer(builder.select(flag, ir.Constant(_CHAR, ord("T")),
                                             ir.Constant(_CHAR, ord("N"))), _CHAR)

        def scalar(i):
            return by_pointer(context.cast(builder, args[i], signature.args[i], dtype), None)

        M, N = shape(c_arr, 0), shape(c_arr, 1)
        K = builder.select(flag_a, shape(a_arr, 0), shape(a_arr, 1))
        fnty = ir.FunctionType(ir.VoidType(), [void_p] * 13)
        fn = cgutils.get_or_insert_function(builder.module, fnty, SYMBOLS[str(dtype)])
        # BLAS is column-major: a row-major (M, N) block is its (N, M) transpose, so ask for
        # c^T = op(b)^T op(a)^T, i.e. swap the operands and keep each one's transpose flag.
        builder.call(fn, (trans_char(flag_b), trans_char(flag_a), by_pointer(N), by_pointer(M),
                          by_pointer(K), scalar(5),
                          builder.bitcast(b_arr.data, void_p), leading(b_arr),
                          builder.bitcast(a_arr.data, void_p), leading(a_arr), scalar(6),
                          builder.bitcast(c_arr.data, void_p), leading(c_arr)))
        return context.get_dummy_value()

    return types.none(c, a, b, transpose_a, transpose_b, alpha, beta), codegen
