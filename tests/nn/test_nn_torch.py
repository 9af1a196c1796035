"""torch.nn parity: state dicts move both ways; outputs, input gradients and every parameter
gradient match torch in float64 (post-norm and pre-norm, padding and causal masks)."""
import numpy as np
import pytest

import seqattn.nn as nn

torch = pytest.importorskip("torch")
F64 = np.float64


def _load_into_torch(ours, theirs):
    theirs.load_state_dict({k: torch.from_numpy(v) for k, v in ours.state_dict().items()})


def _compare(ours, theirs, run_ours, run_theirs, inputs, backward):
    """Run both, check outputs, input gradients and every parameter gradient by name."""
    rng = np.random.default_rng(5)
    ours.train()
    ours.zero_grad()
    out = run_ours(**inputs)
    t_inputs = {k: torch.tensor(v, requires_grad=True) for k, v in inputs.items()}
    t_out = run_theirs(**t_inputs)
    np.testing.assert_allclose(out, t_out.detach().numpy(), rtol=1e-10, atol=1e-10,
                               err_msg="outputs")
    dout = rng.normal(size=out.shape)
    grads = backward(dout)
    t_out.backward(torch.from_numpy(dout))
    for name, g in grads.items():
        np.testing.assert_allclose(g, t_inputs[name].grad.numpy(), rtol=1e-9, atol=1e-10,
                                   err_msg=f"d{name}")
    t_params = dict(theirs.named_parameters())
    for name, p in ours.named_parameters():
        np.testing.assert_allclose(p.grad, t_params[name].grad.numpy(), rtol=1e-9, atol=1e-10,
                                   err_msg=f"d{name}")


def _x(*shape, seed=1):
    return np.random.default_rng(seed).normal(size=shape)


PADDING = np.array([[False, False, False, False, True], [False] * 5])


@pytest.mark.parametrize("cross", [False, True], ids=["self", "cross_kdim"])
def test_multihead_attention(cross):
    kdim = 6 if cross else None
    ours = nn.MultiheadAttention(8, 2, kdim=kdim, vdim=kdim, dtype=F64, seed=0)
    theirs = torch.nn.MultiheadAttention(8, 2, kdim=kdim, vdim=kdim, batch_first=True,
                                         dtype=torch.float64)
    _load_into_torch(ours, theirs)
    allowed = np.tril(np.ones((3, 5), bool), k=2)  # seqattn: True = may attend

    def run_ours(query, key, value):
        return ours(query, key, value, key_padding_mask=PADDING, attn_mask=allowed)[0]

    def run_theirs(query, key, value):
        # torch's bool attn_mask means the opposite: True = may not attend
        return theirs(query, key, value, key_padding_mask=torch.from_numpy(PADDING),
                      attn_mask=torch.from_numpy(~allowed), need_weights=False)[0]

    inputs = {"query": _x(2, 3, 8), "key": _x(2, 5, kdim or 8, seed=2),
              "value": _x(2, 5, kdim or 8, seed=3)}
    _compare(ours, theirs, run_ours, run_theirs, inputs,
             lambda d: dict(zip(("query", "key", "value"), ours.backward(d))))


@pytest.mark.parametrize("options", [{"is_causal": True}, {"alibi": True}],
                         ids=["causal", "alibi_window"])
def test_packed_self_attention(options):
    """Self-attention, key and value the query itself: the heads are read straight from the
    packed projection (ops.packed_attention); ALiBi and a window as torch's float mask."""
    slopes = np.array([0.5, 0.25]) if options.get("alibi") else None
    window = (2, 1) if options.get("alibi") else None
    ours = nn.MultiheadAttention(8, 2, alibi_slopes=slopes, window=window, dtype=F64, seed=0)
    theirs = torch.nn.MultiheadAttention(8, 2, batch_first=True, dtype=torch.float64)
    _load_into_torch(ours, theirs)
    causal = options.get("is_causal", False)
    i, j = np.arange(5)[:, None], np.arange(5)[None, :]
    scores = np.zeros((2, 5, 5))
    if causal:
        scores[:, j > i] = -np.inf
    if slopes is not None:
        scores = scores - slopes[:, None, None] * np.abs(i - j)
        scores[:, (j < i - window[0]) | (j > i + window[1])] = -np.inf
    # torch: float masks added to the scores, (B * H, N, N) and (B, N)
    float_mask = torch.from_numpy(np.tile(scores, (2, 1, 1)))
    float_padding = torch.from_numpy(np.where(PADDING, -np.inf, 0.0))

    def run_theirs(x):
        return theirs(x, x, x, key_padding_mask=float_padding, attn_mask=float_mask,
                      need_weights=False)[0]

    _compare(ours, theirs, lambda x: ours(x, key_padding_mask=PADDING, is_causal=causal)[0],
             run_theirs, {"x": _x(2, 5, 8)}, lambda d: {"x": ours.backward(d)})


