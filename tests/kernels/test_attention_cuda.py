"""The CUDA attention kernels against the NumPy reference, through seqattn's public ops.

Runs under Numba's CUDA simulator (``NUMBA_ENABLE_CUDASIM=1``) at the small shapes of
``attention_cases.SMALL_CASES``; the simulator runs every thread in Python, so float64 and the
finite-difference checks use a subset, and the tests of one case share its simulator runs (the
forward and backward checks need the same forward). Tests marked ``gpu`` run at larger shapes on
a real GPU only.
"""
import functools

import numba
import numpy as np
import pytest

pytestmark = pytest.mark.slow  # minutes in all: the file runs first (tests/conftest.py)

cuda = pytest.importorskip("numba.cuda")
if not cuda.is_available():
    pytest.skip("numba.cuda has no GPU and the simulator is off (NUMBA_ENABLE_CUDASIM=1)",
                allow_module_level=True)

import seqattn  # noqa: E402
from seqattn.backend import is_device_array  # noqa: E402
from attention_cases import (  # noqa: E402
    SMALL_CASES, Case, backward_inputs, check_backward, check_forward, check_weights,
)
from gradcheck import (  # noqa: E402
    assert_directional_derivatives, assert_same_gradient, shared_runs,
)

ON_SIMULATOR = bool(numba.config.ENABLE_CUDASIM)


def _on_device(op):
    """op taking NumPy arrays: inputs go to the device, results come back to the host."""
    def run(*arrays, **options):
        moved = [cuda.to_device(a) if isinstance(a, np.ndarray) else a for a in arrays]
        options = {name: cuda.to_device(x) if isinstance(x, np.ndarray) else x
                   for name, x in options.items()}
        result = op(*moved, **options)
        if isinstance(result, tuple):
            return tuple(None if r is None else r.copy_to_host() for r in result)
        return result.copy_to_host()
    return run


attention = shared_runs(_on_device(seqattn.attention))
attention_backward = shared_runs(_on_device(seqattn.attention_backward))
attention_backward_with_atomics = shared_runs(_on_device(
    functools.partial(seqattn.attention_backward, deterministic=False)))
attention_weights = _on_device(seqattn.attention_weights)

# SMALL_CASES fit in one tile; these span several query and key tiles (online softmax across
# tiles, tiles skipped outside the band, dK/dV and dbias summed over tiles) at simulator cost.
MULTI_TILE_CASES = [
    Case("multi_tile_causal_gqa", B=1, H=2, Hkv=1, N=70, M=75, D=4, causal=True,
         bias_shape=(1, 1, 70, 75), small=False),
    Case("multi_tile_window_key_bias", B=1, H=1, Hkv=1, N=40, M=100, D=3, key_padding="some",
         window=(20, 5), bias_shape=(1, 1, 1, 100), small=False),
    # Plain scores (no mask or bias): the kernels skip score_at on the tiles the band covers
    # entirely, the diagonal ones of 64 x 64 here; the window's edges cut the two others.
    Case("multi_tile_plain_window", B=1, H=1, Hkv=1, N=128, M=128, D=2, window=(80, 70),
         small=False),
]
FLOAT64_CASES = [c for c in SMALL_CASES if c.name in (
    "basic", "key_padding_empty_row", "bias_key_only", "everything")]
FINITE_DIFFERENCE_CASES = [c for c in SMALL_CASES if c.name in ("bias_query_only", "everything")]


def _cases(dtype):
    return SMALL_CASES + MULTI_TILE_CASES if dtype == np.float32 else FLOAT64_CASES


def _case_params():
    return [pytest.param(case, dtype, id=f"{case}-{np.dtype(dtype).name}")
            for dtype in (np.float32, np.float64) for case in _cases(dtype)]


@pytest.mark.parametrize("case, dtype", _case_params())
def test_forward_matches_reference(case, dtype):
    check_forward(attention, case, dtype)


@pytest.mark.parametrize("case, dtype", _case_params())
def test_backward_matches_reference(case, dtype):
    check_backward(attention, attention_backward, case, dtype)


@pytest.mark.parametrize("case, dtype", [pytest.param(c, np.float32, id=f"{c}-float32")
                                         for c in MULTI_TILE_CASES] + [
    pytest.param(c, np.float64, id=f"{c}-float64") for c in FINITE_DIFFERENCE_CASES])
def test_backward_with_atomics_matches_reference(case, dtype):
    """deterministic=False: dq added with atomics by the key-tile pass, over several tiles."""
    check_backward(attention, attention_backward_with_atomics, case, dtype)


@pytest.mark.parametrize("case, dtype", _case_params())
def test_weights_match_reference(case, dtype):
    check_weights(attention_weights, case, dtype)


