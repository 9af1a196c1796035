"""The fused attention operator against torch's scaled_dot_product_attention (forward and autograd).

torch is an independent reference here: its own causal flag, GQA and boolean masks, not ours.
Skipped cleanly when torch is not installed.
"""
import numpy as np
import pytest

import seqattn

torch = pytest.importorskip("torch")
F = torch.nn.functional


def _inputs(B=2, H=4, Hkv=4, N=7, M=7, D=8, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s) for s in ((B, H, N, D), (B, Hkv, M, D), (B, Hkv, M, D),
                                             (B, H, N, D))]


def _torch_run(q, k, v, dout, bias=None, **kwargs):
    tq, tk, tv = (torch.tensor(a, requires_grad=True) for a in (q, k, v))
    tbias = None
    if bias is not None:
        tbias = torch.tensor(bias, requires_grad=True)
        kwargs["attn_mask"] = tbias
    out = F.scaled_dot_product_attention(tq, tk, tv, **kwargs)
    out.backward(torch.tensor(dout))
    grads = [t.grad.numpy() for t in (tq, tk, tv)]
    return out.detach().numpy(), grads, (tbias.grad.numpy() if tbias is not None else None)


def _compare(got_out, got_grads, want_out, want_grads):
    np.testing.assert_allclose(got_out, want_out, rtol=1e-9, atol=1e-10, err_msg="out")
    for name, g, w in zip(("dq", "dk", "dv"), got_grads, want_grads):
        np.testing.assert_allclose(g, w, rtol=1e-8, atol=1e-10, err_msg=name)


def _ours(q, k, v, dout, bias_requires_grad=False, **opts):
    out, lse = seqattn.attention(q, k, v, return_lse=True, **opts)
    dq, dk, dv, dbias = seqattn.attention_backward(dout, q, k, v, out, lse,
                                                   bias_requires_grad=bias_requires_grad, **opts)
    return out, (dq, dk, dv), dbias


def test_plain_attention_matches_torch():
    q, k, v, dout = _inputs(N=5, M=9)
    out, grads, _ = _ours(q, k, v, dout)
    want_out, want_grads, _ = _torch_run(q, k, v, dout)
    _compare(out, grads, want_out, want_grads)


def test_causal_matches_torch_is_causal():
    q, k, v, dout = _inputs()
    out, grads, _ = _ours(q, k, v, dout, causal=True)
    want_out, want_grads, _ = _torch_run(q, k, v, dout, is_causal=True)
    _compare(out, grads, want_out, want_grads)


def test_grouped_query_attention_matches_torch_enable_gqa():
    q, k, v, dout = _inputs(H=4, Hkv=2, N=6, M=5)
    out, grads, _ = _ours(q, k, v, dout, scale=0.7)
    want_out, want_grads, _ = _torch_run(q, k, v, dout, enable_gqa=True, scale=0.7)
    _compare(out, grads, want_out, want_grads)


def test_boolean_mask_and_padding_match_torch():
    q, k, v, dout = _inputs(N=6, M=6)
    rng = np.random.default_rng(3)
    mask = rng.random((6, 6)) < 0.6
    padding = np.zeros((2, 6), bool)
    padding[1, :2] = True
    # Every row keeps an unpadded key in view: torch returns NaN for rows that see nothing.
    for i in range(6):
        mask[i, 2 + i % 4] = True
    mask_for_torch = mask[None, None] & ~padding[:, None, None, :]
    out, grads, _ = _ours(q, k, v, dout, attn_mask=mask, key_padding_mask=padding)
    want_out, want_grads, _ = _torch_run(q, k, v, dout, attn_mask=torch.tensor(mask_for_torch))
    _compare(out, grads, want_out, want_grads)


def test_learnable_bias_gradient_matches_torch():
    q, k, v, dout = _inputs(N=5, M=6)
    bias = np.random.default_rng(4).standard_normal((1, 4, 5, 6))
    out, grads, dbias = _ours(q, k, v, dout, bias=bias, bias_requires_grad=True)
    want_out, want_grads, want_dbias = _torch_run(q, k, v, dout, bias=bias)
    _compare(out, grads, want_out, want_grads)
    np.testing.assert_allclose(dbias, want_dbias, rtol=1e-8, atol=1e-10, err_msg="dbias")


def test_float32_matches_torch_float32():
    q, k, v, dout = (a.astype(np.float32) for a in _inputs(B=1, H=2, Hkv=2, N=700, M=900, D=32))
    out, grads, _ = _ours(q, k, v, dout)
    want_out, want_grads, _ = _torch_run(q, k, v, dout)
    np.testing.assert_allclose(out, want_out, rtol=1e-4, atol=1e-5, err_msg="out")
    for name, g, w in zip(("dq", "dk", "dv"), grads, want_grads):
        np.testing.assert_allclose(g, w, rtol=1e-3, atol=1e-5, err_msg=name)
