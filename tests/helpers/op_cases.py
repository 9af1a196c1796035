"""The table of seqattn's ops: one :class:`OpCase` per op and variant, the single list that the
op tests (tests/ops/test_layer_ops_table.py, with the checks of tests/helpers/ops_checks.py) loop over, and
that a benchmark can loop over too.

A case builds tiny float64 inputs, runs the op's forward (and backward, where it has one)
through ``seqattn.ops``, and names its plain NumPy reference. The same forward runs the CPU
kernels on NumPy arrays and the CUDA kernels on device arrays: ``family`` names the kernel module
``seqattn.kernels.cpu.<family>`` and its twin ``seqattn.kernels.cuda.<family>``. Where torch has
the op, ``torch_reference`` computes it with torch to pin the reference's semantics. The
attention op has its own table (tests/helpers/attention_cases.py).

Conventions: every output is one array (several outputs are returned as a tuple of same-shaped
arrays and stacked); an op that updates an array in place runs on a copy and returns it; a loss
returns [sum of weighted losses, sum of weights, their ratio] (the two sums the op returns and
the mean a loss module reports), so sum(out * dout) is differentiable like any other output.
"""
from dataclasses import dataclass, replace
from typing import Callable

import numpy as np

import reference_layers as ref
import reference_ops_arrays as ref_arrays
import reference_ops_losses as ref_losses
import reference_ops_optimizers as ref_optimizers
import reference_ops_pooling as ref_pooling
from seqattn import autodiff, ops


@dataclass
class OpCase:
    name: str
    family: str  # the kernel module: seqattn.kernels.cpu.<family> and seqattn.kernels.cuda.<family>
    make_inputs: Callable  # (rng) -> dict of float64 arrays (and integer or bool arrays, ints)
    forward: Callable  # (**inputs) -> output
    reference: Callable  # (**inputs) -> output, computed in the inputs' dtype
    backward: Callable = None  # (dout, **inputs) -> {input name: d(sum(output * dout))/dinput}
    # Inputs whose float32 cast is meaningful for the accuracy check (integers are not cast).
    float_inputs: tuple = ()
    reference_backward: Callable = None  # (dout, **inputs) -> {input name: gradient}, NumPy
    torch_reference: Callable = None  # (**inputs as torch tensors) -> output tensor
    # The op as ``seqattn.autodiff`` records it: (**inputs, the float ones as Tensors) -> Tensor,
    # whose recorded backward must give what ``backward`` gives.
    differentiable: Callable = None


def on_device_of(like, host_array):
    """``host_array`` moved to the device ``like`` lives on (left on the host for NumPy)."""
    if hasattr(like, "copy_to_host"):
        from numba import cuda

        return cuda.to_device(host_array)
    return host_array


def filled_like(x, value):
    return on_device_of(x, np.full(x.shape, value, dtype=x.dtype))


def copy_of(x):
    """A copy of x on its device, for ops that update their argument in place."""
    return on_device_of(x, x.copy_to_host() if hasattr(x, "copy_to_host") else x.copy())


# Parameter gradients are ADDED into ``*_grad`` buffers (they accumulate over calls, as in
# torch), so the buffers start from this value rather than zero and a case returns what was added.
BUFFER_START = 0.5


def gradient_buffer(like):
    return filled_like(like, BUFFER_START)


def added_to(buffer):
    return ops.add(buffer, filled_like(buffer, -BUFFER_START))


# ---- layers ---------------------------------------------------------------------------------

def _linear_backward(dout, x, weight, bias):
    dweight, dbias = gradient_buffer(weight), gradient_buffer(bias)
    dx = ops.linear_backward(dout, x, weight, weight_grad=dweight, bias_grad=dbias)
    return {"x": dx, "weight": added_to(dweight), "bias": added_to(dbias)}


def _layer_norm_backward(dout, x, weight, bias):
    _, mean, rstd = ops.layer_norm(x, weight, bias)
    dweight, dbias = gradient_buffer(weight), gradient_buffer(bias)
    dx = ops.layer_norm_backward(dout, x, mean, rstd, weight, weight_grad=dweight,
                                 bias_grad=dbias)
    return {"x": dx, "weight": added_to(dweight), "bias": added_to(dbias)}


def _rms_norm_backward(dout, x, weight):
    _, rstd = ops.rms_norm(x, weight)
    dweight = gradient_buffer(weight)
    dx = ops.rms_norm_backward(dout, x, rstd, weight, weight_grad=dweight)
    return {"x": dx, "weight": added_to(dweight)}


