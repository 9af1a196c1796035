"""c = op(a) @ op(b) (+ c) for the linear layers: register_gemm's 12 x 32 register blocks fed
from packed chunks of b (and of a where a is read transposed).

Shapes: op(a) (M, K), op(b) (K, N), c (M, N). The layers' three products:
  dW = dout^T x   a^T b: K the token rows (R = B * N, 8192 in benchmarks/encoder.py), M a
                  thread's block of output features, N the input features (``gemm_tn``);
  y = x W^T       a b^T: M a thread's block of token rows, K the input, N the output features;
  dx = dout W     a b:   M a thread's block of token rows, K the output, N the input features.
Measured single-threaded on the dW shapes (Intel Xeon, Emerald Rapids), this mostly ran faster
than SciPy's OpenBLAS, whose transposed-a path is its slowest on them. On x W^T and dout W
(inner dimension 256-1024) it did not beat OpenBLAS there, and drew with OpenBLAS's SkylakeX
kernel on Zen 5; but it ran well ahead of its Haswell kernel, which OpenBLAS runs where the
environment sets ``OPENBLAS_CORETYPE=Haswell`` (``benchmarks/blas.py``; BENCHMARKS.md, "Linear
layers' products in registers").

The inner dimension is cut into chunks of KC rows. Each chunk of b (KC x NC floats, at most
512 KiB, inside the L2 of Intel's server cores and of Zen 4 and 5) is copied into panels of 32
columns (register_gemm's block width), each panel contiguous, so that the kernel reads b's
rows front to back from L2 and they never fall into the same cache sets (against rows padded
off a multiple of 4 KiB, the layout before, paired medians of 21 single-threaded rounds on the
encoder's dW blocks at a load of 3.6: 0.98-1.06x, 1.02x on average; a small gain, within the
noise on most shapes); a b stored transposed (W in x W^T) is transposed into the panels. Each
strip of MC rows of a^T is transposed into a row-major buffer (register_gemm reads a's rows,
12 at a time, from L1: read as a^T in place, the rows would lie K floats apart); a row-major a
is read in place. The first chunk writes or accumulates into c as asked; the others
accumulate.

The register path is taken where it was measured faster, float32 with OpenBLAS as the BLAS
library. On a CPU with AVX-512 (register_gemm's 12 x 32 blocks): dW always
(``TN_IN_REGISTERS``), x W^T and dout W only where OpenBLAS's kernel is narrower than AVX-512
(``NT_NN_IN_REGISTERS``, from the kernel family OpenBLAS names, ``blas_library.CORENAME``). On
a CPU with AVX2 and FMA but not AVX-512 (register_gemm's 6 x 16 blocks, against OpenBLAS's
Haswell kernel): all three products of a weight of at most AVX2_MAX_WEIGHT entries, each with
at least WIDE columns (``AVX2_IN_REGISTERS``, :func:`avx2_in_registers`); the register path's
lead over OpenBLAS shrinks as the weight grows, and from weights of 128 x 256 (the 4-layer
encoder's too) it no longer leads; a product with fewer columns fills too few lanes of a
block. There dW reads the strips of dout^T in place (``TRANSPOSE_A_STRIPS``): as fast as
transposing them first, and faster with few input features. MKL (when installed,
``blas_library``) ran dW 1.03-1.4x as fast as this driver, so with MKL, on other CPUs, and
for float64 (gradient checks), the products are BLAS's. The choice depends on the layer's
shape only, never on the number of threads that share its rows or features. The choices are
passed to :func:`packed_gemm` as arguments (None for BLAS, whose type leaves the register path
out of the compiled code): code cached on disk must not keep the library of the process that
compiled it. dW is passed the driver's address instead
(:func:`driver_address`, 0 for BLAS), asked for only by launches whose product may take it
(on AVX-512 large enough, MIN_WORK: a run of small layers never compiles the driver there).
"""
import numpy as np
from numba import types
from numba.extending import overload

from .blas_gemm import gemm
from ..called_by_name import address_of, called_at_address, called_by_name
from .blas_library import CORENAME, LIBRARY, OPENBLAS
from ..jit_options import CACHED, njit
from ..llvm_vectors import AVX512
from .register_gemm import IN_REGISTERS, WIDE, register_gemm, transpose

