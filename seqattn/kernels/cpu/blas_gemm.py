"""C = alpha * op(A) @ op(B) + beta * C on row-major 2-D views, callable from @njit code.

Numba's ``np.dot`` allocates its result and takes only contiguous operands. The layer kernels
need more: write a block of rows or columns of an existing array in place, accumulate into a
gradient (beta = 1), and read a column block of a row-major matrix without copying it. This
calls the same BLAS entry point ``np.dot`` uses (Numba's ``numba_xxgemm``, SciPy's OpenBLAS).

Operands must have unit stride along their last axis (C-contiguous arrays and their row or
column slices do); the leading dimension is the row stride. Callers keep BLAS single-threaded
around parallel regions that call this (``kernels/cpu/blas_threads.py``).
"""
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic
from numba.np.linalg import ensure_blas, get_blas_kind

_CHAR = ir.IntType(8)


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
        intp = context.get_value_type(types.intp)
        void_p = cgutils.voidptr_t
        itemsize = context.get_constant(types.intp, context.get_abi_sizeof(
            context.get_data_type(dtype)))

        def shape(arr, i):
            return builder.extract_value(arr.shape, i)

        def leading(arr):
            return builder.sdiv(builder.extract_value(arr.strides, 0), itemsize)

        def trans_char(flag):
            return builder.select(flag, ir.Constant(_CHAR, ord("t")), ir.Constant(_CHAR, ord("n")))

        M, N = shape(c_arr, 0), shape(c_arr, 1)
        K = builder.select(flag_a, shape(a_arr, 0), shape(a_arr, 1))
        alpha_slot = cgutils.alloca_once_value(builder, context.cast(
            builder, args[5], signature.args[5], dtype))
        beta_slot = cgutils.alloca_once_value(builder, context.cast(
            builder, args[6], signature.args[6], dtype))
        fnty = ir.FunctionType(ir.IntType(32), [_CHAR, _CHAR, _CHAR, intp, intp, intp, void_p,
                                                void_p, intp, void_p, intp, void_p, void_p,
                                                intp])
        fn = cgutils.get_or_insert_function(builder.module, fnty, "numba_xxgemm")
        # BLAS is column-major: a row-major (M, N) block is its (N, M) transpose, so ask for
        # c^T = op(b)^T op(a)^T, i.e. swap the operands and keep each one's transpose flag.
        kind = ir.Constant(_CHAR, ord(get_blas_kind(dtype)))
        builder.call(fn, (kind, trans_char(flag_b), trans_char(flag_a), N, M, K,
                          builder.bitcast(alpha_slot, void_p),
                          builder.bitcast(b_arr.data, void_p), leading(b_arr),
                          builder.bitcast(a_arr.data, void_p), leading(a_arr),
                          builder.bitcast(beta_slot, void_p),
                          builder.bitcast(c_arr.data, void_p), leading(c_arr)))
        return context.get_dummy_value()

    return types.none(c, a, b, transpose_a, transpose_b, alpha, beta), codegen


ensure_blas()
