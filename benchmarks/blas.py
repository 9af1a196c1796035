"""Benchmark SGEMM of each BLAS library the CPU kernels could call, on the shapes they call it
with: the evidence for the choice in seqattn/kernels/cpu/blas_library.py.

Contenders, each single-threaded (the kernels run one product per thread): SciPy's OpenBLAS
(what Numba's np.dot calls), MKL from the ``mkl`` package when installed, NumPy's OpenBLAS and
torch's CPU GEMM as references, and on the linear layers' shapes seqattn's register-blocked
``packed_gemm.gemm_in_registers`` where the CPU has AVX-512 or AVX2 and FMA (the layers call
it on AVX-512 for dout^T x, and for x W^T and dout W where OpenBLAS runs a narrower kernel; on
AVX2 for all three products of small weights; it prints which).
Shapes: the 4-layer encoder's linear layers (benchmarks/
encoder.py, a thread's block of 4096 of 8192 token rows), small models' x W^T, dout W (1024
token rows, d_model 16-64) and weight gradients (below ``packed_gemm.MIN_WORK``), attention
tiles (256 queries x 512 keys, D 32, 64 and 128) and a square 2048 product for the machine's
rate; then the square product on all threads through NumPy and torch. Prints GFLOP/s, the
fastest of many short alternating rounds: on a shared machine a short round often escapes the
other users' load, and what load there is falls on every contender alike.

    python benchmarks/blas.py
"""
import argparse
import ctypes
import os
import platform
import time

import numpy as np

SHAPES = [  # name, M, N, K, transpose a, transpose b (row-major c = op(a) op(b))
    ("linear x W^T, 4096 x 768 x 256", 4096, 768, 256, False, True),
    ("linear x W^T, 4096 x 1024 x 256", 4096, 1024, 256, False, True),
    ("linear x W^T, 4096 x 256 x 1024", 4096, 256, 1024, False, True),
    ("linear x W^T, 4096 x 256 x 256", 4096, 256, 256, False, True),
    ("linear dout W, 4096 x 256 x 768", 4096, 256, 768, False, False),
    ("linear dout W, 4096 x 256 x 1024", 4096, 256, 1024, False, False),
    ("linear dout W, 4096 x 1024 x 256", 4096, 1024, 256, False, False),
    ("linear dout W, 4096 x 256 x 256", 4096, 256, 256, False, False),
    ("linear dout^T x, 384 x 256 x 8192", 384, 256, 8192, True, False),
    ("linear dout^T x, 128 x 256 x 8192", 128, 256, 8192, True, False),
    ("linear dout^T x, 512 x 256 x 8192", 512, 256, 8192, True, False),
    ("linear dout^T x, 128 x 1024 x 8192", 128, 1024, 8192, True, False),
    # small models' x W^T and dout W (d_model 16-64: q, k, v 3 d_model, FFN 2 d_model)
    ("linear x W^T, 1024 x 192 x 64", 1024, 192, 64, False, True),
    ("linear x W^T, 1024 x 64 x 128", 1024, 64, 128, False, True),
    ("linear x W^T, 1024 x 96 x 32", 1024, 96, 32, False, True),
    ("linear x W^T, 1024 x 48 x 16", 1024, 48, 16, False, True),
    ("linear dout W, 1024 x 64 x 192", 1024, 64, 192, False, False),
    ("linear dout W, 1024 x 128 x 64", 1024, 128, 64, False, False),
    ("linear dout W, 1024 x 32 x 96", 1024, 32, 96, False, False),
    ("linear dout W, 1024 x 16 x 48", 1024, 16, 48, False, False),
    # small models' dW (d_model 16-64, FFN 2 d_model, 256-1024 token rows): below MIN_WORK
    ("linear dout^T x, 64 x 64 x 368", 64, 64, 368, True, False),
    ("linear dout^T x, 128 x 64 x 736", 128, 64, 736, True, False),
    ("linear dout^T x, 64 x 64 x 1024", 64, 64, 1024, True, False),
    ("linear dout^T x, 32 x 32 x 1024", 32, 32, 1024, True, False),
    ("linear dout^T x, 16 x 16 x 256", 16, 16, 256, True, False),
    ("scores q k^T, 256 x 512 x 32", 256, 512, 32, False, True),
    ("scores q k^T, 256 x 512 x 64", 256, 512, 64, False, True),
    ("scores q k^T, 256 x 512 x 128", 256, 512, 128, False, True),
    ("output P V, 256 x 64 x 512", 256, 64, 512, False, False),
    ("output P V, 256 x 128 x 512", 256, 128, 512, False, False),
    ("square 2048", 2048, 2048, 2048, False, False),
]

