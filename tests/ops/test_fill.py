"""ops.fill writes the value into every element, whether NumPy's fill (arrays a launch would
run on one thread) or the kernel (larger ones) does it, and refuses copies."""
import numpy as np
import pytest

from seqattn import ops
from seqattn.kernels.cpu import elementwise


@pytest.mark.parametrize("size", [1, 37, 2 * elementwise.GRAIN - 1, 2 * elementwise.GRAIN + 3])
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=lambda d: d.__name__)
def test_fill_sets_every_element(size, dtype):
    x = np.random.default_rng(0).standard_normal(size).astype(dtype).reshape(1, size)
    assert ops.fill(x, 0.1) is x
    assert np.array_equal(x, np.full((1, size), 0.1, dtype))


def test_fill_refuses_a_strided_view():
    with pytest.raises(ValueError, match="x is updated in place"):
        ops.fill(np.zeros((4, 4), np.float32)[:, ::2], 0.0)
