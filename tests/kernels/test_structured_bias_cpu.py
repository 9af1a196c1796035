"""Structured attention biases on the CPU: equal to the same bias built densely, finite
differences for the table and position gradients, edge cases, errors and memory."""
import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import seqattn
from seqattn.kernels.cpu import attention_small
from seqattn.ops import DistanceBias, PairBias

import reference
from attention_cases import Case, assert_close
from cpu_tiny_tiles import tiny_tile_attention, tiny_tile_backward
from structured_bias_cases import (FD_CASES, STRUCTURED_CASES, StructuredCase,
                                   backward_inputs, check_pair_at_the_cutoff, check_structured,
                                   check_structured_finite_differences, dense_options)

pytestmark = pytest.mark.slow  # minutes in all: the file runs first (tests/conftest.py)

DTYPES = [np.float32, np.float64]


@pytest.fixture(params=["short", "tiled"])
def cpu_path(request, monkeypatch):
    """Each of the op's CPU kernels: the short-sequence one, which takes these cases' lengths,
    and the tiled one (the short kernel's limit set to 0)."""
    if request.param == "tiled":
        monkeypatch.setattr(attention_small, "MAX_LENGTH", 0)
    return request.param


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.__name__)
@pytest.mark.parametrize("case", STRUCTURED_CASES, ids=str)
def test_structured_equals_dense(case, dtype, cpu_path):
    check_structured(seqattn.attention, seqattn.attention_backward, case, dtype)


@pytest.mark.parametrize("case", [c for c in STRUCTURED_CASES if c.small], ids=str)
def test_tiny_tiles_equal_dense(case):
    check_structured(tiny_tile_attention, tiny_tile_backward, case, np.float32)


@pytest.mark.parametrize("case", FD_CASES, ids=str)
def test_gradients_match_finite_differences(case, cpu_path):
    check_structured_finite_differences(seqattn.attention, seqattn.attention_backward, case)


@pytest.mark.parametrize("case", [c for c in STRUCTURED_CASES if c.name in (
    "distance_with_masks_causal", "pair_relative", "distance_and_pair")], ids=str)
def test_weights_equal_dense(case):
    q, k, _, opts = case.inputs(np.float32)
    got = seqattn.attention_weights(q, k, **opts)
    dense, _, _ = dense_options(q, k, opts, np.float64)
    want = reference.attention_weights(q, k, **dense)
    naive = reference.attention_weights(q, k, dtype=np.float32,
                                        **dense_options(q, k, opts, np.float32)[0])
    assert_close("weights", got, want, naive, np.float32)


def test_cutoff_hiding_every_key_gives_zeros_not_nan(cpu_path):
    case = StructuredCase("far", Case("far", B=1, N=4, M=4), distance=True, cutoff=1.0)
    q, k, v, opts = case.inputs(np.float64)
    spread = DistanceBias(np.arange(12.0).reshape(1, 4, 3) * 10, opts["distance_bias"].table,
                          2.0, cutoff=1.0)
    # Each token sees only itself (d = 0): hide even that with a key padding mask on row 0's key.
    opts = {"distance_bias": spread, "key_padding_mask": np.array([[True, False, False, False]])}
    out, lse = seqattn.attention(q, k, v, return_lse=True, **opts)
    assert np.all(out[0, :, 0] == 0) and np.all(np.isneginf(lse[0, :, 0])), "row 0 sees nothing"
    grads = seqattn.attention_backward(np.ones_like(out), q, k, v, out, lse, **opts)
    for name, g in (("dq", grads.dq), ("table", grads.distance_bias.table),
                    ("x", grads.distance_bias.x)):
        assert np.isfinite(g).all(), f"d{name} must be finite"
    assert np.all(grads.dq[0, :, 0] == 0), "a row that sees nothing has no query gradient"


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.__name__)
def test_a_pair_exactly_at_the_smooth_cutoff_weighs_nothing_and_stays_finite(dtype, cpu_path):
    check_pair_at_the_cutoff(seqattn.attention, seqattn.attention_backward, dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.__name__)
def test_nan_position_hides_the_pair_like_a_mask(dtype, cpu_path):
    case = StructuredCase("nan", Case("nan", B=1, N=5, M=5), distance=True)
    dout, q, k, v, opts = backward_inputs(case, dtype)
    x = opts["distance_bias"].x.copy()
    x[0, 2, 1] = np.nan  # token 2 has no position: it sees nothing and nobody sees it
    with_nan = DistanceBias(x, opts["distance_bias"].table, opts["distance_bias"].r_max)
    padded = np.zeros((1, 5), bool)
    padded[0, 2] = True
    mask = ~padded[:, None, None, :] & ~padded[:, None, :, None]
    masked = {"attn_mask": mask, "distance_bias": DistanceBias(np.nan_to_num(x), with_nan.table,
                                                               with_nan.r_max)}
    atol = 1e-12 if dtype == np.float64 else 1e-5
    got, want = ({"out": o, "lse": l} for o, l in (
        seqattn.attention(q, k, v, return_lse=True, distance_bias=with_nan),
        seqattn.attention(q, k, v, return_lse=True, **masked)))
    np.testing.assert_allclose(got["out"], want["out"], atol=atol)
    assert np.all(got["out"][0, :, 2] == 0)
    # the gradients too: a NaN position must not leak into the other tokens' (0 * NaN)
    grads = seqattn.attention_backward(dout, q, k, v, got["out"], got["lse"],
                                       distance_bias=with_nan)
    wanted = seqattn.attention_backward(dout, q, k, v, want["out"], want["lse"], **masked)
    for name, a, b in (("dq", grads.dq, wanted.dq), ("dk", grads.dk, wanted.dk),
                       ("table", grads.distance_bias.table, wanted.distance_bias.table),
                       ("x", grads.distance_bias.x, wanted.distance_bias.x)):
        np.testing.assert_allclose(a, b, atol=atol, err_msg=f"d{name}")


