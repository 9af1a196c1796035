"""Structured attention biases in the CUDA kernels, equal to the same bias built densely.

Runs under Numba's CUDA simulator (``NUMBA_ENABLE_CUDASIM=1``), which executes every thread in
Python: a few small cases of ``structured_bias_cases``, one spanning several query and key tiles;
the tests share their simulator runs (the gradient check reuses a float64 case's).
"""
import dataclasses

import numpy as np
import pytest

pytestmark = pytest.mark.slow  # minutes in all: the file runs first (tests/conftest.py)

cuda = pytest.importorskip("numba.cuda")
if not cuda.is_available():
    pytest.skip("numba.cuda has no GPU and the simulator is off (NUMBA_ENABLE_CUDASIM=1)",
                allow_module_level=True)

import seqattn  # noqa: E402
from seqattn.backend import is_device_array  # noqa: E402
from seqattn.ops import AttentionGradients  # noqa: E402
from attention_cases import Case  # noqa: E402
from gradcheck import (  # noqa: E402
    assert_directional_derivatives, assert_same_gradient, shared_runs,
)
from structured_bias_cases import (  # noqa: E402
    STRUCTURED_CASES, StructuredCase, backward_inputs, check_pair_at_the_cutoff, check_structured,
    named_gradients,
)


def _to_device(x):
    if isinstance(x, np.ndarray):
        return cuda.to_device(x)
    if dataclasses.is_dataclass(x):  # a DistanceBias or PairBias: move its arrays
        return dataclasses.replace(x, **{f.name: _to_device(getattr(x, f.name))
                                         for f in dataclasses.fields(x)})
    return x


def _to_host(x):
    if isinstance(x, tuple) and hasattr(x, "_fields"):
        return type(x)(*(_to_host(a) for a in x))
    return x.copy_to_host() if is_device_array(x) else x


@shared_runs
def cuda_attention(q, k, v, **opts):
    result = seqattn.attention(*map(_to_device, (q, k, v)),
                               **{name: _to_device(x) for name, x in opts.items()})
    return tuple(map(_to_host, result)) if isinstance(result, tuple) else _to_host(result)


def _backward_on_device(*arrays, **opts):
    grads = seqattn.attention_backward(*map(_to_device, arrays),
                                       **{name: _to_device(x) for name, x in opts.items()})
    for name, g in (("distance_bias", grads.distance_bias), ("pair_bias", grads.pair_bias)):
        for part in () if g is None else g:
            assert part is None or is_device_array(part), f"{name} gradient left the device"
    return AttentionGradients(*map(_to_host, grads), _to_host(grads.distance_bias),
                              _to_host(grads.pair_bias))


cuda_attention_backward = shared_runs(_backward_on_device)


SIMULATOR_CASES = [c for c in STRUCTURED_CASES if c.name in (
    "distance_triclinic_types", "distance_smooth_cutoff", "distance_cross_types",
    "distance_with_masks_causal", "pair_codes_int16_per_batch", "pair_relative_positions_masked",
    "distance_and_pair")] + [
    StructuredCase("over_tiles", Case("over_tiles", B=1, H=2, Hkv=1, N=70, M=40, D=3,
                                      causal=True), distance=True, cross_positions=True,
                   cell="orthorhombic", cutoff=1.9, pair="codes"),
]
FLOAT64_CASES = [c for c in SIMULATOR_CASES if c.name in ("distance_with_masks_causal",
                                                           "distance_and_pair")]


def _params():
    return ([pytest.param(c, np.float32, id=f"{c}-float32") for c in SIMULATOR_CASES]
            + [pytest.param(c, np.float64, id=f"{c}-float64") for c in FLOAT64_CASES])


@pytest.mark.parametrize("case, dtype", _params())
def test_structured_equals_dense(case, dtype):
    check_structured(cuda_attention, cuda_attention_backward, case, dtype)


