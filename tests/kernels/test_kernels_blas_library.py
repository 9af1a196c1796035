"""The BLAS library behind the CPU kernels' products (seqattn/kernels/cpu/blas_library.py):
the choice and its override, and the single-thread limit around launches. The products
themselves are checked in tests/kernels/test_kernels_gemm.py with whichever library was chosen."""
import importlib.metadata

import pytest
from numba.extending import get_cython_function_address
from threadpoolctl import threadpool_info

from seqattn.kernels.cpu.gemm import blas_library


def _mkl_installed():
    try:
        importlib.metadata.distribution("mkl")
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


def test_override_names_the_variable_when_unknown(monkeypatch):
    monkeypatch.setenv("SEQATTN_CPU_BLAS", "atlas")
    with pytest.raises(ValueError, match="SEQATTN_CPU_BLAS.*'openblas' or 'mkl'"):
        blas_library._choose()


def test_openblas_override_takes_scipys_routines(monkeypatch):
    monkeypatch.setenv("SEQATTN_CPU_BLAS", "openblas")
    library, addresses = blas_library._choose()
    assert library == blas_library.OPENBLAS
    assert addresses == tuple(get_cython_function_address("scipy.linalg.cython_blas", name)
                              for name in ("sgemm", "dgemm"))


@pytest.mark.skipif(_mkl_installed(), reason="MKL is installed")
def test_mkl_override_without_mkl_says_how_to_install_it(monkeypatch):
    monkeypatch.setenv("SEQATTN_CPU_BLAS", "mkl")
    with pytest.raises(RuntimeError, match="pip install mkl"):
        blas_library._choose()


@pytest.mark.skipif(not _mkl_installed(), reason="MKL is not installed")
def test_mkl_override_loads_mkl(monkeypatch):
    monkeypatch.setenv("SEQATTN_CPU_BLAS", "mkl")
    library, addresses = blas_library._choose()
    assert library == blas_library.MKL and all(addresses)


def _blas_threads():
    return [lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"]


@pytest.mark.skipif(blas_library.LIBRARY != blas_library.OPENBLAS, reason="MKL is sequential")
def test_openblas_runs_one_thread_inside_the_limit_and_as_before_after_it():
    before = _blas_threads()
    with blas_library.single_threaded_blas():
        assert set(_blas_threads()) == {1}
    assert _blas_threads() == before
