"""Positional encodings: where a token sits in its sequence, on its grid, or in space."""
from .alibi import alibi_slopes
from .fourier import FourierFeatures, unit_sphere
from .grid import grid_sinusoidal_table
from .learned import LearnedPositionalEmbedding
from .rotary import RotaryEmbedding
from .sinusoidal import PositionalTable, sinusoidal_table

__all__ = ["FourierFeatures", "LearnedPositionalEmbedding", "PositionalTable",
           "RotaryEmbedding", "alibi_slopes", "grid_sinusoidal_table", "sinusoidal_table",
           "unit_sphere"]
