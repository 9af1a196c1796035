"""The CUDA column sums are deterministic: every gradient that sums over tokens (a linear or
layer-norm bias, an embedding row) is the float64 sum in a fixed order, rounded once, so a GPU
training step gives the same bits every run. Atomic adds into a float32 gradient gave a result
that depends on the order the blocks finish; the values here make the two differ: 2**25 + 1
rounds to 2**25 in float32, so (2**25 + 1) - 2**25 is 0 in float32 order-dependent adds but 1 in
a float64 sum. Runs under the simulator without a GPU."""
import numpy as np
from numba import cuda

from seqattn import ops

BIG = 2.0 ** 25


def _column_with_cancelling_strips(rows_per_strip=64):
    """(3 * rows_per_strip, 2) float32: column 0 holds BIG, 1, -BIG in its three strips of rows
    (so a sum per strip then across strips cancels only in exact arithmetic); column 1 is 0.5."""
    x = np.zeros((3 * rows_per_strip, 2), np.float32)
    x[0, 0], x[rows_per_strip, 0], x[2 * rows_per_strip, 0] = BIG, 1.0, -BIG
    x[:, 1] = 0.5
    return x


def test_linear_bias_gradient_is_an_exact_sum_over_strips():
    dout = _column_with_cancelling_strips()
    x = np.ones((dout.shape[0], 3), np.float32)
    weight_grad = cuda.to_device(np.zeros((2, 3), np.float32))
    bias_grad = cuda.to_device(np.zeros(2, np.float32))
    ops.linear_backward(cuda.to_device(dout), cuda.to_device(x),
                        cuda.to_device(np.zeros((2, 3), np.float32)), weight_grad=weight_grad,
                        bias_grad=bias_grad, need_input_grad=False)
    np.testing.assert_array_equal(bias_grad.copy_to_host(), [1.0, 0.5 * dout.shape[0]])


def test_layer_norm_bias_gradient_is_an_exact_sum_over_strips():
    dout = _column_with_cancelling_strips()
    x = np.random.default_rng(0).normal(size=dout.shape).astype(np.float32)
    # The row statistics the forward would save, computed here: the forward's one block per row
    # costs the simulator as much as the backward, and the strips are the backward's.
    mean = x.mean(axis=1, dtype=np.float32)
    rstd = (1 / np.sqrt(x.var(axis=1, dtype=np.float32) + np.float32(1e-5))).astype(np.float32)
    weight = np.ones(2, np.float32)
    weight_grad = cuda.to_device(np.zeros(2, np.float32))
    bias_grad = cuda.to_device(np.zeros(2, np.float32))
    ops.layer_norm_backward(cuda.to_device(dout), cuda.to_device(x), cuda.to_device(mean),
                            cuda.to_device(rstd), cuda.to_device(weight), weight_grad=weight_grad,
                            bias_grad=bias_grad)
    np.testing.assert_array_equal(bias_grad.copy_to_host(), [1.0, 0.5 * dout.shape[0]])


def test_embedding_gradient_sums_repeated_ids_exactly_in_token_order():
    ids = np.array([[2, 0, 2, 5], [2, 1, 2, 0]])  # id 2 four times; 5 is the padding id
    dout = np.zeros(ids.shape + (2,), np.float32)
    dout[ids == 2] = [[BIG, 1.0], [1.0, 1.0], [-BIG, 1.0], [0.25, 1.0]]
    dout[ids == 0] = [[3.0, -1.0], [4.0, -1.0]]
    dout[0, 3] = 7.0
    start = np.full((6, 2), 0.5, np.float32)
    weight_grad = cuda.to_device(start)
    ops.embedding_backward(cuda.to_device(dout), cuda.to_device(ids), weight_grad=weight_grad,
                           padding_idx=5)
    want = start.copy()
    want[2] += [1.25, 4.0]
    want[0] += [7.0, -2.0]
    want[1] += dout[1, 1]
    np.testing.assert_array_equal(weight_grad.copy_to_host(), want)
