"""Fixed sinusoidal positions for the task models: rows start .. start + N - 1 of a
(max_len, E) table are added to tokens (B, N, E), so decoding one step at a time adds the same
row that the full sequence would."""
import numpy as np

from ..nn import Module
from ..nn.positional import sinusoidal_table


class SinusoidalPositions(Module):
    def __init__(self, max_len, dim, dtype=np.float32):
        super().__init__()
        self.register_buffer("table", np.ascontiguousarray(sinusoidal_table(np.arange(max_len),
                                                                            dim), dtype=dtype))

    def forward(self, x, start=0):
        self.check_device(x=x)
        N = int(x.shape[1])
        if start + N > self.table.shape[0]:
            raise ValueError(f"positions {start}..{start + N - 1} exceed max_len = "
                             f"{self.table.shape[0]}; build the model with a larger max_len")
        return x + self.table[start:start + N]