_INT_P = ctypes.POINTER(ctypes.c_int)
_FLOAT_P = ctypes.POINTER(ctypes.c_float)
_FORTRAN_SGEMM = ctypes.CFUNCTYPE(None, ctypes.c_char_p, ctypes.c_char_p, _INT_P, _INT_P, _INT_P,
                                  _FLOAT_P, ctypes.c_void_p, _INT_P, ctypes.c_void_p, _INT_P,
                                  _FLOAT_P, ctypes.c_void_p, _INT_P)


def fortran_sgemms():
    """{name: Fortran sgemm} for SciPy's OpenBLAS and, when installed, sequential MKL."""
    from numba.extending import get_cython_function_address

    from seqattn.kernels.cpu.gemm import blas_library

    found = {"SciPy OpenBLAS": _FORTRAN_SGEMM(get_cython_function_address(
        "scipy.linalg.cython_blas", "sgemm"))}
    path = blas_library._mkl_runtime_path()
    if path:
        mkl = ctypes.CDLL(path)
        mkl.MKL_Set_Threading_Layer(1)  # sequential
        found["MKL"] = _FORTRAN_SGEMM(("sgemm_", mkl))
    return found


def row_major(sgemm, c, a, b, ta, tb):
    """c = op(a) op(b) on row-major arrays (or their column blocks): column-major
    c^T = op(b)^T op(a)^T, each leading dimension the row stride."""
    M, N = c.shape
    K = a.shape[0] if ta else a.shape[1]
    ints = [ctypes.c_int(v) for v in (N, M, K) + tuple(x.strides[0] // x.itemsize
                                                        for x in (b, a, c))]
    one, zero = ctypes.c_float(1.0), ctypes.c_float(0.0)
    n, m, k, ldb, lda, ldc = (ctypes.byref(v) for v in ints)
    sgemm(b"T" if tb else b"N", b"T" if ta else b"N", n, m, k, ctypes.byref(one), b.ctypes.data,
          ldb, a.ctypes.data, lda, ctypes.byref(zero), c.ctypes.data, ldc)


def register_linear():
    """c = op(a) op(b) through packed_gemm's register path, or None on a CPU with neither
    AVX-512 nor AVX2 and FMA."""
    from seqattn.kernels.cpu.gemm.packed_gemm import gemm_in_registers
    from seqattn.kernels.cpu.gemm.register_gemm import IN_REGISTERS

    if not IN_REGISTERS:
        return None
    return lambda c, a, b, ta, tb: gemm_in_registers(c, a, b, ta, tb, False)


def layers_take_registers(M, N, K, ta, tb):
    """Whether the linear layers take the register path for this product (float32)."""
    from seqattn.kernels.cpu.gemm import packed_gemm

    if ta:  # dout^T x: large enough products on AVX-512 (MIN_WORK, a thread's block)
        return (packed_gemm.TN_IN_REGISTERS and M * N * K >= packed_gemm.MIN_WORK
                or packed_gemm.avx2_in_registers(packed_gemm.AVX2_IN_REGISTERS, (M, N), N))
    weight = (N, K) if tb else (K, N)  # x W^T: W (O, K) = (N, K); dout W: W (O, K) = (K, N)
    return packed_gemm.NT_NN_IN_REGISTERS or packed_gemm.avx2_in_registers(
        packed_gemm.AVX2_IN_REGISTERS, weight, N)


