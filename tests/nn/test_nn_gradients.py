"""Every layer's backward against float64 finite differences, a named assertion per gradient."""
import numpy as np
import pytest

import seqattn.nn as nn
from gradcheck import check_module_gradients

F64 = np.float64


def _x(*shape, seed=1):
    return np.random.default_rng(seed).normal(size=shape)


def _single_input(module, x):
    check_module_gradients(module, lambda x: module(x), lambda d: {"x": module.backward(d)},
                           {"x": x})


@pytest.mark.parametrize("make", [
    lambda: nn.Linear(5, 4, dtype=F64, seed=0),
    lambda: nn.Linear(5, 4, bias=False, dtype=F64, seed=0),
    lambda: nn.LayerNorm(5, dtype=F64),
    lambda: nn.RMSNorm(5, dtype=F64),
    lambda: nn.GELU(),
    lambda: nn.SiLU(),
    lambda: nn.FeedForward(5, 7, activation="gelu", dtype=F64, seed=0),
    lambda: nn.SwiGLUFeedForward(5, 6, dtype=F64, seed=0),
    lambda: nn.Residual(nn.Sequential(nn.LayerNorm(5, dtype=F64), nn.Linear(5, 5, dtype=F64,
                                                                             seed=0))),
], ids=["linear", "linear_nobias", "layer_norm", "rms_norm", "gelu", "silu", "ffn", "swiglu",
        "residual_sequential"])
def test_single_input_layers(make):
    module = make()
    if isinstance(module, nn.LayerNorm) or isinstance(module, nn.RMSNorm):
        module.weight.data[:] = _x(5, seed=3)  # non-trivial affine parameters
    _single_input(module, _x(2, 3, 5))


def test_embedding_weight_gradient():
    module = nn.Embedding(6, 4, padding_idx=0, dtype=F64, seed=0)
    ids = np.array([[0, 2, 2], [5, 1, 0]])

    def backward(dout):
        module.backward(dout)
        return {}  # categorical ids have no gradient; the weight's is checked

    check_module_gradients(module, lambda: module(ids), backward, {})
    assert np.all(module.weight.grad[0] == 0), "padding row gets no gradient"


def _mha_case(kdim=None, rotary=False, alibi=False):
    from seqattn.nn.positional import RotaryEmbedding, alibi_slopes

    return nn.MultiheadAttention(
        8, 2, kdim=kdim, vdim=kdim, dtype=F64, seed=0,
        rotary=RotaryEmbedding(4, dtype=F64) if rotary else None,
        alibi_slopes=alibi_slopes(2) if alibi else None)


@pytest.mark.parametrize("options", [
    dict(), dict(is_causal=True), dict(kdim=6), dict(rotary=True, is_causal=True),
    dict(alibi=True),
], ids=["self", "causal", "cross_kdim", "rope", "alibi"])
def test_multihead_attention(options):
    options = dict(options)
    kdim = options.get("kdim")
    module = _mha_case(kdim, options.pop("rotary", False), options.pop("alibi", False))
    causal = options.get("is_causal", False)
    inputs = {"query": _x(2, 3, 8), "key": _x(2, 4, kdim or 8, seed=2)}
    if not kdim:
        inputs["key"] = _x(2, 3, 8, seed=2)
    inputs["value"] = _x(*inputs["key"].shape, seed=3)
    padding = np.zeros((2, inputs["key"].shape[1]), bool)
    padding[1, -1] = True

    def call(query, key, value):
        return module(query, key, value, key_padding_mask=padding, is_causal=causal)[0]

    def backward(d):
        return dict(zip(("query", "key", "value"), module.backward(d)))

    check_module_gradients(module, call, backward, inputs)


@pytest.mark.parametrize("norm_first", [False, True], ids=["post_norm", "pre_norm"])
def test_encoder_layer(norm_first):
    layer = nn.TransformerEncoderLayer(8, 2, 12, dropout=0.0, activation="gelu",
                                       norm_first=norm_first, dtype=F64, seed=0)
    padding = np.array([[False, False, False, True], [False] * 4])
    check_module_gradients(layer, lambda x: layer(x, src_key_padding_mask=padding,
                                                  is_causal=True),
                           lambda d: {"x": layer.backward(d)}, {"x": _x(2, 4, 8)})


@pytest.mark.parametrize("norm_first", [False, True], ids=["post_norm", "pre_norm"])
def test_decoder_layer(norm_first):
    layer = nn.TransformerDecoderLayer(8, 2, 12, dropout=0.0, norm_first=norm_first,
                                       dtype=F64, seed=0)
    padding = np.array([[False, False, True], [False] * 3])

    def call(tgt, memory):
        return layer(tgt, memory, memory_key_padding_mask=padding, tgt_is_causal=True)

    check_module_gradients(layer, call, lambda d: dict(zip(("tgt", "memory"), layer.backward(d))),
                           {"tgt": _x(2, 4, 8), "memory": _x(2, 3, 8, seed=2)})


def test_whole_transformer():
    model = nn.Transformer(8, 2, 2, 2, 12, dropout=0.0, dtype=F64, seed=0)
    check_module_gradients(model, lambda src, tgt: model(src, tgt, tgt_is_causal=True),
                           lambda d: dict(zip(("src", "tgt"), model.backward(d))),
                           {"src": _x(1, 3, 8), "tgt": _x(1, 2, 8, seed=2)}, samples=3)


def test_dropout_layer_gradient_uses_the_forward_mask():
    module = nn.Dropout(0.4, seed=0)
    x = _x(3, 20)
    out = module(x)
    np.testing.assert_allclose(module.backward(np.ones_like(x)), out / x)


@pytest.mark.parametrize("options", [dict(), dict(bias=False), dict(rotary=True)],
                         ids=["packed", "no_bias", "rope"])
def test_self_attention_backward(options):
    """One array as query, key and value: the packed projection runs as one GEMM, and backward
    returns one gradient, dquery + dkey + dvalue (what three separate copies get, summed)."""
    from seqattn.nn.positional import RotaryEmbedding

    module = nn.MultiheadAttention(
        8, 2, bias=options.get("bias", True), dtype=F64, seed=0,
        rotary=RotaryEmbedding(4, dtype=F64) if options.get("rotary") else None)
    check_module_gradients(module, lambda x: module(x, x, x, is_causal=True)[0],
                           lambda d: {"x": module.backward(d)}, {"x": _x(2, 3, 8)})
    x, d = _x(2, 3, 8), _x(2, 3, 8, seed=4)
    module(x, x.copy(), x.copy())
    summed = sum(module.backward(d))
    module(x, x, x)
    np.testing.assert_allclose(module.backward(d), summed, rtol=1e-12, atol=1e-12)
