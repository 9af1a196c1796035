"""Keys and values kept between calls of one attention layer, for decoding one position at a
time: step t projects only the new position and attends over the cached ones, so it costs O(t)
instead of re-running the whole prefix.

A self-attention cache holds (B, H, max_len, D) keys and values, written one position per call;
slots not written yet are masked as padding. A memory cache (cross-attention) holds the
projected keys and values of the encoder's memory, computed on the first call and reused.
"""
import numpy as np

from .. import ops
from ..backend import device_of, empty_like_on
from .placement import moved


class KeyValueCache:
    """The keys and values of the positions decoded so far, so that each new position costs
    one token's work (used by :func:`seqattn.models.generate` and ``rollout``).

    Parameters
    ----------
    max_len : int, optional
        Positions a self-attention cache holds; None for a memory (cross-attention) cache,
        which holds the encoder's keys and values once.
    """

    def __init__(self, max_len=None):
        """``max_len`` positions of self-attention, or None for a memory (cross-attention)
        cache."""
        self.max_len = max_len
        self.keys = self.values = None
        self.length = 0

    @property
    def is_memory(self):
        return self.max_len is None

    def append(self, keys, values):
        """Write the keys and values (B, H, 1, D) of the next position; returns the key padding
        mask (B, max_len) that hides the slots after it."""
        if int(keys.shape[2]) != 1:
            raise ValueError(f"a self-attention cache takes one position per call, got "
                             f"{int(keys.shape[2])}")
        if self.length >= self.max_len:
            raise ValueError(f"the cache holds {self.max_len} positions; all are used")
        if self.keys is None:
            B, H, _, D = (int(s) for s in keys.shape)
            shape = (B, H, self.max_len, D)
            self.keys, self.values = (ops.fill(empty_like_on(device_of(keys), shape, keys.dtype),
                                               0.0) for _ in range(2))
        ops.write_positions(self.keys, keys, self.length)
        ops.write_positions(self.values, values, self.length)
        self.length += 1
        B = int(keys.shape[0])
        later = np.broadcast_to(np.arange(self.max_len) >= self.length, (B, self.max_len))
        return moved(np.ascontiguousarray(later), device_of(keys))