def rates(calls, flop, rounds):
    inner = max(1, int(2e7 / flop))
    best = {name: float("inf") for name in calls}
    for _ in range(rounds):
        for name, call in calls.items():
            start = time.perf_counter()
            for _ in range(inner):
                call()
            best[name] = min(best[name], (time.perf_counter() - start) / inner)
    return {name: flop / t / 1e9 for name, t in best.items()}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    args = parser.parse_args()
    import torch
    from threadpoolctl import threadpool_info, threadpool_limits

    rng = np.random.default_rng(0)
    sgemms = fortran_sgemms()
    registers = register_linear()
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
          f"torch {torch.__version__}; 1-min load average {os.getloadavg()[0]:.1f}")
    for lib in threadpool_info():
        print(f"  {lib['internal_api']} {lib['version']} ({lib.get('architecture')}): "
              f"{os.path.basename(lib['filepath'])}")
    names = list(sgemms) + ["NumPy OpenBLAS", "torch"] + (["registers"] if registers else [])
    print(f"\nsingle-threaded GFLOP/s\n{'shape':36s}" + "".join(f"{n:>16s}" for n in names))
    torch.set_num_threads(1)
    for name, M, N, K, ta, tb in SHAPES:
        # dout^T x reads a thread's block of dout's columns: a view of a wider matrix
        a = rng.standard_normal((K, 2 * M) if ta else (M, K), dtype=np.float32)[:, :M if ta else K]
        b = rng.standard_normal((N, K) if tb else (K, N), dtype=np.float32)
        c = np.empty((M, N), np.float32)
        opa, opb = (a.T if ta else a), (b.T if tb else b)
        want = opa.astype(np.float64) @ opb.astype(np.float64)
        calls = {n: (lambda f=f: row_major(f, c, a, b, ta, tb)) for n, f in sgemms.items()}
        calls["NumPy OpenBLAS"] = lambda: np.matmul(opa, opb, out=c)
        ta_, tb_, tc_ = (torch.from_numpy(v) for v in (opa, opb, c))
        calls["torch"] = lambda: torch.mm(ta_, tb_, out=tc_)
        if registers and name.startswith("linear"):
            calls["registers"] = lambda: registers(c, a, b, ta, tb)
        with threadpool_limits(1):
            for contender, call in calls.items():
                call()
                np.testing.assert_allclose(c, want, rtol=1e-3, atol=1e-3 * np.sqrt(K),
                                           err_msg=contender)
            got = rates(calls, 2.0 * M * N * K, args.rounds)
        taken = (" (layers: registers)" if name.startswith("linear")
                 and layers_take_registers(M, N, K, ta, tb) else "")
        print(f"{name:36s}" + "".join(f"{got[n]:16.1f}" if n in got else f"{'-':>16s}"
                                      for n in names) + taken, flush=True)
    a = rng.standard_normal((2048, 2048), dtype=np.float32)
    c = np.empty_like(a)
    torch.set_num_threads(args.threads)
    ta_, tc_ = torch.from_numpy(a), torch.from_numpy(c)
    with threadpool_limits(args.threads):
        got = rates({"NumPy OpenBLAS": lambda: np.matmul(a, a, out=c),
                     "torch": lambda: torch.mm(ta_, ta_, out=tc_)}, 2.0 * 2048 ** 3, args.rounds)
    print(f"\nsquare 2048 on {args.threads} threads: NumPy OpenBLAS {got['NumPy OpenBLAS']:.1f}, "
          f"torch {got['torch']:.1f} GFLOP/s")


if __name__ == "__main__":
    main()
