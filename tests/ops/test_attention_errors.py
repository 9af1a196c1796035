"""Bad input to the attention operator gets a clear error naming the argument."""
import numpy as np
import pytest

import seqattn


def arrays(B=2, H=4, Hkv=2, N=5, M=6, D=8, dtype=np.float32):
    rng = np.random.default_rng(0)
    return (rng.standard_normal((B, H, N, D)).astype(dtype),
            rng.standard_normal((B, Hkv, M, D)).astype(dtype),
            rng.standard_normal((B, Hkv, M, D)).astype(dtype))


def test_head_dim_mismatch_names_k():
    q, k, v = arrays()
    with pytest.raises(ValueError, match=r"k has head dim 4.*\(B, Hkv, M, 8\)"):
        seqattn.attention(q, k[..., :4], v)


def test_heads_not_a_multiple():
    q, k, v = arrays(H=3, Hkv=2)
    with pytest.raises(ValueError, match="H must be a multiple of Hkv"):
        seqattn.attention(q, k, v)


def test_batch_mismatch():
    q, k, v = arrays()
    with pytest.raises(ValueError, match="batch size"):
        seqattn.attention(q, k[:1], v[:1])


def test_v_shape_mismatch():
    q, k, v = arrays()
    with pytest.raises(ValueError, match="v has shape"):
        seqattn.attention(q, k, v[:, :, :3])


def test_wrong_rank():
    q, k, v = arrays()
    with pytest.raises(ValueError, match=r"q has shape .* expected 4 dims"):
        seqattn.attention(q[0], k, v)


def test_mixed_dtypes():
    q, k, v = arrays()
    with pytest.raises(TypeError, match="k has dtype float64 but q has dtype float32"):
        seqattn.attention(q, k.astype(np.float64), v)


def test_integer_arrays():
    q, k, v = arrays()
    with pytest.raises(TypeError, match="q has dtype int64; expected float32 or float64"):
        seqattn.attention(q.astype(np.int64), k, v)


def test_key_padding_mask_shape_and_dtype():
    q, k, v = arrays()
    with pytest.raises(ValueError, match=r"key_padding_mask has shape \(2, 5\); expected \(B, M\)"):
        seqattn.attention(q, k, v, key_padding_mask=np.zeros((2, 5), bool))
    with pytest.raises(TypeError, match="key_padding_mask has dtype float32; expected bool"):
        seqattn.attention(q, k, v, key_padding_mask=np.zeros((2, 6), np.float32))


def test_float_attn_mask_points_to_bias():
    q, k, v = arrays()
    with pytest.raises(TypeError, match="attn_mask .* expected bool.*bias="):
        seqattn.attention(q, k, v, attn_mask=np.zeros((5, 6), np.float32))


def test_bias_that_does_not_broadcast():
    q, k, v = arrays()
    with pytest.raises(ValueError, match=r"bias has shape \(3, 6\), which does not broadcast"):
        seqattn.attention(q, k, v, bias=np.zeros((3, 6), np.float32))


def test_alibi_slopes_shape():
    q, k, v = arrays()
    with pytest.raises(ValueError, match=r"alibi_slopes has shape \(2,\); expected \(H,\)"):
        seqattn.attention(q, k, v, alibi_slopes=np.ones(2, np.float32))


@pytest.mark.parametrize("window, error", [((-1, 2), ValueError), ((1,), ValueError),
                                           ((1.5, 2), TypeError)])
def test_bad_window(window, error):
    q, k, v = arrays()
    with pytest.raises(error, match="window"):
        seqattn.attention(q, k, v, window=window)


def test_backward_checks_saved_tensors():
    q, k, v = arrays()
    out, lse = seqattn.attention(q, k, v, return_lse=True)
    with pytest.raises(ValueError, match="lse has shape"):
        seqattn.attention_backward(out, q, k, v, out, lse[:, :1])
    with pytest.raises(ValueError, match="bias_requires_grad=True but no bias"):
        seqattn.attention_backward(out, q, k, v, out, lse, bias_requires_grad=True)