@pytest.mark.parametrize("case", FINITE_DIFFERENCE_CASES, ids=str)
def test_backward_matches_cpu_and_finite_differences(case):
    """float64: every element of every gradient equal to the CPU kernels' (which their own tests
    check against finite differences element by element), and each gradient against central
    differences of L = sum(out * dout) through the simulated forward along a random direction."""
    dout, q, k, v, opts = backward_inputs(case, np.float64)
    wants_bias = "bias" in opts
    out, lse = attention(q, k, v, return_lse=True, **opts)
    got = attention_backward(dout, q, k, v, out, lse, bias_requires_grad=wants_bias, **opts)
    cpu_out, cpu_lse = seqattn.attention(q, k, v, return_lse=True, **opts)
    want = seqattn.attention_backward(dout, q, k, v, cpu_out, cpu_lse,
                                      bias_requires_grad=wants_bias, **opts)
    names = ("q", "k", "v", "bias") if wants_bias else ("q", "k", "v")
    for name, g, w in zip(names, got, want):
        assert_same_gradient(f"d{name}", g, w)
    point = {"q": q, "k": k, "v": v, **({"bias": opts.pop("bias")} if wants_bias else {})}

    def loss_at(name, x):
        args = {**point, name: x}
        extra = {"bias": args["bias"]} if wants_bias else {}
        return float((attention(args["q"], args["k"], args["v"], **opts, **extra) * dout).sum())

    assert_directional_derivatives(loss_at, point, dict(zip(names, got)),
                                   np.random.default_rng(2))


def test_results_stay_on_the_device():
    q, k, v, options = Case("bias", bias_shape=(1, 2, 5, 5)).inputs(np.float32)
    q, k, v, bias = (cuda.to_device(a) for a in (q, k, v, options["bias"]))
    out, lse = seqattn.attention(q, k, v, bias=bias, return_lse=True)
    grads = seqattn.attention_backward(out, q, k, v, out, lse, bias=bias, bias_requires_grad=True)
    weights = seqattn.attention_weights(q, k, bias=bias)
    for result in (out, lse, *grads, weights):
        assert is_device_array(result), f"{type(result).__name__} is not a device array"
    assert grads[3].shape == (1, 2, 5, 5)


def test_host_and_device_arrays_mixed_raise():
    q, k, v, _ = Case("basic").inputs(np.float32)
    with pytest.raises(ValueError, match="different devices"):
        seqattn.attention(cuda.to_device(q), k, cuda.to_device(v))


def test_head_dim_beyond_shared_memory_tiles_raises():
    q, k, v, _ = Case("wide_heads", B=1, H=1, Hkv=1, N=2, M=2, D=300).inputs(np.float32)
    with pytest.raises(ValueError, match="D=300"):
        seqattn.attention(*(cuda.to_device(a) for a in (q, k, v)))


@pytest.mark.gpu
@pytest.mark.skipif(ON_SIMULATOR, reason="needs a real GPU; the simulator is too slow here")
@pytest.mark.parametrize("causal", [False, True])
def test_large_shape_on_gpu(causal):
    case = Case("large", B=2, H=4, Hkv=2, N=1000, M=1000, D=64, causal=causal,
                key_padding="some", bias_shape=(1, 4, 1000, 1000), small=False)
    check_forward(attention, case, np.float32)
    check_backward(attention, attention_backward, case, np.float32)


@pytest.mark.parametrize("deterministic", [True, False])
def test_layer_option_reaches_the_backward(deterministic, monkeypatch):
    """MultiheadAttention(deterministic=...) is what its training step's attention backward
    gets (through the recorded op: the packed projection's in self-attention, the heads' in
    cross-attention); the default is deterministic."""
    from seqattn import nn
    from seqattn.autodiff import attention_function, packed_attention_function

    seen = []

    # the recorded ops' backward: the checked arguments kept from the forward
    for module, name in ((attention_function, "attention_backward_of_call"),
                         (packed_attention_function, "packed_attention_backward_of_call")):
        def recording_backward(*args, backward=getattr(module, name), **options):
            seen.append(options["deterministic"])
            return backward(*args, **options)
        monkeypatch.setattr(module, name, recording_backward)
    layer_options = {} if deterministic else {"deterministic": False}
    layer = nn.MultiheadAttention(8, 2, seed=0, **layer_options)
    rng = np.random.default_rng(0)
    x, memory = (rng.normal(size=(1, n, 8)).astype(np.float32) for n in (3, 4))
    for keys in (x, memory):
        out, _ = layer(x, keys, keys)
        layer.backward(np.ones_like(out))
    assert seen == [deterministic, deterministic]
