"""Self-attention straight from a packed projection (ops.packed_attention) against the path it
replaces, ``merge_heads(attention(*split_heads(qkv, H, parts=3)))`` and its backward: the same
bits on the CPU's short-sequence kernels (which read the heads where they lie), on the tiled
kernel beyond their lengths and on the GPU (the CUDA simulator), where the op splits the heads
itself; and against the NumPy reference, with every option and the structured biases."""
import numpy as np
import pytest

from attention_cases import Case, check_backward, check_forward
from seqattn import ops
from seqattn.kernels.cpu.attention_small import MAX_LENGTH
from seqattn.ops.attention import AttentionGradients
from seqattn.ops.packed_attention import prepare_packed_attention
from structured_bias_cases import BASE, STRUCTURED_CASES, backward_inputs, check_structured

pytestmark = pytest.mark.slow  # minutes in all: the file runs first (tests/conftest.py)

DTYPES = [np.float32, np.float64]
# Self-attention (M = N, Hkv = H): every option of attention, key padding with a fully padded
# batch and with padded tails, a dense bias of each broadcast shape
CASES = [
    Case("basic"),
    Case("single_token", B=1, N=1, M=1, D=3),
    Case("one_head", H=1, Hkv=1, N=6, M=6),
    Case("causal", N=6, M=6, causal=True),
    Case("key_padding_empty_row", key_padding="empty_row"),
    Case("key_padding_lengths", B=3, H=3, Hkv=3, key_padding="lengths", N=7, M=7),
    Case("mask_per_batch", mask_shape=(2, 1, 5, 5)),
    Case("bias_full", bias_shape=(2, 2, 5, 5)),
    Case("bias_key_only", bias_shape=(2, 1, 1, 5)),
    Case("alibi", alibi=True, N=6, M=6),
    Case("window", window=(2, 1), N=6, M=6),
    Case("custom_scale", scale=0.3),
    Case("everything", H=4, Hkv=4, N=6, M=6, D=3, causal=True, key_padding="some",
         mask_shape=(1, 4, 6, 6), bias_shape=(4, 6, 6), alibi=True, window=(3, None)),
]
# beyond the short-sequence kernels' lengths: the tiled kernel, on split heads
LONG = Case("long", B=2, H=2, Hkv=2, N=MAX_LENGTH + 2, M=MAX_LENGTH + 2, D=4,
            key_padding="lengths", causal=True, small=False)
SELF_STRUCTURED = [c for c in STRUCTURED_CASES
                   if c.base.N == c.base.M and c.base.H == c.base.Hkv and c.small]


def _packed(q, k, v):
    """The packed projection (B, N, 3 * H * D) whose heads are q, k and v."""
    return ops.merge_heads(q, k, v)


def packed_as_attention(q, k, v, return_lse=False, **opts):
    """ops.packed_attention in the form of ops.attention (heads in, heads out)."""
    H = q.shape[1]
    out, lse = ops.packed_attention(_packed(q, k, v), H, return_lse=True, **opts)
    return (ops.split_heads(out, H), lse) if return_lse else ops.split_heads(out, H)


def packed_as_attention_backward(dout, q, k, v, out, lse, bias_requires_grad=False, **opts):
    """ops.packed_attention_backward in the form of ops.attention_backward."""
    H = q.shape[1]
    grads = ops.packed_attention_backward(ops.merge_heads(dout), _packed(q, k, v), H,
                                          ops.merge_heads(out), lse,
                                          bias_requires_grad=bias_requires_grad, **opts)
    dq, dk, dv = ops.split_heads(grads.dqkv, H, parts=3)
    return AttentionGradients(dq, dk, dv, grads.dbias, grads.distance_bias, grads.pair_bias)


def _both_paths(dout, q, k, v, opts, run=lambda f, *a, **o: f(*a, **o)):
    """(packed, split) results: (out (B, N, H * D), lse, the gradients by name) of the packed
    op and of the split path, each through ``run`` (the device)."""
    H = q.shape[1]
    qkv, tokens_dout = _packed(q, k, v), ops.merge_heads(dout)
    wants_bias = "bias" in opts

    def packed():
        out, lse = run(ops.packed_attention, qkv, H, return_lse=True, **opts)
        grads = run(ops.packed_attention_backward, tokens_dout, qkv, H, out, lse,
                    bias_requires_grad=wants_bias, **opts)
        return out, lse, grads

    def split():
        heads = ops.split_heads(qkv, H, parts=3)
        out, lse = run(ops.attention, *heads, return_lse=True, **opts)
        grads = run(ops.attention_backward, ops.split_heads(tokens_dout, H), *heads, out, lse,
                    bias_requires_grad=wants_bias, **opts)
        return ops.merge_heads(out), lse, grads

    return packed(), split()


def _named(grads, packed):
    named = {"dqkv": grads.dqkv if packed else ops.merge_heads(*grads[:3]), "dbias": grads.dbias}
    distance, pair = grads.distance_bias, grads.pair_bias
    if distance is not None:
        named.update({"distance.table": distance.table, "distance.x": distance.x})
    if pair is not None:
        named["pair.table"] = pair.table
    return named


def _assert_same_bits(packed, split):
    (out, lse, grads), (want_out, want_lse, want_grads) = packed, split
    np.testing.assert_array_equal(out, want_out, "out")
    np.testing.assert_array_equal(lse, want_lse, "lse")
    got, want = _named(grads, True), _named(want_grads, False)
    assert sorted(got) == sorted(want)
    for name in want:
        assert (got[name] is None) == (want[name] is None), name
        if want[name] is not None:
            np.testing.assert_array_equal(got[name], want[name], name)