def test_attention_weights_are_per_head():
    ours = nn.MultiheadAttention(8, 2, dtype=F64, seed=0)
    theirs = torch.nn.MultiheadAttention(8, 2, batch_first=True, dtype=torch.float64)
    _load_into_torch(ours, theirs)
    x = _x(2, 5, 8)
    _, weights = ours(x, x, x, key_padding_mask=PADDING, need_weights=True)
    t = torch.from_numpy(x)
    _, t_weights = theirs(t, t, t, key_padding_mask=torch.from_numpy(PADDING),
                          average_attn_weights=False)
    np.testing.assert_allclose(weights, t_weights.detach().numpy(), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("norm_first", [False, True], ids=["post_norm", "pre_norm"])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_encoder_layer(norm_first, activation):
    kwargs = dict(dim_feedforward=12, dropout=0.0, activation=activation, batch_first=True,
                  norm_first=norm_first)
    ours = nn.TransformerEncoderLayer(8, 2, **kwargs, dtype=F64, seed=0)
    theirs = torch.nn.TransformerEncoderLayer(8, 2, **kwargs, dtype=torch.float64)
    _load_into_torch(ours, theirs)
    causal = torch.ones(5, 5, dtype=torch.bool).triu(1)  # torch: True = may not attend

    def run_theirs(x):
        return theirs(x, src_mask=causal, src_key_padding_mask=torch.from_numpy(PADDING),
                      is_causal=True)

    _compare(ours, theirs,
             lambda x: ours(x, src_key_padding_mask=PADDING, is_causal=True), run_theirs,
             {"x": _x(2, 5, 8)}, lambda d: {"x": ours.backward(d)})


@pytest.mark.parametrize("norm_first", [False, True], ids=["post_norm", "pre_norm"])
def test_decoder_layer(norm_first):
    kwargs = dict(dim_feedforward=12, dropout=0.0, batch_first=True, norm_first=norm_first)
    ours = nn.TransformerDecoderLayer(8, 2, **kwargs, dtype=F64, seed=0)
    theirs = torch.nn.TransformerDecoderLayer(8, 2, **kwargs, dtype=torch.float64)
    _load_into_torch(ours, theirs)
    causal = torch.ones(4, 4, dtype=torch.bool).triu(1)

    def run_ours(tgt, memory):
        return ours(tgt, memory, memory_key_padding_mask=PADDING, tgt_is_causal=True)

    def run_theirs(tgt, memory):
        return theirs(tgt, memory, tgt_mask=causal, tgt_is_causal=True,
                      memory_key_padding_mask=torch.from_numpy(PADDING))

    _compare(ours, theirs, run_ours, run_theirs, {"tgt": _x(2, 4, 8), "memory": _x(2, 5, 8)},
             lambda d: dict(zip(("tgt", "memory"), ours.backward(d))))


def test_transformer_and_state_dict_from_torch():
    kwargs = dict(d_model=8, nhead=2, num_encoder_layers=2, num_decoder_layers=1,
                  dim_feedforward=12, dropout=0.0, batch_first=True)
    theirs = torch.nn.Transformer(**kwargs, dtype=torch.float64)
    ours = nn.Transformer(**kwargs, dtype=F64, seed=0)
    # torch -> seqattn this time: the names and shapes are the same in both directions.
    ours.load_state_dict({k: v.detach().numpy() for k, v in theirs.state_dict().items()})
    assert list(ours.state_dict()) == [k for k, _ in theirs.named_parameters()]
    _compare(ours, theirs, lambda src, tgt: ours(src, tgt), lambda src, tgt: theirs(src, tgt),
             {"src": _x(2, 5, 8), "tgt": _x(2, 3, 8, seed=2)},
             lambda d: dict(zip(("src", "tgt"), ours.backward(d))))


@pytest.mark.parametrize("make_ours, make_theirs", [
    (lambda: nn.Linear(5, 4, dtype=F64, seed=0),
     lambda: torch.nn.Linear(5, 4, dtype=torch.float64)),
    (lambda: nn.LayerNorm(5, dtype=F64), lambda: torch.nn.LayerNorm(5, dtype=torch.float64)),
    (lambda: nn.RMSNorm(5, eps=1e-6, dtype=F64),
     lambda: torch.nn.RMSNorm(5, eps=1e-6, dtype=torch.float64)),
], ids=["linear", "layer_norm", "rms_norm"])
def test_simple_layers(make_ours, make_theirs):
    ours, theirs = make_ours(), make_theirs()
    ours.weight.data[:] = _x(*ours.weight.shape, seed=4)
    _load_into_torch(ours, theirs)
    _compare(ours, theirs, lambda x: ours(x), lambda x: theirs(x), {"x": _x(2, 3, 5)},
             lambda d: {"x": ours.backward(d)})
