"""The fused attention operator on the CPU against the NumPy reference, finite differences and torch."""
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import reference
import seqattn
from attention_cases import (CASES, Case, check_backward, check_forward, check_weights,
                             finite_difference_check)
from cpu_tiny_tiles import tiny_tile_attention, tiny_tile_backward

pytestmark = pytest.mark.slow  # minutes in all: the file runs first (tests/conftest.py)

DTYPES = [np.float32, np.float64]


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.__name__)
@pytest.mark.parametrize("case", CASES, ids=str)
def test_forward_matches_reference(case, dtype):
    check_forward(seqattn.attention, case, dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.__name__)
@pytest.mark.parametrize("case", CASES, ids=str)
def test_backward_matches_reference(case, dtype):
    check_backward(seqattn.attention, seqattn.attention_backward, case, dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.__name__)
@pytest.mark.parametrize("case", CASES, ids=str)
def test_weights_match_reference(case, dtype):
    check_weights(seqattn.attention_weights, case, dtype)


@pytest.mark.parametrize("case", [c for c in CASES if c.small], ids=str)
def test_tiny_tiles_match_reference(case):
    check_forward(tiny_tile_attention, case, np.float32)
    check_backward(tiny_tile_attention, tiny_tile_backward, case, np.float32)


FD_CASES = [c for c in CASES if c.name in ("basic", "cross_shorter_keys_causal", "gqa_2_groups",
                                           "bias_per_head", "bias_key_only", "everything",
                                           "key_padding_lengths")]


@pytest.mark.parametrize("case", FD_CASES, ids=str)
def test_backward_matches_finite_differences(case):
    finite_difference_check(seqattn.attention, seqattn.attention_backward, case)


def test_empty_rows_give_zeros_and_zero_gradients():
    case = Case("all_keys_padded", B=1, key_padding="empty_row")
    q, k, v, opts = case.inputs(np.float32)
    out, lse = seqattn.attention(q, k, v, return_lse=True, **opts)
    assert np.all(out == 0), "a row with nothing to attend to must return zeros"
    assert np.all(np.isneginf(lse)), "its lse must be -inf"
    dq, dk, dv, _ = seqattn.attention_backward(np.ones_like(out), q, k, v, out, lse, **opts)
    for name, g in (("dq", dq), ("dk", dk), ("dv", dv)):
        assert np.all(g == 0), f"{name} must be zero when nothing is attended"


@pytest.mark.parametrize("masking", ["causal", "key_padding"])
def test_masked_keys_with_the_largest_scores_do_not_set_the_row_max(masking):
    """The forward takes each row's max from the product while the scores are in registers;
    where a mask hides keys, their scores must not count. Here the hidden keys score ~300
    above the visible ones, so a max taken over them would underflow every visible exp."""
    rng = np.random.default_rng(3)
    B, H, N, D = 1, 2, 40, 16
    q = np.abs(rng.standard_normal((B, H, N, D))).astype(np.float32)
    k = rng.standard_normal((B, H, N, D)).astype(np.float32)
    v = rng.standard_normal((B, H, N, D)).astype(np.float32)
    if masking == "causal":
        # each later key scores 300 more than key 0 for query 0, which sees key 0 alone
        q0 = q[:, :, :1]
        k[:, :, 1:] += 300.0 * np.sqrt(D) * q0 / (q0 ** 2).sum(-1, keepdims=True)
        opts = {"causal": True}
    else:
        hidden = np.arange(N) % 3 == 0
        k[:, :, hidden] = np.abs(k[:, :, hidden]) * 60.0
        opts = {"key_padding_mask": np.broadcast_to(hidden, (B, N)).copy()}
    out, lse = seqattn.attention(q, k, v, return_lse=True, **opts)
    want_out, want_lse = reference.attention_forward(q, k, v, **opts)
    np.testing.assert_allclose(out, want_out, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(lse, want_lse, rtol=1e-5)


def test_inputs_are_not_modified():
    q, k, v, opts = next(c for c in CASES if c.name == "everything").inputs(np.float32)
    before = [a.copy() for a in (q, k, v, opts["bias"])]
    out, lse = seqattn.attention(q, k, v, return_lse=True, **opts)
    seqattn.attention_backward(np.ones_like(out), q, k, v, out, lse, bias_requires_grad=True,
                               **opts)
    for a, b in zip((q, k, v, opts["bias"]), before):
        np.testing.assert_array_equal(a, b)


def test_non_contiguous_inputs_are_accepted():
    q, k, v, _ = Case("basic").inputs(np.float64)
    q_t = np.ascontiguousarray(q.transpose(0, 2, 1, 3)).transpose(0, 2, 1, 3)
    np.testing.assert_allclose(seqattn.attention(q_t, k, v), seqattn.attention(q, k, v))


@settings(max_examples=15, deadline=None)
@given(B=st.integers(1, 2), Hkv=st.integers(1, 2), groups=st.integers(1, 2),
       N=st.integers(1, 9), M=st.integers(1, 9), D=st.integers(1, 5), causal=st.booleans(),
       left=st.one_of(st.none(), st.integers(0, 4)), right=st.one_of(st.none(),
                                                                      st.integers(0, 4)))
def test_random_shapes_and_bands_match_reference(B, Hkv, groups, N, M, D, causal, left, right):
    case = Case("random", B=B, H=Hkv * groups, Hkv=Hkv, N=N, M=M, D=D, causal=causal,
                window=(left, right))
    check_forward(seqattn.attention, case, np.float64)
    check_backward(seqattn.attention, seqattn.attention_backward, case, np.float64)


def test_import_compiles_nothing():
    code = ("import sys, seqattn; "
            "assert 'seqattn.kernels.cpu.attention' not in sys.modules, 'kernels imported'")
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_backward_is_bit_identical_across_runs(causal):
    """Each thread sums into its own buffers, added in a fixed order: the same call gives the
    same bits every time (here on the parallel path, with several key chunks per head)."""
    rng = np.random.default_rng(3)
    q, k, v = (rng.standard_normal((1, 2, 1100, 64)).astype(np.float32) for _ in range(3))
    out, lse = seqattn.attention(q, k, v, causal=causal, return_lse=True)
    dout = rng.standard_normal(out.shape).astype(np.float32)
    first = seqattn.attention_backward(dout, q, k, v, out, lse, causal=causal)
    for _ in range(2):
        again = seqattn.attention_backward(dout, q, k, v, out, lse, causal=causal)
        for name, a, b in zip(("dq", "dk", "dv"), first[:3], again[:3]):
            np.testing.assert_array_equal(a, b, f"{name} changed between runs")
