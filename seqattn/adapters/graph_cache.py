"""What a GraphAdapter computes per graph (its pair codes and node encodings), kept for the next
``batches`` call on the same graph: training, validation, prediction and evaluation each encode
one graph again, and its shortest paths and Laplacian eigenvectors are most of that work."""
import hashlib

import numpy as np

LIMIT_BYTES = 256 * 2**20  # past this the cache starts again empty


class StructureCache:
    """(pair codes, encodings) per graph, keyed by its edges, their weights and types and the
    fitted weight thresholds (:meth:`key`); the arrays are kept read-only, shared by the
    samples of every call that meets the same graph."""

    def __init__(self):
        self._entries = {}
        self._bytes = 0

    @staticmethod
    def key(n_nodes, *arrays):
        """A digest of a graph of `n_nodes` nodes and `arrays` (None for one it lacks)."""
        digest = hashlib.blake2b(np.int64(n_nodes).tobytes(), digest_size=20)
        for values in arrays:
            if values is None:
                digest.update(b"none")
                continue
            values = np.ascontiguousarray(values)
            digest.update(f"{values.dtype.str}{values.shape}".encode())
            digest.update(values.tobytes())
        return digest.digest()

    def get(self, key, compute):
        """The entry of `key`, or ``compute()`` -> (codes (n, n), {name: (n,) encodings})
        kept under it."""
        entry = self._entries.get(key)
        if entry is None:
            codes, encodings = entry = compute()
            size = codes.nbytes + sum(v.nbytes for v in encodings.values())
            for values in (codes, *encodings.values()):
                values.setflags(write=False)
            if self._bytes + size > LIMIT_BYTES:
                self._entries.clear()
                self._bytes = 0
            self._entries[key] = entry
            self._bytes += size
        return entry