# Rows of the inner dimension per chunk: a 12 x KC strip of a (12 KiB) stays in L1 (32 KiB on
# Zen 4) while the kernel sweeps b's chunk.
KC = 256
# Columns of b per chunk: KC x NC floats = 512 KiB. 1024 measured no faster on the Xeon's 2 MiB
# L2 and would fill Zen 4's 1 MiB. A multiple of WIDE, so that only a product's last panel is
# narrower.
NC = 512
# Rows of a per strip (a^T's transposed: 96 KiB at KC = 256).
MC = 96
# Multiply-adds from which dW takes the register path: a small product spends more in the
# packing buffers' allocation than it gains (benchmarks/small_launches.py, linear_backward with
# K = O = 64: 0.86-0.91x BLAS up to 2^18 multiply-adds, 0.98-1.04x at 2^20-2^22). x W^T and
# dout W need no such floor where they take the register path: against OpenBLAS's Haswell
# kernel they ran 1.06-1.14x as fast at 2^13 multiply-adds (8 x 32 x 32), 1.3-2.7x from 2^16.
MIN_WORK = 1 << 24
# Whether float32 products take the register path in this process (see the module docstring).
TN_IN_REGISTERS = AVX512 and IN_REGISTERS and LIBRARY == OPENBLAS
# OpenBLAS's kernel families (as of 0.3.30) that run AVX-512 at its full width.
WIDE_OPENBLAS_KERNELS = frozenset({"skylakex", "cooperlake", "sapphirerapids"})


def nt_nn_in_registers(tn_in_registers, corename):
    """Whether float32 x W^T and dout W (inner dimension K or O, not all rows as dW's) take
    the register path: where dW does and OpenBLAS runs a kernel narrower than AVX-512."""
    return (tn_in_registers and corename is not None
            and corename.lower() not in WIDE_OPENBLAS_KERNELS)


NT_NN_IN_REGISTERS = nt_nn_in_registers(TN_IN_REGISTERS, CORENAME)
# Whether float32 products of the linear layers may take the register path on a CPU with AVX2
# and FMA but not AVX-512, with OpenBLAS: for weights of at most AVX2_MAX_WEIGHT entries.
AVX2_IN_REGISTERS = not AVX512 and IN_REGISTERS and LIBRARY == OPENBLAS
# The largest weight (out x in entries, 64 KiB of float32) whose products take the register
# path on AVX2: the small models' layers (d_model up to 64: 64 x 192, 128 x 64).
AVX2_MAX_WEIGHT = 1 << 14
# Multiply-adds from which gemm_tn takes the driver it is given: on AVX2 the caller's choice
# (avx2_in_registers) bounds the product from above instead.
TN_MIN_WORK = MIN_WORK if AVX512 else 0


def avx2_in_registers(avx2_in_registers, weight_shape, columns):
    """Whether a float32 product of a layer with a weight of ``weight_shape`` (out, in) takes
    the register path on a CPU with AVX2 but not AVX-512 (``avx2_in_registers``, there
    AVX2_IN_REGISTERS): for weights of at most AVX2_MAX_WEIGHT entries, and products of at
    least WIDE ``columns`` (out for x W^T, in for dout W and dW): fewer leave most lanes of the
    blocks empty, and the narrow blocks' masked loads and stores are slow on AVX2."""
    return (bool(avx2_in_registers) and weight_shape[0] * weight_shape[1] <= AVX2_MAX_WEIGHT
            and columns >= WIDE)


# Whether the driver transposes the strips of an a read transposed (dout in dW) into rows
# (AVX-512, see the module docstring). On AVX2 the 6-row blocks read dout^T in place, six
# neighbouring values of a row of dout a step: as fast as transposing the strips first, and
# faster with few input features (dW's columns), where the transposes weigh more.
TRANSPOSE_A_STRIPS = AVX512
# Padding of the transposed rows of a (16 floats, 64 bytes), so that a row stride of 1024
# floats does not map every row of the strip to the same cache sets.
PAD = 16


@njit(cache=True)
def _copy_into_panels(panels, src):
    """panels (P, K, WIDE)[q, k, :w] = src (K, N)[k, q * WIDE:q * WIDE + w], w the panel's
    width (the last panel may be narrower: its other lanes are left as they are, and the kernel
    masks them off)."""
    N = src.shape[1]
    for k in range(src.shape[0]):
        row = src[k]
        for q in range(panels.shape[0]):
            panel_row = panels[q, k]
            j0 = q * WIDE
            for j in range(min(WIDE, N - j0)):
                panel_row[j] = row[j0 + j]


def _panels_product(c, a, panels, accumulate):
    """c (M, N) = a (M, K) @ b (K, N) (plus c when ``accumulate``), b given as panels (P, K,
    WIDE) with N <= P * WIDE; callable from @njit code only. The register kernel reads the
    panels as they are; where register_gemm is BLAS's (which takes 2-D operands), one product
    per panel."""
    raise NotImplementedError("_panels_product is only callable from @njit code")


