"""Positional encodings: where a token sits in its sequence, on its grid, or in space."""
from .alibi import alibi_slopes
from .calendar import calendar_phases, circular_features
from .fourier import FourierFeatures, unit_sphere
from .grid import grid_sinusoidal_table
from .learned import LearnedPositionalEmbedding
from .rotary import RotaryEmbedding
from .sinusoidal import PositionalTable, sinusoidal_table

__all__ = ["FourierFeatures", "LearnedPositionalEmbedding", "PositionalTable",
           "RotaryEmbedding", "alibi_slopes", "calendar_phases", "circular_features",
           "grid_sinusoidal_table", "sinusoidal_table", "unit_sphere"]
