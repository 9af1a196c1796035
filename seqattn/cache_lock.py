"""Numba's disk cache written by several processes at once, without losing entries.

Numba keeps one index file per function, mapping each compiled signature to a data file. Saving
a new signature reads the index, picks a free data-file name, and writes the index back whole.
Two processes that compile the same function for different signatures at the same time (the
run and its helper process of :mod:`seqattn.compile`, the parallel processes of
``python -m seqattn.compile``, pytest-xdist workers) can both read the old index: the second
write then drops the first one's entry, so a later run compiles that signature again, and both
may pick the same data-file name, so an entry can point at the other signature's code.

:func:`install` makes every save hold an exclusive lock on one file in the cache folder while it
reads the index, writes it and writes the data: saves of one folder take turns, each one sees
the entries saved before it. Loading needs no lock, since Numba replaces files atomically. Where
``fcntl`` is missing (Windows) saves stay as Numba makes them.
"""
import os

from numba.core import caching

LOCK_NAME = "seqattn-cache-save.lock"


def _save_holding_lock(save):
    import fcntl

    def save_holding_lock(self, key, data):
        os.makedirs(self._cache_path, exist_ok=True)
        with open(os.path.join(self._cache_path, LOCK_NAME), "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            save(self, key, data)

    save_holding_lock.unlocked = save
    return save_holding_lock


def install():
    """Serialize the saves of Numba's cache index files across processes (see the module
    docstring); idempotent, and a no-op where ``fcntl`` is missing."""
    try:
        import fcntl  # noqa: F401
    except ImportError:
        return
    save = caching.IndexDataCacheFile.save
    if not hasattr(save, "unlocked"):
        caching.IndexDataCacheFile.save = _save_holding_lock(save)
