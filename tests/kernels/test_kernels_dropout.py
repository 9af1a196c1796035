"""Dropout: the counter-based mask, its scaling, its recomputation in backward, and CUDA."""
import numpy as np
import pytest

from gradcheck import on_cuda
from seqattn import ops


def test_drops_about_p_and_scales_the_rest():
    x = np.ones(20000)
    out = ops.dropout(x, 0.25, seed=7)
    kept = out != 0
    assert abs(1 - kept.mean() - 0.25) < 0.02, "fraction dropped"
    np.testing.assert_allclose(out[kept], 1 / 0.75, err_msg="kept values are scaled by 1/(1-p)")


def test_backward_applies_the_forward_mask():
    rng = np.random.default_rng(0)
    x, dout = rng.normal(size=(2, 3, 50)), rng.normal(size=(2, 3, 50))
    out = ops.dropout(x, 0.5, seed=3)
    # The op is linear in x, so its gradient is the same masked scaling applied to dout.
    np.testing.assert_allclose(ops.dropout_backward(dout, 0.5, seed=3), dout * (out / x))


def test_same_seed_same_mask_other_seed_other_mask():
    x = np.ones(1000)
    assert np.array_equal(ops.dropout(x, 0.5, seed=1), ops.dropout(x, 0.5, seed=1))
    assert not np.array_equal(ops.dropout(x, 0.5, seed=1), ops.dropout(x, 0.5, seed=2))


def test_p_zero_is_identity():
    x = np.random.default_rng(0).normal(size=100)
    np.testing.assert_array_equal(ops.dropout(x, 0.0, seed=5), x)


# The simulator runs the hash in NumPy scalars, which warn on its intended 64-bit wraparound.
@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")
def test_cuda_draws_the_cpu_mask():
    x = np.random.default_rng(0).normal(size=(3, 7))
    np.testing.assert_array_equal(on_cuda(ops.dropout, x, 0.3, 11), ops.dropout(x, 0.3, 11))
    np.testing.assert_array_equal(on_cuda(ops.dropout_backward, x, 0.3, 11),
                                  ops.dropout_backward(x, 0.3, 11))


@pytest.mark.parametrize("p", [-0.1, 1.0, "half"])
def test_bad_probability_is_rejected(p):
    with pytest.raises(ValueError, match="p must be a number in"):
        ops.dropout(np.ones(3), p, seed=0)


def test_bad_seed_is_rejected():
    with pytest.raises(ValueError, match="seed must be an integer"):
        ops.dropout(np.ones(3), 0.1, seed=-1)
