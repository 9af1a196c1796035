"""Which BLAS library the CPU kernels' matrix products call, chosen once at import.

Two qualify. SciPy's OpenBLAS is always there (it is the library behind Numba's ``np.dot``).
Intel's MKL is used when the user has installed it (``pip install mkl``) and the CPU is Intel's:
measured single-threaded on the GEMM shapes of the linear layers and attention tiles on a
2-core Intel Xeon (Emerald Rapids), MKL was no slower than SciPy's OpenBLAS on any shape and as
fast as torch (which ships MKL) (``benchmarks/blas.py``; BENCHMARKS.md, "Which BLAS"). On AMD
CPUs MKL is not
chosen: it takes a generic code path there, where OpenBLAS has AVX-512 kernels for Zen 4. The
environment variable ``SEQATTN_CPU_BLAS=openblas`` (or ``mkl``) overrides the choice, to
compare the two.

Both libraries have the Fortran ``sgemm``/``dgemm`` interface (every argument by pointer, 32-bit
integers). Their addresses are registered with LLVM under the names ``seqattn_sgemm`` and
``seqattn_dgemm``, which compiled kernels call: code cached on disk refers to the names, and the
addresses are bound again in each process.

The kernels call BLAS from their own threads, one product per thread, so BLAS must not start
threads of its own: MKL is loaded with its sequential threading layer, and OpenBLAS is held at
one thread around each launch by :func:`single_threaded_blas`.
"""
import contextlib
import ctypes
import functools
import importlib.metadata
import os
import threading

from llvmlite import binding
from numba.extending import get_cython_function_address

OPENBLAS = "openblas"
MKL = "mkl"
SYMBOLS = {"float32": "seqattn_sgemm", "float64": "seqattn_dgemm"}
_MKL_THREADING_SEQUENTIAL = 1
_MKL_INTERFACE_LP64 = 0


def _intel_cpu():
    try:
        with open("/proc/cpuinfo") as info:
            return any(line.startswith("vendor_id") and "GenuineIntel" in line for line in info)
    except OSError:
        return False


def _mkl_runtime_path():
    """The path of MKL's single dynamic library from the ``mkl`` package, or None."""
    try:
        package = importlib.metadata.distribution("mkl")
    except importlib.metadata.PackageNotFoundError:
        return None
    for f in package.files or ():
        if f.name.startswith("libmkl_rt.so"):
            return str(package.locate_file(f))
    return None


def _load_mkl():
    """(sgemm, dgemm) addresses from MKL, sequential, or None when it cannot be had so."""
    path = _mkl_runtime_path()
    if path is None:
        return None
    try:
        lib = ctypes.CDLL(path)
    except OSError:
        return None
    # The layer can be set only before MKL's first call: if another package loaded this MKL
    # with threads already, the call answers with that layer and MKL is not used.
    if lib.MKL_Set_Threading_Layer(_MKL_THREADING_SEQUENTIAL) != _MKL_THREADING_SEQUENTIAL:
        return None
    lib.MKL_Set_Interface_Layer(_MKL_INTERFACE_LP64)
    address = ctypes.cast(lib.sgemm_, ctypes.c_void_p).value, ctypes.cast(
        lib.dgemm_, ctypes.c_void_p).value
    # Keep the library loaded for the life of the process.
    _load_mkl.library = lib
    return address


def _scipy_openblas():
    return tuple(get_cython_function_address("scipy.linalg.cython_blas", name)
                 for name in ("sgemm", "dgemm"))


def _choose():
    wanted = os.environ.get("SEQATTN_CPU_BLAS", "").lower()
    if wanted not in ("", OPENBLAS, MKL):
        raise ValueError(f"SEQATTN_CPU_BLAS is {wanted!r}; expected 'openblas' or 'mkl'")
    if wanted == MKL or (wanted == "" and _intel_cpu()):
        addresses = _load_mkl()
        if addresses is not None:
            return MKL, addresses
        if wanted == MKL:
            raise RuntimeError("SEQATTN_CPU_BLAS=mkl but MKL could not be loaded with its "
                               "sequential threading layer; install it with `pip install mkl`")
    return OPENBLAS, _scipy_openblas()


def openblas_corename():
    """The name of the kernel family SciPy's OpenBLAS chose for this CPU ("Haswell",
    "SkylakeX", ...: its own pick, or the environment's ``OPENBLAS_CORETYPE``), or None where
    the library does not say. SciPy's build prefixes OpenBLAS's exported names with
    ``scipy_``; its Cython wrappers' module links the library, so it answers for both."""
    import scipy.linalg.cython_blas as cython_blas

    try:
        lib = ctypes.CDLL(cython_blas.__file__)
    except OSError:
        return None
    for name in ("scipy_openblas_get_corename", "openblas_get_corename"):
        corename = getattr(lib, name, None)
        if corename is not None:
            corename.restype = ctypes.c_char_p
            return corename().decode()
    return None


LIBRARY, _ADDRESSES = _choose()
# The kernel family of the library the kernels call (None for MKL, or where OpenBLAS does not
# say): packed_gemm takes its own products where this one is narrower than the CPU.
CORENAME = openblas_corename() if LIBRARY == OPENBLAS else None
for _dtype, _address in zip(SYMBOLS, _ADDRESSES):
    binding.add_symbol(SYMBOLS[_dtype], _address)


class _OpenBLASLimit:
    """Holds the loaded OpenBLAS libraries (SciPy's among them) at one thread inside the block.

    Calls the libraries' own get/set functions, found once: threadpoolctl's ``limit`` costs
    about 50 us per use, more than a small linear layer takes. Blocks nest: within a thread,
    the outermost sets one thread and restores what it found, and the blocks inside it cost a
    counter (``fit`` holds one around its steps, inside which each launch opens its own). The
    count is per thread because OpenBLAS may ignore a thread count that another thread than
    the one that lowered it sets back.
    """

    _depth = threading.local()

    def __init__(self, libraries):
        self._libraries = libraries
        self._saved = ()

    def __enter__(self):
        depth = getattr(self._depth, "value", 0)
        self._depth.value = depth + 1
        if depth:
            return
        self._saved = [lib.get_num_threads() for lib in self._libraries]
        for lib, threads in zip(self._libraries, self._saved):
            if threads != 1:
                lib.set_num_threads(1)

    def __exit__(self, *exc):
        self._depth.value -= 1
        if self._depth.value:
            return
        for lib, threads in zip(self._libraries, self._saved):
            if threads != 1:
                lib.set_num_threads(threads)


@functools.cache
def _blas_controllers():
    # SciPy's BLAS is the one kernels call: load it first so the controller sees it.
    import scipy.linalg.cython_blas  # noqa: F401
    from threadpoolctl import ThreadpoolController

    return [c for c in ThreadpoolController().lib_controllers if c.user_api == "blas"]


def single_threaded_blas():
    """A context within which the BLAS that kernels call runs on the calling thread only."""
    if LIBRARY == MKL:
        return contextlib.nullcontext()
    return _OpenBLASLimit(_blas_controllers())