def _embedding_backward(dout, ids, weight):
    dweight = gradient_buffer(weight)
    ops.embedding_backward(dout, ids, weight_grad=dweight)
    return {"weight": added_to(dweight)}


def _additive_backward(dout, qp, kp, v):
    dv = gradient_buffer(v)
    dqp, dkp = ops.additive_scores_backward(dout, qp, kp, v, v_grad=dv)
    return {"qp": dqp, "kp": dkp, "v": added_to(dv)}


def _swiglu_backward(dout, gate, up):
    dgate, dup = ops.swiglu_backward(dout, gate, up)
    return {"gate": dgate, "up": dup}


def _angles(rng, N, half):
    theta = rng.uniform(-3, 3, (N, half))
    return {"cos": np.cos(theta), "sin": np.sin(theta)}


def _activation_input(rng):
    # Away from 0, where ReLU has its kink and finite differences straddle it.
    x = rng.normal(size=(2, 3, 5))
    return {"x": np.where(np.abs(x) < 0.05, 0.3, x)}


DROPOUT = dict(p=0.3, seed=11)

LAYER_CASES = [
    OpCase("linear", "linear",
           lambda rng: {"x": rng.normal(size=(2, 3, 5)), "weight": rng.normal(size=(4, 5)),
                        "bias": rng.normal(size=4)},
           ops.linear, ref.linear, _linear_backward, ("x", "weight", "bias")),
    OpCase("layer_norm", "layer_norm",
           lambda rng: {"x": rng.normal(size=(2, 3, 6)) * 3 + 1,
                        "weight": rng.normal(size=6), "bias": rng.normal(size=6)},
           lambda x, weight, bias: ops.layer_norm(x, weight, bias)[0], ref.layer_norm,
           _layer_norm_backward, ("x", "weight", "bias")),
    OpCase("rms_norm", "rms_norm",
           lambda rng: {"x": rng.normal(size=(2, 3, 6)) * 3, "weight": rng.normal(size=6)},
           lambda x, weight: ops.rms_norm(x, weight)[0], ref.rms_norm, _rms_norm_backward,
           ("x", "weight")),
    OpCase("gelu", "activations", _activation_input, ops.gelu, ref.gelu,
           lambda dout, x: {"x": ops.gelu_backward(dout, x)}, ("x",)),
    OpCase("gelu_tanh", "activations", _activation_input,
           lambda x: ops.gelu(x, approximate="tanh"), lambda x: ref.gelu(x, approximate="tanh"),
           lambda dout, x: {"x": ops.gelu_backward(dout, x, approximate="tanh")}, ("x",)),
    OpCase("relu", "activations", _activation_input, ops.relu, ref.relu,
           lambda dout, x: {"x": ops.relu_backward(dout, x)}, ("x",)),
    OpCase("silu", "activations", _activation_input, ops.silu, ref.silu,
           lambda dout, x: {"x": ops.silu_backward(dout, x)}, ("x",)),
    OpCase("swiglu", "activations",
           lambda rng: {"gate": rng.normal(size=(2, 3, 4)), "up": rng.normal(size=(2, 3, 4))},
           ops.swiglu, ref.swiglu, _swiglu_backward, ("gate", "up")),
    OpCase("dropout", "dropout",
           lambda rng: {"x": rng.normal(size=(2, 3, 7))},
           lambda x: ops.dropout(x, **DROPOUT), lambda x: ref.dropout(x, **DROPOUT),
           lambda dout, x: {"x": ops.dropout_backward(dout, **DROPOUT)}, ("x",)),
    OpCase("embedding", "embedding",
           lambda rng: {"ids": np.array([[0, 2, 2], [1, 0, 3]]), "weight": rng.normal(size=(4, 5))},
           ops.embedding, ref.embedding, _embedding_backward, ("weight",)),
    OpCase("split_heads", "heads",
           lambda rng: {"x": rng.normal(size=(2, 3, 6))},
           lambda x: ops.split_heads(x, 2), lambda x: ref.split_heads(x, 2),
           lambda dout, x: {"x": ops.merge_heads(dout)}, ("x",)),
    OpCase("merge_heads", "heads",
           lambda rng: {"x": rng.normal(size=(2, 2, 3, 4))},
           lambda x: ops.merge_heads(x), ref.merge_heads,
           lambda dout, x: {"x": ops.split_heads(dout, x.shape[1])}, ("x",)),
    OpCase("rope", "rope",
           lambda rng: {"x": rng.normal(size=(2, 2, 3, 6)), **_angles(rng, 3, 3)},
           ops.rope, ref.rope, lambda dout, x, cos, sin: {"x": ops.rope_backward(dout, cos, sin)},
           ("x", "cos", "sin")),
    OpCase("additive_scores", "additive_scores",
           lambda rng: {"qp": rng.normal(size=(2, 3, 4)), "kp": rng.normal(size=(2, 5, 4)),
                        "v": rng.normal(size=4)},
           ops.additive_scores, ref.additive_scores, _additive_backward, ("qp", "kp", "v")),
]


