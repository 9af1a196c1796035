"""Sinusoidal encodings of grid coordinates (lat, lon, level, time): one block per axis."""
import numpy as np

from .sinusoidal import MAX_WAVELENGTH, sinusoidal_table


def grid_sinusoidal_table(coords, dim, max_wavelength=MAX_WAVELENGTH):
    """(..., dim) from coords (..., A) for A axes (2-D or 3-D grids): the features are split into
    A equal blocks, block a being the 1-D sinusoidal table of coordinate a (as in ViT/MAE's 2-D
    encoding). ``dim`` must be divisible by 2 * A."""
    coords = np.asarray(coords, dtype=np.float64)
    axes = coords.shape[-1]
    if dim % (2 * axes):
        raise ValueError(f"dim = {dim} must be divisible by 2 * number of axes = {2 * axes}")
    flat = coords.reshape(-1, axes)
    blocks = [sinusoidal_table(flat[:, a], dim // axes, max_wavelength) for a in range(axes)]
    return np.concatenate(blocks, axis=-1).reshape(coords.shape[:-1] + (dim,))
