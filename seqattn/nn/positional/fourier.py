"""Random Fourier features of continuous coordinates (Tancik et al., 2020).

gamma(v) = [sin(2 pi v B), cos(2 pi v B)] with a fixed Gaussian B lets a network resolve fine
detail in positions such as latitude/longitude, time or atom coordinates.
"""
import numpy as np

from ...autodiff import unwrap
from ..init import generator
from ..module import Module
from ..placement import moved


def unit_sphere(lat_deg, lon_deg):
    """Geographic positions as points on the unit sphere, without the seam at +-180 degrees or
    the crowding at the poles that raw degrees have.

    Parameters
    ----------
    lat_deg, lon_deg : arrays (...)
        Latitudes and longitudes in degrees.

    Returns
    -------
    array (..., 3)
        The points (x, y, z).
    """
    lat, lon = np.deg2rad(lat_deg), np.deg2rad(lon_deg)
    return np.stack([np.cos(lat) * np.cos(lon), np.cos(lat) * np.sin(lon), np.sin(lat)], -1)


class FourierFeatures(Module):
    """Random Fourier features of coordinates: coords (..., in_dims) -> (..., 2 *
    num_frequencies), the sines and cosines of ``2 pi coords B`` for a fixed random matrix B.

    B is a buffer drawn from the seed (which the saved config keeps), so there is nothing to
    learn and no backward.

    Parameters
    ----------
    in_dims : int
        Number of coordinates per token.
    num_frequencies : int
        Columns of B; the output has twice as many features.
    scale : float, default 1.0
        Standard deviation of the frequencies, in cycles per coordinate unit.
    dtype : NumPy float type, default numpy.float32
        Type of B and of the features.
    seed : int, numpy.random.Generator or None, default None
        Seed of B; None draws fresh entropy.
    """

    def __init__(self, in_dims, num_frequencies, scale=1.0, dtype=np.float32, seed=None):
        super().__init__()
        B = generator(seed).normal(scale=scale, size=(in_dims, num_frequencies))
        self.register_buffer("frequencies", B.astype(dtype))

    def forward(self, coords):
        """Coordinates come from the host (adapters); the features go to the module's device."""
        B = moved(self.frequencies, "cpu")
        angles = 2 * np.pi * np.asarray(unwrap(coords), dtype=B.dtype) @ B
        return moved(np.concatenate([np.sin(angles), np.cos(angles)], -1), self.device)
