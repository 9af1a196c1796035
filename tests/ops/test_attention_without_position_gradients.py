"""The attention's backward for positions that need no gradient (a molecule model's energy-only
step, the force step's shifted pass): the short-sequence kernels skip the distance bias's
position gradients, and every other gradient is the same bits as with them; through autodiff,
untracked positions give the tables the same gradient."""
import numpy as np
import pytest

from seqattn import autodiff
from seqattn.kernels.cpu import attention_small
from seqattn.ops.attention import attention_backward_of_call, attention_of_call
from seqattn.ops.attention_inputs import prepare_attention
from structured_bias_cases import STRUCTURED_CASES, backward_inputs

CASES = [c for c in STRUCTURED_CASES if c.distance]


def _gradients(case, dtype, positions_require_grad):
    dout, q, k, v, opts = backward_inputs(case, dtype)
    call = prepare_attention(q, k, v, **opts)
    out, lse = attention_of_call(call, return_lse=True)
    return attention_backward_of_call(call, dout, out, lse,
                                      bias_requires_grad="bias" in opts,
                                      positions_require_grad=positions_require_grad)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", CASES, ids=str)
def test_the_other_gradients_are_the_same_bits_without_the_positions(case, dtype):
    full = _gradients(case, dtype, True)
    without = _gradients(case, dtype, False)
    for name in ("dq", "dk", "dv", "dbias"):
        want, got = getattr(full, name), getattr(without, name)
        assert (want is None) == (got is None), name
        if want is not None:
            np.testing.assert_array_equal(got, want, name)
    np.testing.assert_array_equal(without.distance_bias.table, full.distance_bias.table)
    if without.pair_bias is not None:
        np.testing.assert_array_equal(without.pair_bias.table, full.pair_bias.table)
    short = case.base.N <= attention_small.MAX_LENGTH and case.small
    if short:  # the short-sequence kernels skip them; the tiled kernel computes them anyway
        assert without.distance_bias.x is None and without.distance_bias.y is None


def test_untracked_positions_give_the_table_the_same_gradient():
    case = next(c for c in CASES if c.types and c.smooth is False and c.cell == "triclinic")
    dout, q, k, v, opts = backward_inputs(case, np.float64)
    bias = opts.pop("distance_bias")
    table_grads = []
    for track in (True, False):
        table = autodiff.Tensor(bias.table.copy(), requires_grad=True)
        x = autodiff.Tensor(bias.x, requires_grad=True) if track else bias.x
        out = autodiff.attention(q, k, v, distance_bias=type(bias)(
            x, table, bias.r_max, types=bias.types, cell=bias.cell), **opts)
        autodiff.backward([out], [dout])
        table_grads.append(table.grad)
    np.testing.assert_array_equal(table_grads[1], table_grads[0])
