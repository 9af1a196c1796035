"""The CPU layer-norm kernels beyond the shared table (tests/ops/test_layer_ops_table.py, whose
rows fit one block): rows in several blocks with a partial last one (forward) and in several
per-thread chunks (backward), serial and parallel, against the float64 reference and finite
differences."""
import numpy as np
import pytest

import reference_layers as ref
from gradcheck import assert_gradient, numerical_gradient
from seqattn.kernels.cpu import layer_norm as kernels

ROWS = 2 * kernels.ROWS + 5  # two full blocks and a partial one
E = 7


@pytest.fixture
def inputs():
    rng = np.random.default_rng(0)
    return (rng.normal(size=(ROWS, E)) * 3 + 1, rng.normal(size=E), rng.normal(size=E),
            rng.normal(size=(ROWS, E)))


def forward(version, x, weight, bias):
    out, mean, rstd = np.empty_like(x), np.empty(ROWS), np.empty(ROWS)
    getattr(kernels.layer_norm_forward, version)(out, mean, rstd, x, weight, bias, 1e-5)
    return out, mean, rstd


def backward(version, chunks, dout, x, mean, rstd, weight):
    dx, dweight, dbias = np.empty_like(x), np.zeros(E), np.zeros(E)
    getattr(kernels._layer_norm_backward, version)(dx, dweight, dbias, dout, x, mean, rstd,
                                                   weight, chunks)
    return dx, dweight, dbias


@pytest.mark.parametrize("version", ["serial", "parallel"])
def test_forward_of_every_block_matches_the_reference(version, inputs):
    x, weight, bias, _ = inputs
    out, mean, rstd = forward(version, x, weight, bias)
    np.testing.assert_allclose(out, ref.layer_norm(x, weight, bias), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(mean, x.mean(axis=1), rtol=1e-12)
    np.testing.assert_allclose(rstd, 1 / np.sqrt(x.var(axis=1) + 1e-5), rtol=1e-12)


@pytest.mark.parametrize("version", ["serial", "parallel"])
@pytest.mark.parametrize("chunks", [1, 3])
def test_backward_in_chunks_matches_finite_differences(version, chunks, inputs):
    x, weight, bias, dout = inputs
    _, mean, rstd = forward("serial", x, weight, bias)
    dx, dweight, dbias = backward(version, chunks, dout, x, mean, rstd, weight)

    def loss():
        return float((ref.layer_norm(x, weight, bias) * dout).sum())

    assert_gradient("x", dx, numerical_gradient(loss, x))
    assert_gradient("weight", dweight, numerical_gradient(loss, weight))
    assert_gradient("bias", dbias, numerical_gradient(loss, bias))