# ---- arrays and arithmetic ------------------------------------------------------------------

def _add_case(name, b_shape):
    return OpCase(name, "elementwise",
                  lambda rng: {"a": rng.normal(size=(2, 3, 4)), "b": rng.normal(size=b_shape)},
                  ops.add, ref_arrays.add,
                  lambda dout, a, b: {"a": dout, "b": ops.sum_leading(dout, b.shape)},
                  ("a", "b"))


def _sum_leading_into(x, out):
    out = copy_of(out)
    ops.sum_leading(x, out.shape, out=out)
    return out


def _add_into(dst, src):
    dst = copy_of(dst)
    ops.add_into(dst, src)
    return dst


def _move_toward(dst, src, weight):
    dst = copy_of(dst)
    ops.move_toward(dst, src, weight)
    return dst


def _fill(x, value):
    x = copy_of(x)
    ops.fill(x, value)
    return x


def _concat_case(name, axis, shapes):
    """Three arrays joined along ``axis``; backward cuts dout back into their sizes."""
    def backward(dout, a, b, c, axis):
        grads = ops.concat_backward(dout, [x.shape[axis] for x in (a, b, c)], axis)
        return dict(zip("abc", grads))

    return OpCase(name, "arithmetic",
                  lambda rng: {**{k: rng.normal(size=s) for k, s in zip("abc", shapes)},
                               "axis": axis},
                  lambda a, b, c, axis: ops.concat([a, b, c], axis), ref_arrays.concat, backward,
                  ("a", "b", "c"))


def _mean_along_case(name, axis):
    return OpCase(name, "arithmetic",
                  lambda rng: {"x": rng.normal(size=(2, 3, 4)), "axis": axis, "scale": 0.3},
                  ops.mean_along, ref_arrays.mean_along,
                  lambda dout, x, axis, scale: {
                      "x": ops.mean_along_backward(dout, x.shape, axis, scale)},
                  ("x",))


def _multiply_case(name, b_shape):
    return OpCase(name, "arithmetic",
                  lambda rng: {"a": rng.normal(size=(2, 3, 4)), "b": rng.normal(size=b_shape)},
                  ops.multiply, ref_arrays.multiply, float_inputs=("a", "b"))


def _away_from_zero(rng, shape):
    return rng.choice([-1.0, 1.0], shape) * rng.uniform(0.5, 2.0, shape)


ARRAY_CASES = [
    _add_case("add_broadcast", (3, 4)),
    _add_case("add_same_shape", (2, 3, 4)),
    _add_case("add_bias", (4,)),
    # 70 rows: more than one strip of rows per CUDA thread
    OpCase("sum_leading", "reductions",
           lambda rng: {"x": rng.normal(size=(70, 3))},
           lambda x: ops.sum_leading(x, (3,)), lambda x: ref_arrays.sum_leading(x, (3,)),
           float_inputs=("x",)),
    OpCase("sum_leading_into", "reductions",
           lambda rng: {"x": rng.normal(size=(5, 2, 3)), "out": rng.normal(size=(2, 3))},
           _sum_leading_into, ref_arrays.sum_leading_into, float_inputs=("x", "out")),
    OpCase("add_into", "elementwise",
           lambda rng: {"dst": rng.normal(size=(3, 4)), "src": rng.normal(size=(3, 4))},
           _add_into, ref_arrays.add_into, float_inputs=("dst", "src")),
    OpCase("move_toward", "elementwise",
           lambda rng: {"dst": rng.normal(size=(3, 4)), "src": rng.normal(size=(3, 4)),
                        "weight": 0.3},
           _move_toward, ref_arrays.move_toward, float_inputs=("dst", "src")),
    OpCase("fill", "elementwise",
           lambda rng: {"x": rng.normal(size=(3, 4)), "value": -0.3},
           _fill, ref_arrays.fill, float_inputs=("x",)),
    _multiply_case("multiply_broadcast", (3, 4)),
    _multiply_case("multiply_same_shape", (2, 3, 4)),
    OpCase("affine", "arithmetic",
           lambda rng: {"x": rng.normal(size=(3, 4)), "scale": 1.7, "shift": -0.4},
           ops.affine, ref_arrays.affine, float_inputs=("x",)),
    OpCase("reciprocal", "arithmetic", lambda rng: {"x": _away_from_zero(rng, (3, 4))},
           ops.reciprocal, ref_arrays.reciprocal, float_inputs=("x",)),
    _concat_case("concat_first_axis", 0, [(1, 3, 2), (2, 3, 2), (1, 3, 2)]),
    _concat_case("concat_middle_axis", 1, [(2, 3, 4), (2, 1, 4), (2, 2, 4)]),
    _concat_case("concat_last_axis", 2, [(2, 3, 1), (2, 3, 2), (2, 3, 3)]),
    *(_mean_along_case(f"mean_along_axis_{axis}", axis) for axis in range(3)),
]


