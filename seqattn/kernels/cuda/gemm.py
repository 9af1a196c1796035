"""The GEMM every CUDA layer kernel calls: cuBLAS when its binding is installed, else numba's.

c (M, N) = op(a) (M, K) @ op(b) (K, N), added to c when ``accumulate``; op transposes an operand
when its flag is set. cuBLAS (``pip install seqattn[cuda]``) serves contiguous-row float32 and
float64 operands; everything else, and every GEMM without the binding or under the CUDA
simulator, runs the register-blocked kernel of :mod:`.sgemm`.
"""
from . import cublas_gemm
from .compile_target import ON_SIMULATOR
from .sgemm import sgemm

CUBLAS = "cublas"
NUMBA = "numba"


def gemm_backend(c, a, b, cublas_available=None):
    """Which implementation :func:`gemm` uses for these operands: CUBLAS or NUMBA.

    ``cublas_available`` says whether the cuBLAS binding can be used; by default, whether it
    imports (never under the simulator, whose arrays cuBLAS cannot read).
    """
    if cublas_available is None:
        cublas_available = not ON_SIMULATOR and cublas_gemm.available()
    return CUBLAS if cublas_available and cublas_gemm.supports(c, a, b) else NUMBA


def gemm(c, a, b, a_transposed, b_transposed, accumulate):
    """c = op(a) @ op(b) (+ c), in place on device arrays."""
    M, N = c.shape
    if M == 0 or N == 0:
        return
    if gemm_backend(c, a, b) == CUBLAS:
        cublas_gemm.cublas_gemm(c, a, b, a_transposed, b_transposed, accumulate)
    else:
        sgemm(c, a, b, a_transposed, b_transposed, accumulate)
