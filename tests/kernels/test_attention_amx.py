"""The CPU attention on AMX tiles (bf16x3 products): the forward (kernels/cpu/attention.py's
``_forward_query_block_on_tiles``) and the backward's products (``_backward_key_chunk``)
against the float64 reference, at every score modification, at small blocks, and against the
register kernels that CPUs without AMX run."""
from dataclasses import replace

import numpy as np
import pytest

import reference
import seqattn
from attention_cases import CASES, Case, backward_inputs, check_backward, check_forward
from structured_bias_cases import STRUCTURED_CASES, check_structured
from seqattn.kernels.cpu import attention, workspace
from seqattn.kernels.cpu.gemm.amx_tiles import AMX_BF16
from seqattn.ops.attention_inputs import prepare_attention, shapes_of

needs_amx = pytest.mark.skipif(not AMX_BF16, reason="the CPU (or the OS) offers no AMX tiles")

# The shared cases at a head dim that goes to the tiles at any length, and larger ones that
# cross key blocks (512), query blocks and strips (32 rows), with every modification at once.
TILE_CASES = [replace(c, D=128) for c in CASES] + [
    Case("tiles_causal_cross", B=1, H=4, Hkv=2, N=150, M=2100, D=64, causal=True,
         key_padding="some", bias_shape=(1, 4, 150, 2100), alibi=True, small=False),
    Case("tiles_window", B=2, H=2, Hkv=1, N=300, M=300, D=128, window=(70, 5),
         mask_shape=(2, 1, 300, 300), small=False),
    Case("tiles_long_keys", B=1, H=1, Hkv=1, N=40, M=2200, D=96, key_padding="some",
         scale=0.05, small=False),
]
# The forward's cases add the encoder's head dim, which goes to the tiles from 512 keys (the
# backward keeps D 32 in registers).
FORWARD_TILE_CASES = TILE_CASES + [
    Case("tiles_head_dim_32", B=2, H=4, Hkv=2, N=90, M=700, D=32, causal=True,
         key_padding="some", small=False),
]


def _forward(case, block_q=None, block_k=None):
    q, k, v, opts = case.inputs(np.float32)
    call = prepare_attention(q, k, v, **opts)
    B, H, Hkv, N, M, D = shapes_of(call)
    out, lse = np.empty((B, H, N, D), np.float32), np.empty((B, H, N), np.float32)
    attention.attention_forward(out, lse, call, block_q, block_k)
    return out, lse


def _small_blocks(block_q, block_k):
    def attention_fn(q, k, v, return_lse=False, **opts):
        call = prepare_attention(q, k, v, **opts)
        assert attention.on_tiles(call, block_k)
        B, H, Hkv, N, M, D = shapes_of(call)
        out, lse = np.empty((B, H, N, D), np.float32), np.empty((B, H, N), np.float32)
        attention.attention_forward(out, lse, call, block_q, block_k)
        return (out, lse) if return_lse else out
    return attention_fn


def test_only_float32_with_whole_tiles_and_enough_work_goes_to_the_tiles(monkeypatch):
    monkeypatch.setattr(attention, "FORWARD_ON_TILES", True)
    x = np.zeros((1, 1, 4, 128), np.float32)
    assert attention.on_tiles(prepare_attention(x, x, x))
    assert not attention.on_tiles(prepare_attention(x, x, x), block_k=48)
    assert not attention.on_tiles(prepare_attention(*(x.astype(np.float64),) * 3))
    odd = np.zeros((1, 1, 4, 136), np.float32)
    assert not attention.on_tiles(prepare_attention(odd, odd, odd))
    # D 64 and 32 only with many keys (with fewer the register kernel was faster)
    fewest = attention.TILES_MIN_KEYS
    for D in (64, 32):
        q, k = np.zeros((1, 1, 4, D), np.float32), np.zeros((1, 1, fewest, D), np.float32)
        assert attention.on_tiles(prepare_attention(q, k, k))
        assert not attention.on_tiles(prepare_attention(q, k[:, :, :fewest - 1],
                                                        k[:, :, :fewest - 1]))
    monkeypatch.setattr(attention, "FORWARD_ON_TILES", False)
    assert not attention.on_tiles(prepare_attention(x, x, x))