# ---- losses ---------------------------------------------------------------------------------

HUBER_DELTA = 0.7


def _loss_outputs(total, weight_sum):
    return np.array([total, weight_sum, total / weight_sum])


def _total_scale(dout, weight_sum):
    """dL/d(sum of weighted losses) for L = sum(dout * [total, weight sum, total / weight sum])."""
    return dout[0] + dout[2] / weight_sum


def _regression_inputs(rng, kind, weighted, skip_nan):
    shape = (3, 4)
    if kind == "bce_with_logits":
        pred, target = 2 * rng.normal(size=shape), rng.uniform(size=shape)
    else:
        # |pred - target| away from 0 (MAE's kink) and from Huber's delta, where finite
        # differences would straddle the switch between branches
        gap = rng.uniform(0.1, 1.5, shape)
        gap = np.where(np.abs(gap - HUBER_DELTA) < 0.1, gap + 0.3, gap)
        target = rng.normal(size=shape)
        pred = target + rng.choice([-1.0, 1.0], shape) * gap
    if skip_nan:
        target[0, :2] = target[2, 3] = np.nan
    inputs = {"pred": pred, "target": target}
    if weighted:
        inputs["weight"] = rng.uniform(0.2, 2.0, shape)
    return inputs


def _pointwise_case(kind, weighted=False, skip_nan=False):
    options = dict(kind=kind, delta=HUBER_DELTA if kind == "huber" else 1.0, skip_nan=skip_nan)

    def forward(pred, target, weight=None):
        return _loss_outputs(*ops.pointwise_loss(pred, target, weight=weight, **options))

    def backward(dout, pred, target, weight=None):
        _, weight_sum = ops.pointwise_loss(pred, target, weight=weight, **options)
        return {"pred": ops.pointwise_loss_backward(pred, target, weight=weight,
                                                    scale=_total_scale(dout, weight_sum),
                                                    **options)}

    name = kind + ("_weighted" if weighted else "") + ("_skip_nan" if skip_nan else "")
    return OpCase(
        name, "losses", lambda rng: _regression_inputs(rng, kind, weighted, skip_nan),
        forward, lambda **inputs: ref_losses.pointwise_loss(**inputs, **options), backward,
        ("pred", "target", "weight"),
        lambda dout, **inputs: ref_losses.pointwise_loss_backward(dout, **inputs, **options),
        lambda **inputs: ref_losses.torch_pointwise_loss(**inputs, **options))


def _classification_inputs(rng, class_weight, ignore_index):
    # one ignored row; class 1 is an ordinary class unless it is ignore_index
    inputs = {"logits": 2 * rng.normal(size=(2, 3, 5)),
              "targets": np.array([[0, ignore_index, 4], [2, 3, 1]])}
    if class_weight:
        inputs["class_weight"] = rng.uniform(0.5, 2.0, size=5)
    return inputs


