"""Bad input to the ops (layers, losses, pooling, caches, optimizer updates, arrays) gets an
error that names the argument and says what was expected."""
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


@pytest.mark.parametrize("device", ["cpu", "cuda"])
@pytest.mark.parametrize("bad_id", [-1, 3])
def test_cross_entropy_targets_out_of_range(device, bad_id):
    from numba import cuda

    logits, targets = np.zeros((4, 3)), np.array([0, bad_id, 1, 2])
    if device == "cuda":
        logits, targets = cuda.to_device(logits), cuda.to_device(targets)
    with pytest.raises(ValueError, match=r"targets must lie in \[0, 3\) .* 1 of 4 do not"):
        ops.cross_entropy(logits, targets)
    total, weight_sum, _ = ops.cross_entropy(logits, targets, ignore_index=bad_id)
    assert weight_sum == 3.0 and np.isclose(total, 3 * np.log(3.0))


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




def _adam_step_zero():
    ops.adam_step(np.ones(3), np.ones(3), np.zeros(3), np.zeros(3), step=0, lr=0.1)


def _bad(call, error, message, name, **marks):
    return pytest.param(call, error, message, id=name, **marks)


ONES, IDS = np.ones((2, 3)), np.zeros(2, int)

# Bad calls to the ops beyond the layers: (call, error type, what the message must say).
BAD_CALLS = [
    _bad(lambda: ops.pointwise_loss(ONES, ONES, "l2"), ValueError,
         r"kind must be one of \['bce_with_logits', 'huber', 'mae', 'mse'\], got 'l2'", "kind"),
    _bad(lambda: ops.pointwise_loss(ONES, ONES, "huber", delta=0), ValueError,
         "delta must be a positive number, got 0", "huber_delta"),
    _bad(lambda: ops.pointwise_loss(ONES, ONES, "mse", weight=np.ones(3)), ValueError,
         r"weight has shape \(3,\); expected pred.shape = \(2, 3\)", "loss_weight"),
    _bad(lambda: ops.cross_entropy(ONES, IDS, label_smoothing=1.0), ValueError,
         r"label_smoothing must be a number in \[0, 1\), got 1.0", "label_smoothing"),
    _bad(lambda: ops.cross_entropy(ONES, IDS, class_weight=np.ones(2)), ValueError,
         r"class_weight has shape \(2,\); expected \(C,\) = \(3,\)", "class_weight"),
    _bad(lambda: ops.cross_entropy(np.ones(3), np.zeros((), int)), ValueError,
         r"logits has shape \(3,\); expected \(..., C\) classes last", "logits_1d"),
    _bad(lambda: ops.masked_mean(ONES), ValueError,
         r"x has shape \(2, 3\); expected tokens \(B, N, E\)", "pool_2d"),
    _bad(lambda: ops.masked_mean(np.ones((2, 3, 1)), np.zeros((2, 3), int)), TypeError,
         "key_padding_mask has dtype int64; expected bool", "padding_dtype"),
    _bad(lambda: ops.masked_mean(np.ones((2, 3, 1)), np.zeros((3, 2), bool)), ValueError,
         r"key_padding_mask has shape \(3, 2\); expected \(B, N\)", "padding_shape"),
    _bad(lambda: ops.prepend_token(np.ones((2, 3, 1)), np.ones(1), length=5), ValueError,
         r"length must lie in \[1, N \+ 1 = 4\], got 5", "prepend_length"),
    _bad(lambda: ops.prepend_token(np.ones((2, 3, 2)), np.ones(3)), ValueError,
         r"token \(3,\) must be \(B, N, E\), \(E,\)", "token_width"),
    _bad(lambda: ops.prepend_token_backward(np.ones((2, 4, 2)), np.ones((2, 3, 2)),
                                            token_grad=np.zeros(3)), ValueError,
         r"token_grad has shape \(3,\); expected \(E,\) = \(2,\)", "token_grad_width"),
    _bad(lambda: ops.first_token(np.ones((2, 0, 2))), ValueError,
         r"expected tokens \(B, N, E\) with N >= 1", "first_of_no_tokens"),
    _bad(lambda: ops.write_positions(np.zeros((1, 1, 5, 2)), np.ones((1, 1, 2, 2)), 4),
         ValueError, "positions 4..5 do not fit a cache of 5", "cache_overflow"),
    _bad(lambda: ops.write_positions(np.zeros((1, 1, 5, 2)), np.ones((1, 2, 2, 2)), 0),
         ValueError, r"new has shape \(1, 2, 2, 2\); expected \(B, H, n, D\)", "cache_heads"),
    _bad(lambda: ops.sgd_step(ONES, ONES, np.zeros(6), lr=0.1), ValueError,
         r"velocity has shape \(6,\); expected the parameter's \(2, 3\)", "velocity_shape"),
    _bad(lambda: ops.sgd_step(np.ones((2, 6))[:, ::2], ONES, np.zeros((2, 3)), lr=0.1),
         ValueError, "param must be C-contiguous: it is updated in place", "strided_param"),
    _bad(lambda: ops.sgd_step(np.ones((2, 3)), np.ones((2, 6))[:, ::2], np.zeros((2, 3)), lr=0.1),
         ValueError, "grad must be C-contiguous: the kernels read it as one flat array",
         "strided_grad"),
    _bad(lambda: ops.add_into(np.zeros((2, 6))[:, ::2], ONES), ValueError,
         "dst is updated in place", "strided_dst"),
    _bad(lambda: ops.add_into(np.zeros(3), np.ones(4)), ValueError,
         r"src has shape \(4,\); expected dst.shape = \(3,\)", "add_into_shape"),
    _bad(lambda: ops.move_toward(np.zeros((2, 6))[:, ::2], ONES, 0.5), ValueError,
         "dst is updated in place", "strided_average"),
    _bad(lambda: ops.move_toward(np.zeros(3), np.ones(4), 0.5), ValueError,
         r"src has shape \(4,\); expected dst.shape = \(3,\)", "move_toward_shape"),
    _bad(lambda: ops.move_toward(np.zeros(3), np.ones(3), 1.5), ValueError,
         r"weight must be in \[0, 1\]", "move_toward_weight"),
    _bad(lambda: ops.fill([1.0, 2.0], 0.0), TypeError, "x must be an array, got list", "fill_list"),
    _bad(lambda: ops.sum_leading(ONES, (2,)), ValueError,
         r"shape \(2,\) is not the trailing part of x's shape \(2, 3\)", "sum_leading_dims"),
    _bad(lambda: ops.concat([ONES, np.ones((2, 2))], axis=0), ValueError,
         r"arrays\[1\] has shape \(2, 2\); expected \(2, 3\) except along axis 0", "concat"),
    _bad(lambda: ops.concat([ONES], axis=2), ValueError,
         r"axis must be an integer in \[-2, 2\) for a 2-d array, got 2", "concat_axis"),
    *(_bad(call, ValueError, "axis must be an integer in", name)
      for name, call in [
          ("mean_along_axis_too_large", lambda: ops.mean_along(np.ones((2, 3, 4)), 3, 1.0)),
          ("mean_along_backward_axis_too_large",
           lambda: ops.mean_along_backward(ONES, (2, 3, 4), 3, 1.0)),
          ("concat_backward_axis_too_large",
           lambda: ops.concat_backward(np.ones((2, 3, 4)), [1, 3], 3))]),
    _bad(_adam_step_zero, ValueError, "step must be", "adam_step_zero"),
]


@pytest.mark.parametrize("call, error, message", BAD_CALLS)
def test_bad_input_to_losses_pooling_caches_optimizers_and_arrays(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_negative_axes_count_from_the_end():
    x = np.arange(24.0).reshape(2, 3, 4)
    np.testing.assert_array_equal(ops.mean_along(x, -1, 1.0), ops.mean_along(x, 2, 1.0))
    np.testing.assert_array_equal(ops.mean_along_backward(np.ones((2, 3)), (2, 3, 4), -1, 1.0),
                                  ops.mean_along_backward(np.ones((2, 3)), (2, 3, 4), 2, 1.0))
    for got, want in zip(ops.concat_backward(x, [1, 3], -1), ops.concat_backward(x, [1, 3], 2)):
        np.testing.assert_array_equal(got, want)