def test_inputs_are_not_modified():
    case = next(c for c in STRUCTURED_CASES if c.name == "distance_and_pair")
    dout, q, k, v, opts = (np.ones((2, 2, 7, 4)), *case.inputs(np.float64))
    distance, pair = opts["distance_bias"], opts["pair_bias"]
    before = [np.copy(a) for a in (distance.x, distance.table, distance.types, pair.table)]
    out, lse = seqattn.attention(q, k, v, return_lse=True, **opts)
    seqattn.attention_backward(dout, q, k, v, out, lse, **opts)
    for a, b in zip((distance.x, distance.table, distance.types, pair.table), before):
        np.testing.assert_array_equal(a, b)


def test_relative_form_equals_explicit_codes():
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((1, 2, 6, 4)) for _ in range(3))
    table = rng.standard_normal((2, 5))
    offsets = np.arange(6)[None, :] - np.arange(6)[:, None]
    codes = (np.clip(offsets, -2, 2) + 2).astype(np.int8)
    np.testing.assert_allclose(seqattn.attention(q, k, v, pair_bias=PairBias.relative(table)),
                               seqattn.attention(q, k, v, pair_bias=PairBias(table, codes)),
                               atol=1e-13)


@pytest.mark.parametrize("make, match", [
    (lambda x, t: DistanceBias(x, t[:, :1], 2.0), "C >= 2"),
    (lambda x, t: DistanceBias(x[:, :, :2], t, 2.0), r"x has shape .*expected \(B, N, 3\)"),
    (lambda x, t: DistanceBias(x, t, -1.0), "r_max must be a positive"),
    (lambda x, t: DistanceBias(x, t, 2.0, smooth_cutoff=True), "needs a cutoff"),
    (lambda x, t: DistanceBias(x, t, 2.0, types=np.zeros((1, 4), int)), r"\(T, T, H, C\)"),
    (lambda x, t: DistanceBias(x, t, 2.0, cell=np.zeros((3, 3))), "non-zero volume"),
    (lambda x, t: DistanceBias(x, t.astype(np.float32), 2.0), "cast it to q's dtype"),
    (lambda x, t: PairBias(t, np.zeros((4, 4), np.int64)), "expected int8, int16 or int32"),
    (lambda x, t: PairBias(t, np.full((4, 4), 9, np.int8)), "codes must be < C"),
    (lambda x, t: PairBias(t, np.zeros((3, 4), np.int8)), r"expected \(B, N, M\)"),
    (lambda x, t: PairBias.relative(t[:, :4]), "odd"),
])
def test_bad_structured_bias_raises_naming_the_argument(make, match):
    rng = np.random.default_rng(0)
    q = rng.standard_normal((1, 2, 4, 4))
    x, table = rng.standard_normal((1, 4, 3)), rng.standard_normal((2, 5))
    bias = make(x, table)
    option = "pair_bias" if isinstance(bias, PairBias) else "distance_bias"
    with pytest.raises((ValueError, TypeError), match=match):
        seqattn.attention(q, q, q, **{option: bias})


def test_self_attention_positions_need_y_for_cross_attention():
    rng = np.random.default_rng(0)
    q, k = rng.standard_normal((1, 2, 4, 4)), rng.standard_normal((1, 2, 6, 4))
    bias = DistanceBias(rng.standard_normal((1, 4, 3)), rng.standard_normal((2, 5)), 2.0)
    with pytest.raises(ValueError, match="pass y=key positions"):
        seqattn.attention(q, k, k, distance_bias=bias)


MEMORY_SCRIPT = textwrap.dedent("""
    import json, resource, sys
    import numpy as np
    import seqattn
    from seqattn.ops import DistanceBias

    def high_water_mark():
        with open("/proc/self/status") as f:
            line = next(l for l in f if l.startswith("VmHWM"))
        return int(line.split()[1]) * 1024

    N, H, D = int(sys.argv[1]), 2, 16
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((1, H, N, D)).astype(np.float32) for _ in range(3))
    x = rng.uniform(0, 20, (1, N, 3)).astype(np.float32)
    bias = DistanceBias(x, rng.standard_normal((H, 32)).astype(np.float32), 6.0)
    small = slice(0, 64)
    warm = DistanceBias(x[:, small], bias.table, 6.0)
    o, l = seqattn.attention(q[:, :, small], k[:, :, small], v[:, :, small], return_lse=True,
                             distance_bias=warm)
    seqattn.attention_backward(o, q[:, :, small], k[:, :, small], v[:, :, small], o, l,
                               distance_bias=warm)  # compile (or load) before measuring
    before = high_water_mark()
    out, lse = seqattn.attention(q, k, v, return_lse=True, distance_bias=bias)
    grads = seqattn.attention_backward(out, q, k, v, out, lse, distance_bias=bias)
    print(json.dumps({"growth": high_water_mark() - before,
                      "finite": bool(np.isfinite(grads.distance_bias.x).all())}))
""")


def test_distance_bias_memory_at_8192_tokens_stays_small():
    """Forward + backward with a distance bias at N = 8192: peak RSS grows < 256 MiB (a dense
    (1, 2, N, N) float32 bias alone would be 512 MiB, its gradient as much again)."""
    run = subprocess.run([sys.executable, "-c", MEMORY_SCRIPT, "8192"], capture_output=True,
                         text=True, timeout=900, check=True)
    result = json.loads(run.stdout.strip().splitlines()[-1])
    assert result["finite"]
    assert result["growth"] < 256 << 20, f"peak memory grew {result['growth'] / 2**20:.0f} MiB"