def _cross_entropy_case(name, class_weight=False, label_smoothing=0.0, ignore_index=-100):
    options = dict(label_smoothing=label_smoothing, ignore_index=ignore_index)

    def forward(logits, targets, class_weight=None):
        total, weight_sum, _ = ops.cross_entropy(logits, targets, class_weight=class_weight,
                                                 **options)
        return _loss_outputs(total, weight_sum)

    def backward(dout, logits, targets, class_weight=None):
        _, weight_sum, lse = ops.cross_entropy(logits, targets, class_weight=class_weight,
                                               **options)
        return {"logits": ops.cross_entropy_backward(logits, lse, targets,
                                                     scale=_total_scale(dout, weight_sum),
                                                     class_weight=class_weight, **options)}

    return OpCase(
        name, "losses", lambda rng: _classification_inputs(rng, class_weight, ignore_index),
        forward, lambda **inputs: ref_losses.cross_entropy(**inputs, **options), backward,
        ("logits", "class_weight"),
        lambda dout, **inputs: ref_losses.cross_entropy_backward(dout, **inputs, **options),
        lambda **inputs: ref_losses.torch_cross_entropy(**inputs, **options))


LOSS_CASES = [
    *(_pointwise_case(kind, **variant) for kind in ops.POINTWISE_LOSSES
      for variant in ({}, {"skip_nan": True}, {"weighted": True, "skip_nan": True})),
    _pointwise_case("huber", weighted=True),
    _cross_entropy_case("cross_entropy"),
    _cross_entropy_case("cross_entropy_class_weight", class_weight=True),
    _cross_entropy_case("cross_entropy_smoothing", label_smoothing=0.1),
    _cross_entropy_case("cross_entropy_weighted_smoothing", class_weight=True,
                        label_smoothing=0.2),
    _cross_entropy_case("cross_entropy_ignore_a_class", class_weight=True, label_smoothing=0.1,
                        ignore_index=1),
    OpCase("cross_entropy_lse", "losses",
           lambda rng: _classification_inputs(rng, False, -100),
           lambda logits, targets: ops.cross_entropy(logits, targets)[2],
           lambda logits, targets: ref_losses.log_sum_exp(logits), float_inputs=("logits",)),
]


# ---- pooling --------------------------------------------------------------------------------

def _tokens_and_padding(rng):
    # a partly padded sequence, an unpadded one, and one that is all padding
    padding = np.array([[False, False, True, True], [False] * 4, [True] * 4])
    return {"x": rng.normal(size=(3, 4, 2)), "key_padding_mask": padding}


def _prepend_token_backward(dout, x, token, length=None):
    dtoken = gradient_buffer(token)
    dx = ops.prepend_token_backward(dout, x, token_grad=dtoken)
    return {"x": dx, "token": added_to(dtoken)}


def _prepend_token_case(name, length=None):
    return OpCase(name, "pooling",
                  lambda rng: {"x": rng.normal(size=(2, 3, 4)), "token": rng.normal(size=4),
                               "length": length},
                  ops.prepend_token, ref_pooling.prepend_token, _prepend_token_backward,
                  ("x", "token"), ref_pooling.prepend_token_backward)


def _write_positions(cache, new, start):
    cache = copy_of(cache)
    ops.write_positions(cache, new, start)
    return cache


POOLING_CASES = [
    OpCase("masked_mean", "pooling", _tokens_and_padding, ops.masked_mean,
           ref_pooling.masked_mean,
           lambda dout, x, key_padding_mask: {
               "x": ops.masked_mean_backward(dout, x, key_padding_mask)},
           ("x",), ref_pooling.masked_mean_backward),
    OpCase("masked_mean_unpadded", "pooling", lambda rng: {"x": rng.normal(size=(2, 3, 2))},
           ops.masked_mean, ref_pooling.masked_mean,
           lambda dout, x: {"x": ops.masked_mean_backward(dout, x)}, ("x",),
           ref_pooling.masked_mean_backward),
    _prepend_token_case("prepend_token"),
    _prepend_token_case("prepend_token_shift_right", length=3),
    OpCase("prepend_token_ids", "pooling",
           lambda rng: {"x": rng.integers(0, 9, size=(2, 3, 1)), "token": np.array([9])},
           ops.prepend_token, ref_pooling.prepend_token),
    OpCase("first_token", "pooling", lambda rng: {"x": rng.normal(size=(2, 3, 4))},
           ops.first_token, ref_pooling.first_token,
           lambda dout, x: {"x": ops.first_token_backward(dout, x)}, ("x",),
           ref_pooling.first_token_backward),
    OpCase("write_positions", "kv_cache",
           lambda rng: {"cache": rng.normal(size=(2, 2, 5, 3)),
                        "new": rng.normal(size=(2, 2, 2, 3)), "start": 2},
           _write_positions, ref_pooling.write_positions, float_inputs=("cache", "new")),
]


