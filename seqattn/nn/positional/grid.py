"""Sinusoidal encodings of grid coordinates (lat, lon, level, time): one block per axis."""
import numpy as np

from .sinusoidal import MAX_WAVELENGTH, sinusoidal_table


def grid_sinusoidal_table(coords, dim, max_wavelength=MAX_WAVELENGTH):
    """A sinusoidal encoding of positions on a 2-D or 3-D grid (as in ViT/MAE's 2-D encoding):
    the features are split into A equal blocks, block a being the 1-D sinusoidal table of
    coordinate a.

    Parameters
    ----------
    coords : array (..., A)
        Positions along A axes.
    dim : int
        Features per position; divisible by 2 * A.
    max_wavelength : float, default 10000.0
        The longest wavelength of the sinusoids.

    Returns
    -------
    array (..., dim)
        The encoding.
    """
    coords = np.asarray(coords, dtype=np.float64)
    axes = coords.shape[-1]
    if dim % (2 * axes):
        raise ValueError(f"dim = {dim} must be divisible by 2 * number of axes = {2 * axes}")
    flat = coords.reshape(-1, axes)
    blocks = [sinusoidal_table(flat[:, a], dim // axes, max_wavelength) for a in range(axes)]
    return np.concatenate(blocks, axis=-1).reshape(coords.shape[:-1] + (dim,))