@needs_amx
@pytest.mark.parametrize("case", FORWARD_TILE_CASES, ids=str)
def test_forward_on_tiles_matches_reference(case):
    q, k, v, opts = case.inputs(np.float32)
    assert attention.on_tiles(prepare_attention(q, k, v, **opts))
    check_forward(seqattn.attention, case, np.float32)


@needs_amx
@pytest.mark.parametrize("case", [c for c in FORWARD_TILE_CASES if not c.small], ids=str)
def test_forward_on_tiles_at_small_blocks_matches_reference(case):
    check_forward(_small_blocks(33, 64), case, np.float32)


@needs_amx
@pytest.mark.parametrize("case", [c for c in STRUCTURED_CASES if c.small], ids=str)
def test_structured_biases_on_tiles_match_reference(case):
    check_structured(seqattn.attention, seqattn.attention_backward,
                     replace(case, base=replace(case.base, D=128)), np.float32)


@pytest.mark.parametrize("case", [c for c in FORWARD_TILE_CASES if not c.small], ids=str)
def test_register_forward_at_whole_tiles_matches_reference(case, monkeypatch):
    """The path of CPUs without AMX, at the head dims that AMX CPUs send to the tiles."""
    monkeypatch.setattr(attention, "FORWARD_ON_TILES", False)
    check_forward(seqattn.attention, case, np.float32)


@needs_amx
@pytest.mark.parametrize("case", [c for c in FORWARD_TILE_CASES if not c.small], ids=str)
def test_forward_on_tiles_bits_do_not_depend_on_the_query_block(case):
    """The launcher halves query blocks when there are few tasks for the threads: a row's
    result must not depend on which block it fell in."""
    out, lse = _forward(case, 1024)
    for block_q in (32, 64, 256):
        other_out, other_lse = _forward(case, block_q)
        assert np.array_equal(out, other_out) and np.array_equal(lse, other_lse), block_q


@needs_amx
@pytest.mark.parametrize("case", [c for c in FORWARD_TILE_CASES if not c.small], ids=str)
def test_forward_on_tiles_is_as_accurate_as_the_float32_register_forward(case, monkeypatch):
    """bf16x3 must keep float32 accuracy: the reference tolerances alone would let a product
    that dropped its smallest terms (16 bits of significand) pass."""
    q, k, v, opts = case.inputs(np.float32)
    want, _ = reference.attention_forward(q, k, v, **opts)
    tiles_error = np.abs(seqattn.attention(q, k, v, **opts) - want).max()
    monkeypatch.setattr(attention, "FORWARD_ON_TILES", False)
    register_error = np.abs(seqattn.attention(q, k, v, **opts) - want).max()
    assert tiles_error <= 1.5 * register_error


@pytest.fixture
def backward_at_any_size(monkeypatch):
    """The backward on the tiles at every size and head dim of whole tiles: the rule that
    keeps small problems in registers is a matter of speed, and the cases are small."""
    monkeypatch.setattr(attention, "BACKWARD_ON_TILES", True)
    monkeypatch.setattr(attention, "BACKWARD_TILES_FROM", ((0, 0),))


def _backward(block_q=attention.BLOCK_Q, block_k=attention.BLOCK_K):
    """attention_backward with these blocks, its dq, dk and dv from the tiles (dbias, a pass
    of its own, from the public function)."""
    def backward_fn(dout, q, k, v, out, lse, bias_requires_grad=False, **opts):
        call = prepare_attention(q, k, v, **opts)
        assert attention.backward_on_tiles(call, block_k)
        dq, dk, dv = np.empty_like(q), np.empty_like(k), np.empty_like(v)
        structured = attention.StructuredGrads(None, None, None, None)
        attention.attention_backward(dq, dk, dv, structured, dout, out, lse, call, block_q,
                                     block_k)
        dbias = seqattn.attention_backward(dout, q, k, v, out, lse, bias_requires_grad=True,
                                           **opts)[3] if bias_requires_grad else None
        return dq, dk, dv, dbias
    return backward_fn


