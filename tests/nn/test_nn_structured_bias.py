"""Structured biases owned by attention layers: their tables are parameters, gradients reach
tables, inputs and positions (finite differences), and a pair-code table equals the same bias
passed densely."""
import numpy as np

import seqattn.nn as nn
from gradcheck import check_module_gradients

F64 = np.float64
RNG = np.random.default_rng(0)


def _x(*shape, seed=1):
    return np.random.default_rng(seed).normal(size=shape)


class Atoms(nn.Module):
    """Self-attention over atoms whose scores carry a distance table and a relative-offset
    table; positions are an input, so their gradient (the forces' ingredient) comes back."""

    def __init__(self, cell=None):
        super().__init__()
        self.cell = cell
        self.layer = nn.TransformerEncoderLayer(
            8, 2, 12, dropout=0.0, norm_first=True, dtype=F64, seed=0,
            distance_bias=nn.DistanceBiasTable(2, bins=6, r_max=2.5, dtype=F64, seed=1),
            pair_bias=nn.PairBiasTable(2, max_offset=2, dtype=F64, seed=2))

    def forward(self, x, positions):
        return self.layer(x, structure=nn.Structure(positions=positions, cell=self.cell))


def test_tables_are_parameters_of_the_layer():
    names = dict(Atoms().named_parameters())
    assert names["layer.self_attn.distance_bias.table"].shape == (2, 6)
    assert names["layer.self_attn.pair_bias.table"].shape == (2, 5)


def test_gradients_of_inputs_positions_and_tables_match_finite_differences():
    model = Atoms()
    positions = RNG.uniform(0, 2, size=(2, 5, 3))
    check_module_gradients(model, lambda x, positions: model(x, positions),
                           lambda d: dict(zip(("x", "positions"), model.backward(d))),
                           {"x": _x(2, 5, 8), "positions": positions})


def test_periodic_cell_gradients_match_finite_differences():
    model = Atoms(cell=np.diag([2.0, 2.5, 3.0]))
    positions = RNG.uniform(0, 2, size=(1, 4, 3))
    check_module_gradients(model, lambda x, positions: model(x, positions),
                           lambda d: dict(zip(("x", "positions"), model.backward(d))),
                           {"x": _x(1, 4, 8), "positions": positions})


def test_a_pair_code_table_equals_the_same_bias_passed_densely():
    codes = RNG.integers(0, 4, size=(2, 5, 5)).astype(np.int8)
    with_table = nn.MultiheadAttention(8, 2, pair_bias=nn.PairBiasTable(2, num_codes=4,
                                                                        dtype=F64, seed=3),
                                       dtype=F64, seed=0).eval()
    plain = nn.MultiheadAttention(8, 2, dtype=F64, seed=0).eval()
    table = with_table.pair_bias.table.data                      # (H, C)
    dense = np.transpose(table[:, codes], (1, 0, 2, 3))          # (B, H, N, M)
    x = _x(2, 5, 8)
    out, _ = with_table(x, structure=nn.Structure(pair_codes=codes))
    np.testing.assert_allclose(out, plain(x, bias=dense)[0], rtol=1e-12, atol=1e-12)
