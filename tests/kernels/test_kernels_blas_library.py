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



@pytest.mark.skipif(blas_library.LIBRARY != blas_library.OPENBLAS, reason="MKL is sequential")
def test_nested_limits_restore_once_the_outermost_closes():
    before = _blas_threads()
    with blas_library.single_threaded_blas():
        with blas_library.single_threaded_blas():
            assert set(_blas_threads()) == {1}
        assert set(_blas_threads()) == {1}  # the outer block still holds
    assert _blas_threads() == before


class CountingLibrary:
    """A BLAS library that records the calls made of it, in ``calls`` (one list per instance),
    with 2 threads to begin with."""

    def __init__(self):
        self.calls = []

    def get_num_threads(self):
        self.calls.append("get")
        return 2

    def set_num_threads(self, threads):
        self.calls.append(threads)


def test_blocks_inside_a_block_leave_the_libraries_alone():
    library = CountingLibrary()
    with blas_library._OpenBLASLimit([library]):
        assert library.calls == ["get", 1]
        for _ in range(3):  # a launch's own block inside fit's
            with blas_library._OpenBLASLimit([library]):
                pass
        assert library.calls == ["get", 1]
    assert library.calls == ["get", 1, 2]


def test_one_block_entered_twice_restores_once_the_outermost_closes():
    library = CountingLibrary()
    block = blas_library._OpenBLASLimit([library])
    with block:
        with block:
            pass
        assert library.calls == ["get", 1]  # the inner exit left the thread count
    assert library.calls == ["get", 1, 2]