def _backward_inputs(case, dtype):
    q, k, v, opts = case.inputs(dtype)
    dout = np.random.default_rng(1).standard_normal(q.shape).astype(dtype)
    return dout, q, k, v, opts


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.__name__)
@pytest.mark.parametrize("case", CASES + [LONG], ids=str)
def test_the_same_bits_as_splitting_and_merging_the_heads(case, dtype):
    dout, q, k, v, opts = _backward_inputs(case, dtype)
    _assert_same_bits(*_both_paths(dout, q, k, v, opts))


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.__name__)
@pytest.mark.parametrize("case", SELF_STRUCTURED, ids=str)
def test_the_same_bits_with_structured_biases(case, dtype):
    dout, q, k, v, opts = backward_inputs(case, dtype)
    _assert_same_bits(*_both_paths(dout, q, k, v, opts))


@pytest.mark.parametrize("case", CASES, ids=str)
def test_matches_the_reference(case):
    check_forward(packed_as_attention, case, np.float32)
    check_backward(packed_as_attention, packed_as_attention_backward, case, np.float32)


@pytest.mark.parametrize("case", SELF_STRUCTURED, ids=str)
def test_matches_the_reference_with_structured_biases(case):
    check_structured(packed_as_attention, packed_as_attention_backward, case, np.float32)


def test_short_sequences_read_the_heads_in_place_and_long_ones_split_them():
    qkv = np.zeros((2, 5, 3 * 2 * 4), np.float32)
    short = prepare_packed_attention(qkv, 2)
    assert short.views and all(np.shares_memory(x, qkv)
                               for x in (short.call.q, short.call.k, short.call.v))
    long = prepare_packed_attention(np.zeros((1, MAX_LENGTH + 1, 6), np.float32), 1)
    assert not long.views and long.call.q.flags.c_contiguous


def test_inputs_are_not_modified():
    dout, q, k, v, opts = _backward_inputs(CASES[-1], np.float32)
    qkv, tokens_dout = _packed(q, k, v), ops.merge_heads(dout)
    kept = qkv.copy(), tokens_dout.copy()
    out, lse = ops.packed_attention(qkv, 4, return_lse=True, **opts)
    ops.packed_attention_backward(tokens_dout, qkv, 4, out, lse, bias_requires_grad=True, **opts)
    np.testing.assert_array_equal(qkv, kept[0])
    np.testing.assert_array_equal(tokens_dout, kept[1])


@pytest.mark.parametrize("qkv_shape, heads, match", [
    ((2, 5, 24), 3, r"qkv has shape \(2, 5, 24\); expected \(B, N, 3 \* H \* D\).*9"),
    ((2, 5, 25), 1, r"qkv has shape \(2, 5, 25\)"),
    ((10, 24), 2, r"qkv has shape \(10, 24\)"),
    ((2, 5, 0), 2, r"qkv has shape \(2, 5, 0\)"),
    ((2, 5, 24), 0, "num_heads must be a positive integer"),
])
def test_bad_shapes_name_the_argument(qkv_shape, heads, match):
    with pytest.raises(ValueError, match=match):
        ops.packed_attention(np.zeros(qkv_shape, np.float32), heads)


def test_a_bad_dout_or_out_names_the_argument():
    qkv = np.zeros((2, 5, 24), np.float32)
    out, lse = ops.packed_attention(qkv, 2, return_lse=True)
    with pytest.raises(ValueError, match=r"dout has shape \(2, 5, 4\); expected \(B, N, H \* D\)"):
        ops.packed_attention_backward(out[..., :4], qkv, 2, out, lse)
    with pytest.raises(ValueError, match=r"out has shape \(2, 4, 8\)"):
        ops.packed_attention_backward(out, qkv, 2, out[:, :4], lse)
    with pytest.raises(ValueError, match="no bias was passed"):
        ops.packed_attention_backward(out, qkv, 2, out, lse, bias_requires_grad=True)


def test_on_the_gpu_the_same_bits_as_splitting_and_merging_the_heads():
    """No kernel of its own on the GPU: the op splits, attends and merges there (simulator)."""
    cuda = pytest.importorskip("numba.cuda")
    if not cuda.is_available():
        pytest.skip("numba.cuda has no GPU and the simulator is off (NUMBA_ENABLE_CUDASIM=1)")

    def on_device(op, *args, **options):
        def move(x):
            return cuda.to_device(x) if isinstance(x, np.ndarray) else x

        return op(*(move(a) for a in args), **{n: move(x) for n, x in options.items()})

    case = Case("gpu", B=2, H=2, Hkv=2, N=4, M=4, D=3, causal=True, key_padding="some",
                bias_shape=(1, 2, 4, 4))
    dout, q, k, v, opts = _backward_inputs(case, np.float32)
    packed, split = _both_paths(dout, q, k, v, opts, run=on_device)
    _assert_same_bits(_on_host(packed), _on_host(split))


def _on_host(result):
    """(out, lse, gradients) of a device run, copied to the host."""
    out, lse, grads = result

    def host(x):
        return None if x is None else x.copy_to_host()

    if hasattr(grads, "dqkv"):
        grads = type(grads)(host(grads.dqkv), host(grads.dbias))
    else:
        grads = AttentionGradients(*(host(g) for g in grads))
    return host(out), host(lse), grads