def test_gradients_match_cpu_and_finite_differences():
    """float64: every gradient equal, element by element, to the CPU kernels' (which their own
    tests check against finite differences), and the tables' and positions' gradients against
    central differences of sum(out * dout) through the simulated forward along random
    directions."""
    case = next(c for c in SIMULATOR_CASES if c.name == "distance_and_pair")
    dout, q, k, v, opts = backward_inputs(case, np.float64)
    wants_bias = "bias" in opts
    out, lse = cuda_attention(q, k, v, return_lse=True, **opts)
    got = named_gradients(cuda_attention_backward(dout, q, k, v, out, lse,
                                                  bias_requires_grad=wants_bias, **opts))
    cpu_out, cpu_lse = seqattn.attention(q, k, v, return_lse=True, **opts)
    want = named_gradients(seqattn.attention_backward(dout, q, k, v, cpu_out, cpu_lse,
                                                      bias_requires_grad=wants_bias, **opts))
    assert sorted(got) == sorted(want)
    for name in want:
        assert_same_gradient(name, got[name], want[name])
    fields = {"distance.table": ("distance_bias", "table"), "distance.x": ("distance_bias", "x"),
              "pair.table": ("pair_bias", "table")}
    point = {name: np.asarray(getattr(opts[option], field), np.float64)
             for name, (option, field) in fields.items()}

    def loss_at(name, x):
        option, field = fields[name]
        varied = {**opts, option: dataclasses.replace(opts[option], **{field: x})}
        return float((cuda_attention(q, k, v, **varied) * dout).sum())

    assert_directional_derivatives(loss_at, point, got, np.random.default_rng(3))


class _ReversedIndexOrder:
    """NumPy for the CUDA simulator's kernel launcher, except that np.ndindex runs backwards:
    the simulator then starts the blocks of a grid, and the threads of a block, in the reverse
    of their usual order, as a GPU may schedule them in any order."""

    def __getattr__(self, name):
        return getattr(np, name)

    @staticmethod
    def ndindex(*shape):
        return reversed(list(np.ndindex(*shape)))


@pytest.mark.parametrize("deterministic", [True, False])
def test_backward_is_the_same_in_any_block_order(deterministic, monkeypatch):
    """deterministic=True: every gradient the same bits when the blocks and threads run in
    the reverse order. The tables are summed as fixed-point integers in either mode, so they
    are the same bits even with deterministic=False, whose dq (added by atomics from three key
    tiles: two adds onto zero commute) changes: the control that the order did change."""
    from numba.cuda.simulator import kernel as simulator_kernel

    case = StructuredCase("three_key_tiles", Case("three_key_tiles", B=1, H=2, Hkv=1, N=12,
                                                  M=70, D=3), distance=True,
                          cross_positions=True, cutoff=1.9, pair="codes")
    dout, q, k, v, opts = backward_inputs(case, np.float32)
    out, lse = cuda_attention(q, k, v, return_lse=True, **opts)

    def gradients():
        return named_gradients(_backward_on_device(dout, q, k, v, out, lse,
                                                   deterministic=deterministic, **opts))

    usual = gradients()
    monkeypatch.setattr(simulator_kernel, "np", _ReversedIndexOrder())
    reversed_order = gradients()
    assert {"distance.table", "pair.table", "distance.x"} <= set(usual)
    for name in usual if deterministic else ("distance.table", "pair.table"):
        assert np.array_equal(usual[name], reversed_order[name]), \
            f"{name} depends on the order the blocks run in"
    if not deterministic:
        assert not np.array_equal(usual["dq"], reversed_order["dq"])


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=lambda d: d.__name__)
def test_a_pair_exactly_at_the_smooth_cutoff_weighs_nothing_and_stays_finite(dtype):
    """float32's a * cutoff rounds past pi / 2: the envelope took the log of a negative cosine
    (NaN on a GPU; the simulator raised)."""
    check_pair_at_the_cutoff(cuda_attention, _backward_on_device, dtype)