# ---- optimizers -----------------------------------------------------------------------------

def _sgd_steps(param, grads, **options):
    param, velocity = copy_of(param), filled_like(param, 0.0)
    for step in range(grads.shape[0]):
        ops.sgd_step(param, grads[step], velocity, **options)
    return param, velocity


def _adam_steps(param, grads, **options):
    param, exp_avg, exp_avg_sq = copy_of(param), filled_like(param, 0.0), filled_like(param, 0.0)
    for step in range(grads.shape[0]):
        ops.adam_step(param, grads[step], exp_avg, exp_avg_sq, step=step + 1, **options)
    return param, exp_avg, exp_avg_sq


def _optimizer_case(name, steps, reference, torch_reference, **options):
    return OpCase(name, "optimizers",
                  lambda rng: {"param": rng.normal(size=(3, 4)),
                               "grads": rng.normal(size=(3, 3, 4))},
                  lambda **inputs: steps(**inputs, **options),
                  lambda **inputs: reference(**inputs, **options), float_inputs=("param", "grads"),
                  torch_reference=lambda **inputs: torch_reference(**inputs, **options))


def _sgd_case(name, **options):
    return _optimizer_case(name, _sgd_steps, ref_optimizers.sgd_steps,
                           ref_optimizers.torch_sgd_steps, **options)


def _adam_case(name, **options):
    return _optimizer_case(name, _adam_steps, ref_optimizers.adam_steps,
                           ref_optimizers.torch_adam_steps, **options)


OPTIMIZER_CASES = [
    _sgd_case("sgd", lr=0.1),
    _sgd_case("sgd_momentum_weight_decay", lr=0.1, momentum=0.9, weight_decay=0.01,
              grad_scale=0.5),
    _sgd_case("sgd_nesterov", lr=0.1, momentum=0.9, weight_decay=0.01, nesterov=True),
    _adam_case("adam", lr=0.01, betas=(0.8, 0.99), weight_decay=0.1, grad_scale=0.5),
    _adam_case("adamw", lr=0.01, weight_decay=0.1, decoupled_weight_decay=True, grad_scale=0.7),
    # 70 elements: more than one block of the CUDA reduction
    OpCase("sum_of_squares", "optimizers",
           lambda rng: {"a": rng.normal(size=(3, 4)), "b": rng.normal(size=70)},
           lambda a, b: np.array(ops.sum_of_squares([a, b])), ref_optimizers.sum_of_squares,
           float_inputs=("a", "b")),
]

# Each op's differentiable form in seqattn.autodiff, the forward/backward pair that models record.
DIFFERENTIABLE = {
    "linear": autodiff.linear,
    "layer_norm": autodiff.layer_norm,
    "rms_norm": autodiff.rms_norm,
    "gelu": autodiff.gelu,
    "gelu_tanh": lambda x: autodiff.gelu(x, approximate="tanh"),
    "relu": autodiff.relu,
    "silu": autodiff.silu,
    "swiglu": autodiff.swiglu,
    "dropout": lambda x: autodiff.dropout(x, **DROPOUT),
    "embedding": autodiff.embedding,
    "split_heads": lambda x: autodiff.split_heads(x, 2),
    "merge_heads": lambda x: autodiff.merge_heads(x),
    "rope": autodiff.rope,
    "additive_scores": autodiff.additive_scores,
    "add_broadcast": autodiff.add,
    "add_same_shape": autodiff.add,
    "add_bias": autodiff.add,
    "concat_first_axis": lambda a, b, c, axis: autodiff.concat([a, b, c], axis),
    "concat_middle_axis": lambda a, b, c, axis: autodiff.concat([a, b, c], axis),
    "concat_last_axis": lambda a, b, c, axis: autodiff.concat([a, b, c], axis),
    **{f"mean_along_axis_{axis}": lambda x, axis, scale: autodiff.reduce_sum(x, axis) * scale
       for axis in range(3)},
    "masked_mean": autodiff.masked_mean,
    "masked_mean_unpadded": autodiff.masked_mean,
    "prepend_token": autodiff.prepend_token,
    "prepend_token_shift_right": autodiff.prepend_token,
    "first_token": autodiff.first_token,
}

CASES = [replace(case, differentiable=DIFFERENTIABLE.get(case.name))
         for case in LAYER_CASES + ARRAY_CASES + LOSS_CASES + POOLING_CASES + OPTIMIZER_CASES]
