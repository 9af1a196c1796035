"""The elementwise kernels beyond the shared table (tests/ops/test_layer_ops_table.py): the
blocked add."""
import numpy as np
import pytest

from seqattn import ops


@pytest.mark.parametrize("b_shape", [(5, 3, 4), (3, 4), (4,)], ids=["same_size", "table", "bias"])
def test_add_over_row_blocks(b_shape):
    """The CPU add runs same-size inputs elementwise and broadcasts by blocks of rows."""
    rng = np.random.default_rng(0)
    a = rng.normal(size=(5, 3, 4)).astype(np.float32)
    b = rng.normal(size=b_shape).astype(np.float32)
    np.testing.assert_array_equal(ops.add(a, b), a + b)
