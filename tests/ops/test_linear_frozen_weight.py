"""linear_backward of a frozen weight (weight_grad=None, as autodiff passes it for a weight that
needs no gradient): dx and the bias's gradient are those of the call that also computes the
weight's gradient, bit for bit, and the weight is left unwritten, on the CPU and the GPU."""
import numpy as np
import pytest

from seqattn import autodiff, ops

# (token rows, K inputs, O outputs): the molecule model's in_proj, and K > O and K < O at
# sizes past the products' blocks
SHAPES = [(152, 32, 96), (203, 300, 77), (130, 45, 530)]


def _layer(R, K, O, dtype, seed=0):
    rng = np.random.default_rng(seed)
    return tuple(rng.standard_normal(shape).astype(dtype)
                 for shape in ((R, K), (O, K), (R, O)))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("R, K, O", SHAPES)
@pytest.mark.parametrize("with_bias", [True, False])
def test_a_frozen_weight_gives_the_same_input_and_bias_gradients(R, K, O, dtype, with_bias):
    x, weight, dout = _layer(R, K, O, dtype)
    kept = weight.copy()
    bias_grad = np.zeros(O, dtype) if with_bias else None
    dx = ops.linear_backward(dout, x, weight, weight_grad=None, bias_grad=bias_grad)
    want_bias_grad = np.zeros(O, dtype) if with_bias else None
    want = ops.linear_backward(dout, x, weight, weight_grad=np.zeros_like(weight),
                               bias_grad=want_bias_grad)
    np.testing.assert_array_equal(dx, want)
    if with_bias:
        np.testing.assert_array_equal(bias_grad, want_bias_grad)
    np.testing.assert_array_equal(weight, kept)


def test_a_frozen_weight_and_bias_with_no_input_gradient_do_nothing():
    x, weight, dout = _layer(20, 8, 6, np.float32)
    assert ops.linear_backward(dout, x, weight, weight_grad=None,
                               need_input_grad=False) is None


def test_autodiff_skips_a_frozen_weight_and_its_input_still_gets_its_gradient():
    x, weight, dout = _layer(12, 5, 7, np.float64)
    frozen = autodiff.Parameter(weight.copy())
    frozen.requires_grad = False
    inputs = autodiff.Tensor(x, requires_grad=True)
    (dx,) = autodiff.backward([autodiff.linear(inputs, frozen)], [dout], inputs=[inputs])
    np.testing.assert_allclose(dx, dout @ weight, rtol=1e-12)
    assert not frozen.grad.any()


def test_a_frozen_weight_on_the_gpu_gives_the_cpu_gradients():
    from numba import cuda

    x, weight, dout = _layer(24, 8, 6, np.float32)
    bias_grad = cuda.to_device(np.zeros(6, np.float32))
    dx = ops.linear_backward(cuda.to_device(dout), cuda.to_device(x), cuda.to_device(weight),
                             weight_grad=None, bias_grad=bias_grad)
    np.testing.assert_allclose(dx.copy_to_host(), dout @ weight, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(bias_grad.copy_to_host(), dout.sum(axis=0), rtol=1e-5,
                               atol=1e-5)
