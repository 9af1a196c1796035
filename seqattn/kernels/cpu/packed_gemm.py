"""c = a^T @ b (+ c) over a long inner dimension, the weight gradient's product dW = dout^T x:
register_gemm's 12 x 32 register blocks fed from packed chunks of a and b.

Shapes: a (K, M), b (K, N), c (M, N); in the linear layers' backward K is the token rows
(R = B * N, 8192 in benchmarks/encoder.py), M a thread's block of output features, N the input
features. Measured single-threaded on those shapes (Intel Xeon, Emerald Rapids; BENCHMARKS.md,
"CPU machines and the BLAS the kernels call"), this ran 0.93-1.25x as fast as SciPy's OpenBLAS
(mostly 1.05-1.2x), whose transposed-a path is its slowest on them; on the other linear
products (x W^T and dout W, inner dimension 256-1024) the same driver was 0.7-1.1x OpenBLAS, so
those stay on BLAS.

The inner dimension is cut into chunks of KC rows. Each chunk of b (KC x NC floats, at most
512 KiB, inside the L2 of Intel's server cores and of Zen 4) is copied into panels of 32
columns (register_gemm's block width), each panel contiguous, so that the kernel reads b's
rows front to back from L2 and they never fall into the same cache sets (against rows padded
off a multiple of 4 KiB, the layout before, paired medians of 21 single-threaded rounds on the
encoder's dW blocks at a load of 3.6: 0.98-1.06x, 1.02x on average; a small gain, within the
noise on most shapes); each strip of MC rows of a^T is
transposed into a row-major buffer (register_gemm reads a's rows, 12 at a time, from L1: read
as a^T in place, the rows would lie K floats apart). The first chunk writes or accumulates
into c as asked; the others accumulate.

The register path is taken where it was measured faster: float32, a CPU with AVX-512 (as
register_gemm decides, ``IN_REGISTERS``) and OpenBLAS as the BLAS library. MKL (when installed,
``blas_library``) ran these products 1.03-1.4x as fast as this driver, so with MKL, on CPUs
without AVX-512 and for float64 (gradient checks), the product is BLAS's. The choice is passed to
:func:`gemm_tn` at run time (``TN_IN_REGISTERS``): code cached on disk must not keep the
library of the process that compiled it.
"""
import numpy as np
from numba import njit, types
from numba.extending import overload

from .blas_gemm import gemm
from .blas_library import LIBRARY, OPENBLAS
from .register_gemm import IN_REGISTERS, WIDE, register_gemm, transpose

# Rows of the inner dimension per chunk: a 12 x KC strip of a (12 KiB) stays in L1 (32 KiB on
# Zen 4) while the kernel sweeps b's chunk.
KC = 256
# Columns of b per chunk: KC x NC floats = 512 KiB. 1024 measured no faster on the Xeon's 2 MiB
# L2 and would fill Zen 4's 1 MiB. A multiple of WIDE, so that only a product's last panel is
# narrower.
NC = 512
# Rows of a^T transposed per strip (96 KiB at KC = 256).
MC = 96
# Multiply-adds from which float32 takes the register path: a small product spends more in the
# packing buffers' allocation than it gains (benchmarks/small_launches.py, linear_backward with
# K = O = 64: 0.86-0.91x BLAS up to 2^18 multiply-adds, 0.98-1.04x at 2^20-2^22).
MIN_WORK = 1 << 24
# Whether float32 products take the register path in this process (see the module docstring).
TN_IN_REGISTERS = IN_REGISTERS and LIBRARY == OPENBLAS
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
    panels as they are; without AVX-512 (where register_gemm is BLAS's, which takes 2-D
    operands) one product per panel."""
    raise NotImplementedError("_panels_product is only callable from @njit code")


@overload(_panels_product, jit_options={"cache": True})
def _panels_product_impl(c, a, panels, accumulate):
    if IN_REGISTERS:
        return lambda c, a, panels, accumulate: register_gemm(c, a, panels, 1.0, accumulate)

    def panel_by_panel(c, a, panels, accumulate):
        for q in range(panels.shape[0]):
            j0 = q * WIDE
            j1 = min(c.shape[1], j0 + WIDE)
            register_gemm(c[:, j0:j1], a, panels[q, :, :j1 - j0], 1.0, accumulate)
    return panel_by_panel


@njit(cache=True)
def register_gemm_tn(c, a, b, accumulate):
    """c (M, N) = a (K, M)^T @ b (K, N), plus c when ``accumulate``, float32 through
    register_gemm. a and b need unit stride along their last axis."""
    M, N = c.shape
    K = a.shape[0]
    if K == 0 or M == 0 or N == 0:
        if not accumulate:
            c[...] = 0
        return
    kc_max, nc_max, mc_max = min(KC, K), min(NC, N), min(MC, M)
    b_pack = np.empty(((nc_max + WIDE - 1) // WIDE, kc_max, WIDE), np.float32)
    a_pack = np.empty((mc_max, kc_max + PAD), np.float32)
    for p0 in range(0, K, kc_max):
        p1 = min(K, p0 + kc_max)
        add = accumulate or p0 > 0
        for j0 in range(0, N, nc_max):
            j1 = min(N, j0 + nc_max)
            b_chunk = b_pack[:(j1 - j0 + WIDE - 1) // WIDE, :p1 - p0]
            _copy_into_panels(b_chunk, b[p0:p1, j0:j1])
            for i0 in range(0, M, mc_max):
                i1 = min(M, i0 + mc_max)
                a_strip = a_pack[:i1 - i0, :p1 - p0]
                transpose(a_strip, a[p0:p1, i0:i1])
                _panels_product(c[i0:i1, j0:j1], a_strip, b_chunk, add)


@njit(cache=True)
def blas_gemm_tn(c, a, b, accumulate):
    """gemm_tn through BLAS: float64 always, float32 on a CPU without AVX-512."""
    if a.shape[0] == 0:  # BLAS rejects the leading dimension of an empty operand
        if not accumulate:
            c[...] = 0
    else:
        gemm(c, a, b, True, False, 1.0, 1.0 if accumulate else 0.0)


def gemm_tn(c, a, b, accumulate, in_registers):
    """c (M, N) = a (K, M)^T @ b (K, N), plus c when ``accumulate``; callable from @njit code
    only. a, b and c need unit stride along their last axis (row-major arrays and their row or
    column blocks). float32 products of at least MIN_WORK multiply-adds run
    :func:`register_gemm_tn` when ``in_registers`` (pass ``TN_IN_REGISTERS``); others, and
    float64, :func:`blas_gemm_tn`."""
    raise NotImplementedError("gemm_tn is only callable from @njit code")


@overload(gemm_tn, jit_options={"cache": True})
def _gemm_tn_impl(c, a, b, accumulate, in_registers):
    if c.dtype == types.float32:
        def by_size(c, a, b, accumulate, in_registers):
            if in_registers and c.shape[0] * c.shape[1] * a.shape[0] >= MIN_WORK:
                register_gemm_tn(c, a, b, accumulate)
            else:
                blas_gemm_tn(c, a, b, accumulate)
        return by_size
    return lambda c, a, b, accumulate, in_registers: blas_gemm_tn(c, a, b, accumulate)
