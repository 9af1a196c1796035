"""Keep BLAS single-threaded while Numba's parallel kernels call it from their own threads.

The CPU attention kernels run one tile's matrix products per Numba thread through ``np.dot``,
which calls SciPy's OpenBLAS. If OpenBLAS also spreads each product over all cores, the threads
oversubscribe the machine and every product waits for the others.
"""
import contextlib

_controller = None


def _blas_controller():
    global _controller
    if _controller is None:
        # Numba's np.dot calls SciPy's BLAS: load it first so the controller sees it.
        import scipy.linalg.cython_blas  # noqa: F401
        from threadpoolctl import ThreadpoolController

        _controller = ThreadpoolController()
    return _controller


@contextlib.contextmanager
def single_threaded_blas():
    """Within the block, every loaded BLAS library uses one thread."""
    with _blas_controller().limit(limits=1, user_api="blas"):
        yield
