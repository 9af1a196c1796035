"""Bad input to the layer ops gets an error that names the argument and the expected shape."""
import numpy as np
import pytest

from seqattn import ops


def test_linear_with_wrong_input_size():
    with pytest.raises(ValueError, match=r"x has shape \(2, 3\); its last dim must be 4"):
        ops.linear(np.ones((2, 3)), np.ones((5, 4)))


def test_linear_with_mixed_dtypes():
    with pytest.raises(TypeError, match="weight has dtype float32"):
        ops.linear(np.ones((2, 4)), np.ones((5, 4), np.float32))


def test_integer_inputs_are_rejected():
    with pytest.raises(TypeError, match="x has dtype int64; expected float32 or float64"):
        ops.gelu(np.ones(3, dtype=np.int64))


def test_layer_norm_weight_of_wrong_size():
    with pytest.raises(ValueError, match=r"weight has shape \(3,\); expected \(E,\)"):
        ops.layer_norm(np.ones((2, 4)), np.ones(3), np.ones(4))


def test_gradient_buffer_must_be_updatable_in_place():
    x, w = np.ones((2, 4)), np.ones((5, 4))
    strided = np.zeros((5, 8))[:, ::2]
    with pytest.raises(ValueError, match="weight_grad is updated in place"):
        ops.linear_backward(np.ones((2, 5)), x, w, weight_grad=strided)


def test_embedding_ids_out_of_range():
    with pytest.raises(ValueError, match=r"ids must lie in \[0, 4\)"):
        ops.embedding(np.array([0, 4]), np.ones((4, 2)))


def test_add_with_non_trailing_shape():
    with pytest.raises(ValueError, match="not the trailing part"):
        ops.add(np.ones((2, 3)), np.ones(2))


def test_split_heads_with_indivisible_width():
    with pytest.raises(ValueError, match="divisible by num_heads = 4"):
        ops.split_heads(np.ones((1, 2, 6)), 4)


def test_rope_tables_of_wrong_shape():
    with pytest.raises(ValueError, match=r"cos has shape \(3, 2\); expected \(N, D / 2\)"):
        ops.rope(np.ones((1, 1, 3, 6)), np.ones((3, 2)), np.ones((3, 3)))


def test_host_and_device_arrays_are_not_mixed():
    from numba import cuda

    with pytest.raises(ValueError, match="different devices"):
        ops.add(cuda.to_device(np.ones(3)), np.ones(3))
