"""autodiff.packed_attention: every gradient it gives (qkv, a dense bias, the structured biases'
tables and positions) against float64 finite differences, and the same bits as the split
path it replaces in MultiheadAttention (split_heads, attention, merge_heads)."""
import dataclasses

import numpy as np
import pytest

from attention_cases import Case
from gradcheck import assert_gradient, numerical_gradient
from seqattn import autodiff, ops
from structured_bias_cases import StructuredCase

H = 2
CASE = StructuredCase(
    "self_masked_distance_and_pair",
    Case("self_masked", B=2, H=H, Hkv=H, N=6, M=6, D=3, causal=True, key_padding="some",
         bias_shape=(1, H, 6, 6), alibi=True, window=(3, None)),
    distance=True, types=True, cutoff=1.9, smooth=True, pair="codes")


def _inputs(dtype):
    """(qkv, dout, the options without the biases, dense bias, distance bias, pair bias)."""
    q, k, v, opts = CASE.inputs(dtype)
    qkv = ops.merge_heads(q, k, v)
    dout = np.random.default_rng(1).standard_normal((q.shape[0], q.shape[2], H * q.shape[3]))
    bias = opts.pop("bias")
    return qkv, dout.astype(dtype), opts, bias, opts.pop("distance_bias"), opts.pop("pair_bias")


def _tracked(qkv, bias, distance, pair):
    """The differentiable inputs as Tensors that require gradients, by name."""
    tensors = {name: autodiff.Tensor(np.array(x), requires_grad=True) for name, x in (
        ("qkv", qkv), ("bias", bias), ("distance.table", distance.table),
        ("distance.x", distance.x), ("pair.table", pair.table))}
    distance = dataclasses.replace(distance, table=tensors["distance.table"],
                                   x=tensors["distance.x"])
    pair = dataclasses.replace(pair, table=tensors["pair.table"])
    return tensors, distance, pair


def test_gradients_match_finite_differences():
    qkv, dout, opts, bias, distance, pair = _inputs(np.float64)
    tensors, tracked_distance, tracked_pair = _tracked(qkv, bias, distance, pair)
    out = autodiff.packed_attention(tensors["qkv"], H, tensors["bias"], tracked_distance,
                                    tracked_pair, **opts)
    autodiff.backward([out], [dout])
    arrays = {name: np.array(t.data) for name, t in tensors.items()}

    def loss():
        with autodiff.no_grad():
            out = ops.packed_attention(
                arrays["qkv"], H, bias=arrays["bias"], **opts,
                distance_bias=dataclasses.replace(distance, table=arrays["distance.table"],
                                                  x=arrays["distance.x"]),
                pair_bias=dataclasses.replace(pair, table=arrays["pair.table"]))
        return float((out * dout).sum())

    rng = np.random.default_rng(2)
    for name, tensor in tensors.items():
        assert tensor.grad is not None, f"{name} got no gradient"
        assert_gradient(f"d{name}", tensor.grad,
                        numerical_gradient(loss, arrays[name], samples=8, rng=rng))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_same_bits_as_the_split_path(dtype):
    qkv, dout, opts, bias, distance, pair = _inputs(dtype)
    results = []
    for packed in (True, False):
        tensors, tracked_distance, tracked_pair = _tracked(qkv, bias, distance, pair)
        if packed:
            out = autodiff.packed_attention(tensors["qkv"], H, tensors["bias"],
                                            tracked_distance, tracked_pair, **opts)
        else:
            heads = autodiff.split_heads(tensors["qkv"], H, parts=3)
            out = autodiff.merge_heads(autodiff.attention(
                *heads, tensors["bias"], tracked_distance, tracked_pair, **opts))
        autodiff.backward([out], [dout])
        results.append({"out": out.data, **{name: t.grad for name, t in tensors.items()}})
    for name, want in results[1].items():
        np.testing.assert_array_equal(results[0][name], want, name)


def test_qkv_alone_tracked_gets_the_same_gradient():
    """Biases given as arrays get no gradient (nor do the positions: the kernels skip them),
    and qkv's is the same bits."""
    qkv, dout, opts, bias, distance, pair = _inputs(np.float64)
    grads = []
    for all_tracked in (True, False):
        tensors, tracked_distance, tracked_pair = _tracked(qkv, bias, distance, pair)
        if not all_tracked:
            tracked_distance, tracked_pair = distance, pair
        out = autodiff.packed_attention(tensors["qkv"], H, tensors["bias"] if all_tracked
                                        else bias, tracked_distance, tracked_pair, **opts)
        autodiff.backward([out], [dout])
        grads.append(tensors["qkv"].grad)
    np.testing.assert_array_equal(grads[1], grads[0])
