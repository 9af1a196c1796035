"""The Module base: names, gradients, modes, devices, state dicts and clear errors."""
import numpy as np
import pytest

import seqattn.nn as nn
from gradcheck import check_module_gradients, to_host

F64 = np.float64


def _encoder(**kwargs):
    layer = nn.TransformerEncoderLayer(8, 2, 12, dropout=0.0, activation="gelu", norm_first=True,
                                       seed=0, **kwargs)
    return nn.TransformerEncoder(layer, 2, norm=nn.LayerNorm(8))


def test_parameter_names_follow_torch():
    names = list(_encoder().state_dict())
    assert names[:4] == ["layers.0.self_attn.in_proj_weight", "layers.0.self_attn.in_proj_bias",
                         "layers.0.self_attn.out_proj.weight", "layers.0.self_attn.out_proj.bias"]
    assert "layers.1.norm2.bias" in names and names[-2:] == ["norm.weight", "norm.bias"]


def test_same_seed_same_weights_float32_default():
    a, b = _encoder().state_dict(), _encoder().state_dict()
    assert all(np.array_equal(a[k], b[k]) for k in a)
    assert a["norm.weight"].dtype == np.float32


def test_gradients_accumulate_until_zero_grad():
    model = nn.Linear(3, 2, dtype=F64, seed=0)
    x = np.ones((4, 3))
    for _ in range(2):
        model.backward(np.ones_like(model(x)))
    np.testing.assert_allclose(model.bias.grad, [8.0, 8.0])
    model.zero_grad()
    assert not model.bias.grad.any()


def test_eval_mode_keeps_nothing_for_backward():
    model = nn.Linear(3, 2, seed=0).eval()
    model(np.ones((1, 3), np.float32))
    with pytest.raises(RuntimeError, match="forward in training mode first"):
        model.backward(np.ones((1, 2), np.float32))


def test_wrong_embedding_size_is_reported():
    with pytest.raises(ValueError, match=r"src has shape \(2, 5, 6\); expected \(B, N, "
                                         r"d_model\) with d_model = 8"):
        _encoder()(np.ones((2, 5, 6), np.float32))


def test_mask_of_wrong_shape_is_reported():
    with pytest.raises(ValueError, match="key_padding_mask has shape"):
        _encoder()(np.ones((2, 5, 8), np.float32), src_key_padding_mask=np.zeros((2, 4), bool))


def test_load_state_dict_checks_names_and_shapes():
    model = nn.Linear(3, 2)
    with pytest.raises(KeyError, match="missing"):
        model.load_state_dict({"weight": np.zeros((2, 3))})
    with pytest.raises(ValueError, match=r"weight has shape \(3, 2\)"):
        model.load_state_dict({"weight": np.zeros((3, 2)), "bias": np.zeros(2)})


def test_persistent_buffers_are_saved_and_derived_ones_are_not():
    layer = nn.Linear(3, 2)
    layer.register_buffer("table", np.arange(4.0, dtype=np.float32))
    layer.register_buffer("kept", np.arange(3.0, dtype=np.float32), persistent=True)
    state = layer.state_dict()
    assert sorted(state) == ["bias", "kept", "weight"]
    other = nn.Linear(3, 2)
    other.register_buffer("kept", np.zeros(3, np.float32), persistent=True)
    other.load_state_dict({**state, "kept": np.array([7.0, 8.0, 9.0])})
    np.testing.assert_array_equal(other.kept, [7.0, 8.0, 9.0])
    assert other.kept.dtype == np.float32
    with pytest.raises(KeyError, match="missing \\['kept'\\]"):
        other.load_state_dict({k: v for k, v in state.items() if k != "kept"})
    with pytest.raises(ValueError, match="kept has shape \\(2,\\)"):
        other.load_state_dict({**state, "kept": np.zeros(2)})


def test_input_on_another_device_than_the_module():
    from numba import cuda

    with pytest.raises(ValueError, match="x is on the GPU but Linear's parameters are on the "
                                         "CPU"):
        nn.Linear(3, 2)(cuda.to_device(np.ones((1, 3), np.float32)))


def test_additive_attention_gradients():
    module = nn.AdditiveAttention(4, 3, 5, dtype=F64, seed=0)
    rng = np.random.default_rng(0)
    inputs = {"query": rng.normal(size=(2, 3, 4)), "key": rng.normal(size=(2, 4, 3)),
              "value": rng.normal(size=(2, 4, 2))}
    padding = np.array([[False, False, False, True], [False] * 4])

    def backward(d):
        return dict(zip(("query", "key", "value"), module.backward(d)))

    check_module_gradients(module, lambda **kw: module(**kw, key_padding_mask=padding)[0],
                           backward, inputs)


def test_encoder_layer_step_on_cuda_matches_cpu():
    """Forward and backward of an encoder layer on the GPU (the simulator in CI), no host copies
    between layers, against the same layer on the CPU."""
    from numba import cuda

    cpu = nn.TransformerEncoderLayer(4, 2, 6, dropout=0.0, norm_first=True, dtype=F64, seed=0)
    gpu = nn.TransformerEncoderLayer(4, 2, 6, dropout=0.0, norm_first=True, dtype=F64,
                                     seed=0).to("cuda")
    x = np.random.default_rng(0).normal(size=(1, 3, 4))
    dout = np.random.default_rng(1).normal(size=(1, 3, 4))
    y_gpu = gpu(cuda.to_device(x), is_causal=True)
    dx_gpu = gpu.backward(cuda.to_device(dout))
    np.testing.assert_allclose(to_host(y_gpu), cpu(x, is_causal=True), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(to_host(dx_gpu), cpu.backward(dout), rtol=1e-9, atol=1e-12)
    grads = {k: to_host(p.grad) for k, p in gpu.named_parameters()}
    for name, p in cpu.named_parameters():
        np.testing.assert_allclose(grads[name], p.grad, rtol=1e-9, atol=1e-12, err_msg=name)


def test_positional_encodings():
    from seqattn.nn.positional import (alibi_slopes, grid_sinusoidal_table, sinusoidal_table,
                                       unit_sphere)

    np.testing.assert_allclose(alibi_slopes(8), 2.0 ** -np.arange(1, 9))
    assert alibi_slopes(6).shape == (6,)
    table = sinusoidal_table(np.arange(4), 6)
    np.testing.assert_allclose(table[:, 0::2] ** 2 + table[:, 1::2] ** 2, 1.0)
    grid = grid_sinusoidal_table(np.stack(np.meshgrid(np.arange(3), np.arange(2)), -1), 8)
    assert grid.shape == (2, 3, 8)
    np.testing.assert_allclose(np.linalg.norm(unit_sphere([0, 90], [180, 0]), axis=-1), 1.0)


def test_learned_positions_gradient():
    module = nn.positional.LearnedPositionalEmbedding(6, 4, dtype=F64, seed=0)
    x = np.random.default_rng(0).normal(size=(2, 3, 4))
    check_module_gradients(module, lambda x: module(x), lambda d: {"x": module.backward(d)},
                           {"x": x})
