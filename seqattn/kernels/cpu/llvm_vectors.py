"""Building blocks for the CPU kernels written in LLVM IR with explicit <16 x float> vectors
(register_gemm, softmax_rows, structured_bias_rows): the vector types, intrinsic declarations,
broadcasts and tail masks, and whether the CPU that Numba compiles for has AVX-512. Numba's own
loops are vectorised only 256 bits wide on Intel's server cores, so the kernels that must run
16 lanes wide say so in IR."""
from llvmlite import binding, ir
from numba import types
from numba.core import cgutils, config
from numba.core.imputils import impl_ret_borrowed
from numba.extending import intrinsic

LANES = 16
F32 = ir.FloatType()
I32 = ir.IntType(32)
VEC = ir.VectorType(F32, LANES)
MASK = ir.VectorType(ir.IntType(1), LANES)


def has_avx512(cpu_features):
    """Whether ``cpu_features`` (as LLVM writes them: "+avx512f,-amx-tile,...") include
    AVX-512 F: 32 registers of 16 floats, and instructions such as scalef."""
    return "+avx512f" in cpu_features.split(",")


def has_avx2_fma(cpu_features):
    """Whether ``cpu_features`` include AVX2 and FMA: 16 registers of 8 floats, fused
    multiply-adds (Haswell and Zen on)."""
    features = cpu_features.split(",")
    return "+avx2" in features and "+fma" in features


def target_features():
    """The features of the CPU that Numba compiles for: the host's, or those that
    NUMBA_CPU_FEATURES names (Numba's own setting, with NUMBA_CPU_NAME, for code cached for
    other machines; tests/kernels/test_avx2_kernels.py compiles for AVX2 with it)."""
    return config.CPU_FEATURES or binding.get_host_cpu_features().flatten()


# Read once: the kernels choose their code at compile time from them.
TARGET_FEATURES = target_features()
AVX512 = has_avx512(TARGET_FEATURES)


def declare(module, name, ret, args):
    """The function ``name`` (ret, args) declared in module (once)."""
    return cgutils.get_or_insert_function(module, ir.FunctionType(ret, args), name)


def masked_load(module, lanes=LANES):
    """llvm.masked.load for vectors of ``lanes`` floats (VEC by default): (pointer, alignment,
    mask, values of the masked-off lanes)."""
    vector, mask = ir.VectorType(F32, lanes), ir.VectorType(ir.IntType(1), lanes)
    return declare(module, f"llvm.masked.load.v{lanes}f32.p0", vector,
                   [vector.as_pointer(), I32, mask, vector])


def masked_store(module, lanes=LANES):
    """llvm.masked.store for vectors of ``lanes`` floats (VEC by default): (values, pointer,
    alignment, mask)."""
    vector, mask = ir.VectorType(F32, lanes), ir.VectorType(ir.IntType(1), lanes)
    return declare(module, f"llvm.masked.store.v{lanes}f32.p0", ir.VoidType(),
                   [vector, vector.as_pointer(), I32, mask])


def vector_at(builder, base, offset, lanes=LANES):
    """The address of the vector of ``lanes`` floats (VEC by default) at element ``offset``
    from the float pointer ``base``."""
    return builder.bitcast(builder.gep(base, [offset]), ir.VectorType(F32, lanes).as_pointer())


def splat(builder, value, vector_type):
    """``value`` in every lane of a vector of type ``vector_type``."""
    v = builder.insert_element(ir.Constant(vector_type, ir.Undefined), value, ir.Constant(I32, 0))
    return builder.shuffle_vector(v, v, ir.Constant(ir.VectorType(I32, vector_type.count),
                                                    [0] * vector_type.count))


def lanes_below(builder, count, lanes=LANES):
    """The mask of lanes 0 .. count - 1 of a vector of ``lanes`` (``count`` an integer of any
    width; all lanes when count >= lanes, none when count <= 0)."""
    index = ir.VectorType(count.type, lanes)
    return builder.icmp_signed("<", ir.Constant(index, list(range(lanes))),
                               splat(builder, count, index))


@intrinsic
def unit_stride_row(typingctx, x):
    """The 1-D array x typed as C-contiguous (the same data, shape and strides), for a row
    whose unit stride the caller guarantees: a row of the attention's padded score tiles
    (layout "A"), over which Numba's loops are otherwise not vectorised (3-4x slower)."""
    if not (isinstance(x, types.Array) and x.ndim == 1):
        return None
    contiguous = x.copy(layout="C")

    def codegen(context, builder, signature, args):
        return impl_ret_borrowed(context, builder, contiguous, args[0])

    return contiguous(x), codegen