@overload(_panels_product, jit_options=CACHED)
def _panels_product_impl(c, a, panels, accumulate):
    if IN_REGISTERS:
        return lambda c, a, panels, accumulate: register_gemm(c, a, panels, 1.0, accumulate)

    def panel_by_panel(c, a, panels, accumulate):
        for q in range(panels.shape[0]):
            j0 = q * WIDE
            j1 = min(c.shape[1], j0 + WIDE)
            register_gemm(c[:, j0:j1], a, panels[q, :, :j1 - j0], 1.0, accumulate)
    return panel_by_panel


@njit(inline="always")
def strip_block(t, tasks, M):
    """Task t's share [start, stop) of the M rows of c, in whole strips of MC rows. A row's
    rounding depends on its strip's number of rows (register_gemm slices the inner dimension
    of more than 24 rows, not of fewer), so rows split over tasks this way get the bits they
    get in one product of all M, whatever the number of tasks."""
    strips = (M + MC - 1) // MC
    return min(M, t * strips // tasks * MC), min(M, (t + 1) * strips // tasks * MC)


@njit(cache=True)
def _transpose_into_panels(panels, src):
    """panels (P, K, WIDE)[q, k, :w] = src (N, K)[q * WIDE + j, k] for j < w, w the panel's
    width (as :func:`_copy_into_panels`, from b stored transposed: W's rows in x W^T)."""
    N = src.shape[0]
    for q in range(panels.shape[0]):
        j0 = q * WIDE
        w = min(WIDE, N - j0)
        transpose(panels[q, :, :w], src[j0:j0 + w])


_F32_VIEW = types.Array(types.float32, 2, "A")
# The register driver's C function (below) and its signature.
DRIVER = "seqattn_packed_gemm_in_registers"
_DRIVER_SIGNATURE = types.void(_F32_VIEW, _F32_VIEW, _F32_VIEW, types.boolean, types.boolean,
                               types.boolean)
# The driver called at an address passed in at run time (dW's, gemm_tn).
_in_registers_at = called_at_address(_DRIVER_SIGNATURE)


# Compiled once and called by name, so that the kernels calling it do not each link, optimize
# and emit its loops again (called_by_name.py).
@called_by_name(DRIVER, _DRIVER_SIGNATURE)
def _in_registers(c, a, b, transpose_a, transpose_b, accumulate):
    """The loops of :func:`gemm_in_registers`."""
    M, N = c.shape
    K = a.shape[0] if transpose_a else a.shape[1]
    if K == 0 or M == 0 or N == 0:
        if not accumulate:
            c[...] = 0
        return
    kc_max, nc_max, mc_max = min(KC, K), min(NC, N), min(MC, M)
    b_pack = np.empty(((nc_max + WIDE - 1) // WIDE, kc_max, WIDE), np.float32)
    a_pack = np.empty((mc_max if transpose_a and TRANSPOSE_A_STRIPS else 0, kc_max + PAD),
                      np.float32)
    for p0 in range(0, K, kc_max):
        p1 = min(K, p0 + kc_max)
        add = accumulate or p0 > 0
        for j0 in range(0, N, nc_max):
            j1 = min(N, j0 + nc_max)
            b_chunk = b_pack[:(j1 - j0 + WIDE - 1) // WIDE, :p1 - p0]
            if transpose_b:
                _transpose_into_panels(b_chunk, b[j0:j1, p0:p1])
            else:
                _copy_into_panels(b_chunk, b[p0:p1, j0:j1])
            for i0 in range(0, M, mc_max):
                i1 = min(M, i0 + mc_max)
                if transpose_a and TRANSPOSE_A_STRIPS:
                    a_strip = a_pack[:i1 - i0, :p1 - p0]
                    transpose(a_strip, a[p0:p1, i0:i1])
                elif transpose_a:
                    a_strip = a[p0:p1, i0:i1].T
                else:
                    # read in place: copying the strip into a_pack ran x W^T and dout W
                    # 1.07-1.2x slower (the copy costs more than its locality gains)
                    a_strip = a[i0:i1, p0:p1]
                _panels_product(c[i0:i1, j0:j1], a_strip, b_chunk, add)


def driver_address():
    """The register driver's address, for :func:`gemm_tn` (compiled or loaded on first use)."""
    return address_of(DRIVER)


@njit(cache=True)
def gemm_in_registers(c, a, b, transpose_a, transpose_b, accumulate):
    """c (M, N) = op(a) @ op(b), plus c when ``accumulate``, float32 through register_gemm;
    op(a) (M, K) is a (K, M)^T when ``transpose_a``, op(b) (K, N) is b (N, K)^T when
    ``transpose_b``. a and b need unit stride along their last axis."""
    _in_registers((c[:, :], a[:, :], b[:, :], transpose_a, transpose_b, accumulate))


def _through_blas(c, a, b, transpose_a, transpose_b, accumulate):
    """The BLAS call of :func:`gemm_through_blas`."""
    K = a.shape[0] if transpose_a else a.shape[1]
    if K == 0:  # BLAS rejects the leading dimension of an empty operand
        if not accumulate:
            c[...] = 0
    else:
        gemm(c, a, b, transpose_a, transpose_b, 1.0, 1.0 if accumulate else 0.0)


# Called by name, one C function per dtype, as _in_registers is (its argument checks and BLAS
# call are 77 KB of IR that a dozen kernels of a first run linked and emitted again).
_THROUGH_BLAS = {
    dtype: called_by_name(f"seqattn_packed_gemm_through_blas_{dtype}", types.void(
        *(types.Array(dtype, 2, "A"),) * 3, types.boolean, types.boolean, types.boolean))(
            _through_blas)
    for dtype in (types.float32, types.float64)}


def _through_blas_of_dtype(c, a, b, transpose_a, transpose_b, accumulate):
    raise NotImplementedError("callable from @njit code only")


@overload(_through_blas_of_dtype, jit_options=CACHED)
def _through_blas_of_dtype_impl(c, a, b, transpose_a, transpose_b, accumulate):
    call = _THROUGH_BLAS.get(c.dtype)
    if call is None:
        return None
    return lambda c, a, b, transpose_a, transpose_b, accumulate: call(
        (c[:, :], a[:, :], b[:, :], transpose_a, transpose_b, accumulate))


@njit(cache=True)
def gemm_through_blas(c, a, b, transpose_a, transpose_b, accumulate):
    """:func:`gemm_in_registers` through BLAS: float64 always, float32 where the register path
    is not taken."""
    _through_blas_of_dtype(c, a, b, transpose_a, transpose_b, accumulate)


def packed_gemm(c, a, b, transpose_a, transpose_b, accumulate, in_registers):
    """c (M, N) = op(a) @ op(b), plus c when ``accumulate`` (op as in
    :func:`gemm_in_registers`); callable from @njit code only. a, b and c need unit stride
    along their last axis (row-major arrays and their row or column blocks). float32 runs
    :func:`gemm_in_registers` when ``in_registers``; otherwise, and float64,
    :func:`gemm_through_blas`. ``in_registers`` None chooses BLAS when compiled: the register
    driver, the larger part of a first run's linear forward, is then not compiled in; an
    integer is the driver's address (:func:`driver_address`), 0 for BLAS. The caller decides
    on the product's size (see MIN_WORK)."""
    raise NotImplementedError("packed_gemm is only callable from @njit code")


@overload(packed_gemm, jit_options=CACHED)
def _packed_gemm_impl(c, a, b, transpose_a, transpose_b, accumulate, in_registers):
    if c.dtype == types.float32 and isinstance(in_registers, types.Integer):
        def by_address(c, a, b, transpose_a, transpose_b, accumulate, in_registers):
            if in_registers != 0:
                _in_registers_at(in_registers, (c[:, :], a[:, :], b[:, :], transpose_a,
                                                transpose_b, accumulate))
            else:
                gemm_through_blas(c, a, b, transpose_a, transpose_b, accumulate)
        return by_address
    if c.dtype == types.float32 and not isinstance(in_registers, types.NoneType):
        def by_flag(c, a, b, transpose_a, transpose_b, accumulate, in_registers):
            if in_registers:
                # as views of any layout: one compiled driver for every caller's layouts
                gemm_in_registers(c[:, :], a[:, :], b[:, :], transpose_a, transpose_b,
                                  accumulate)
            else:
                gemm_through_blas(c, a, b, transpose_a, transpose_b, accumulate)
        return by_flag
    return lambda c, a, b, transpose_a, transpose_b, accumulate, in_registers: \
        gemm_through_blas(c, a, b, transpose_a, transpose_b, accumulate)


@njit(cache=True)
def gemm_tn(c, a, b, accumulate, driver):
    """c (M, N) = a (K, M)^T @ b (K, N), plus c when ``accumulate`` (dW = dout^T x): through
    :func:`packed_gemm`, in registers at ``driver`` (:func:`driver_address`, where
    ``TN_IN_REGISTERS`` or :func:`avx2_in_registers`; 0 for BLAS) when the product has at
    least TN_MIN_WORK multiply-adds."""
    big = c.shape[0] * c.shape[1] * a.shape[0] >= TN_MIN_WORK
    # views of any layout: one compiled packed_gemm for the blocks of either operand
    packed_gemm(c[:, :], a[:, :], b[:, :], True, False, accumulate, driver if big else 0)
