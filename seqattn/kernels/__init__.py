"""seqattn's kernels: ``cpu`` (@njit) and ``cuda`` (@cuda.jit), and math compiled for both.

Cached kernels are stamped with every seqattn module they import (:mod:`.cache_stamp`), set up
here, before any kernel module defines its dispatchers."""
from numba.core.caching import CompileResultCacheImpl

from .cache_stamp import PACKAGE_ROOT, install

install(CompileResultCacheImpl, PACKAGE_ROOT)
