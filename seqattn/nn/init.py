"""Deterministic parameter initialisation from a seed, with torch.nn's distributions."""
import numpy as np


def generator(seed):
    """A NumPy Generator from an int seed, an existing Generator (shared by the modules of one
    model, so a model is reproducible from one seed) or None (fresh entropy)."""
    if isinstance(seed, np.random.Generator):
        return seed
    return np.random.default_rng(seed)


def uniform(rng, shape, bound, dtype):
    """U(-bound, bound): torch's default for Linear weights and biases, bound = 1 / sqrt(fan_in)."""
    return rng.uniform(-bound, bound, size=shape).astype(dtype)


def xavier_uniform(rng, shape, dtype):
    """Glorot uniform for a (fan_out, fan_in) matrix: torch's MultiheadAttention in-projection."""
    fan_out, fan_in = shape
    return uniform(rng, shape, np.sqrt(6.0 / (fan_in + fan_out)), dtype)


def normal(rng, shape, dtype, std=1.0):
    return (rng.standard_normal(size=shape) * std).astype(dtype)
