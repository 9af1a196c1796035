"""The @cuda.jit kernels; their disk cache stamped like the CPU kernels' (cache_stamp.py)."""
from numba.cuda.core.caching import CacheImpl

from ..cache_stamp import PACKAGE_ROOT, install

install(CacheImpl, PACKAGE_ROOT)
