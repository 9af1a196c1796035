"""Genome test data: random DNA records, and records encoded the protocol's way (reader, fit,
encode)."""
import numpy as np

from seqattn.readers import from_sequences


def random_sequences(n, length, seed=0, ragged=False):
    """{"chr1:start-end": DNA} of `n` records of `length` bases (ragged: half to all of it)."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(length // 2, length + 1, n) if ragged else np.full(n, length)
    return {f"chr1:{1000 * i}-{1000 * i + m}": "".join(rng.choice(list("ACGT"), m))
            for i, m in enumerate(lengths)}


def encoded(adapter, sequences):
    """The Batch of DNA strings (one string, a list or a dict) through the fitted `adapter`."""
    ds = from_sequences(sequences)
    return adapter.fit(ds).encode(ds)
