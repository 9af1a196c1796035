"""Fixed sinusoidal position tables (Vaswani et al., 2017) and the layer that adds a table."""
import numpy as np

from ..module import Module

MAX_WAVELENGTH = 10000.0


def sinusoidal_table(positions, dim, max_wavelength=MAX_WAVELENGTH):
    """The sinusoidal position table of the Transformer paper: even features
    ``sin(p / w^(2i/dim))``, odd features the cosine of the same angle.

    Parameters
    ----------
    positions : array (N,)
        Positions: integers or any real coordinate.
    dim : int
        Features per position; must be even.
    max_wavelength : float, default 10000.0
        w, the longest wavelength.

    Returns
    -------
    array (N, dim)
        The table, in float64.
    """
    if dim % 2:
        raise ValueError(f"dim must be even, got {dim}")
    positions = np.asarray(positions, dtype=np.float64).reshape(-1)
    angles = positions[:, None] / max_wavelength ** (np.arange(0, dim, 2) / dim)
    table = np.empty((positions.size, dim))
    table[:, 0::2] = np.sin(angles)
    table[:, 1::2] = np.cos(angles)
    return table


class PositionalTable(Module):
    """Adds a fixed (N, E) table to tokens (B, N, E): sinusoidal, grid or any precomputed one.

    The table is a buffer (it moves with ``.to()`` and is not in the state dict) and a
    constant for the gradient. The tokens must have the table's N.

    Parameters
    ----------
    table : array (N, E)
        The values added to each sequence's tokens.
    dtype : NumPy float type, default numpy.float32
        Type the table is stored in.
    """

    def __init__(self, table, dtype=np.float32):
        super().__init__()
        self.register_buffer("table", np.ascontiguousarray(table, dtype=dtype))

    def forward(self, x):
        self.check_device(x=x)
        return x + self.table