def test_the_backward_goes_to_the_tiles_from_its_head_dims_fewest_keys(monkeypatch):
    monkeypatch.setattr(attention, "BACKWARD_ON_TILES", True)

    def on_tiles(D, M, dtype=np.float32, block_k=attention.BLOCK_K):
        q, k = np.zeros((1, 1, 4, D), dtype), np.zeros((1, 1, M, D), dtype)
        return attention.backward_on_tiles(prepare_attention(q, k, k), block_k)

    for head_dim, fewest in attention.BACKWARD_TILES_FROM:
        assert on_tiles(head_dim, fewest)
        assert on_tiles(head_dim + 32, fewest)
        assert not on_tiles(head_dim, fewest - 1)
        assert not on_tiles(head_dim, fewest, block_k=48)
        assert not on_tiles(head_dim, fewest, np.float64)
    smallest = min(head_dim for head_dim, _ in attention.BACKWARD_TILES_FROM)
    assert not on_tiles(smallest - 32, 1 << 16)
    monkeypatch.setattr(attention, "BACKWARD_ON_TILES", False)
    assert not on_tiles(128, 1 << 16)


@needs_amx
@pytest.mark.parametrize("case", TILE_CASES, ids=str)
def test_backward_on_tiles_matches_reference(case, backward_at_any_size):
    check_backward(seqattn.attention, _backward(), case, np.float32)


@needs_amx
@pytest.mark.parametrize("case", [c for c in TILE_CASES if not c.small], ids=str)
def test_backward_on_tiles_at_small_blocks_matches_reference(case, backward_at_any_size):
    check_backward(seqattn.attention, _backward(block_q=33, block_k=64), case, np.float32)


@needs_amx
@pytest.mark.parametrize("case", [c for c in STRUCTURED_CASES if c.small], ids=str)
def test_structured_bias_gradients_on_tiles_match_reference(case, backward_at_any_size):
    check_structured(seqattn.attention, seqattn.attention_backward,
                     replace(case, base=replace(case.base, D=128)), np.float32)


@needs_amx
@pytest.mark.parametrize("case", [c for c in TILE_CASES if not c.small], ids=str)
def test_backward_on_tiles_is_as_accurate_as_the_float32_register_backward(
        case, backward_at_any_size, monkeypatch):
    dout, q, k, v, opts = backward_inputs(case, np.float32)
    out, lse = seqattn.attention(q, k, v, return_lse=True, **opts)
    want = reference.attention_backward(dout, q, k, v, **opts)[:3]

    def errors():
        got = seqattn.attention_backward(dout, q, k, v, out, lse, **opts)[:3]
        return [np.abs(g - w).max() for g, w in zip(got, want)]

    tiles_errors = errors()
    monkeypatch.setattr(attention, "BACKWARD_ON_TILES", False)
    for name, tiles_error, register_error in zip(("dq", "dk", "dv"), tiles_errors, errors()):
        assert tiles_error <= 1.5 * register_error, name


@needs_amx
def test_scratch_reuse_across_sizes_gives_the_results_of_fresh_memory(backward_at_any_size):
    """A call that reuses a larger call's scratch buffers must rewrite every padding row and
    tile it reads (the forward and the backward share the operands' buffers)."""
    large = next(c for c in TILE_CASES if c.name == "tiles_window")
    small = next(c for c in TILE_CASES if c.name == "tiles_long_keys")

    def run(case):
        dout, q, k, v, opts = backward_inputs(case, np.float32)
        out, lse = seqattn.attention(q, k, v, return_lse=True, **opts)
        return (out, lse) + tuple(seqattn.attention_backward(dout, q, k, v, out, lse,
                                                             **opts)[:3])

    workspace.release_scratch()
    fresh_small = run(small)
    workspace.release_scratch()
    run(large)
    assert workspace.held_bytes() > 0
    for got, want in zip(run(small), fresh_small):
        assert np.array_equal(got, want)
