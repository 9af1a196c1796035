"""The distance bias's shared per-pair geometry (kernels/cpu/distance_geometry.py) against the
same quantities computed in NumPy float64, in open space and in both kinds of periodic cell; and
the fill called by name (one C function per dtype, called_by_name.py), also from Numba's cache in
a new process."""
import itertools
import textwrap

import numpy as np
import pytest
from numba import njit

from cache_child import run_on_cache
from seqattn.backend import CPU
from seqattn.kernels.cpu import batch_geometry, distance_geometry
from seqattn.kernels.cpu.attention_bias import distance_args
from seqattn.ops import DistanceBias
from seqattn.ops.structured_bias import prepare_distance_bias

B, H, N, M, T, C = 2, 3, 5, 7, 3, 9
R_MAX, CUTOFF = 3.0, 2.5
CELLS = {
    "open": None,
    "orthorhombic": np.diag([3.1, 2.7, 3.4]),
    "triclinic": np.array([[3.1, 0.0, 0.0], [0.8, 2.9, 0.0], [0.5, 0.4, 3.2]]),
}


def _bias(cell, smooth, dtype=np.float32):
    rng = np.random.default_rng(7)
    x = rng.uniform(0, 3, (B, N, 3))
    y = rng.uniform(0, 3, (B, M, 3))
    y[1, 2] = np.nan  # a NaN position hides its pairs
    return DistanceBias(x, rng.normal(size=(T, T, H, C)).astype(dtype), R_MAX, y=y,
                        types=rng.integers(0, T, (B, N)), key_types=rng.integers(0, T, (B, M)),
                        cell=cell, cutoff=CUTOFF, smooth_cutoff=smooth)


def _reference(bias, b):
    """Each field of the geometry for batch b, in float64."""
    r = bias.x[b][:, None, :] - bias.y[b][None, :, :]
    if bias.cell is not None:
        cell = np.asarray(bias.cell, np.float64)
        f = r @ np.linalg.inv(cell)
        r = (f - np.floor(f + 0.5)) @ cell
        if np.any(cell != np.diag(np.diag(cell))):
            shifts = np.array(list(itertools.product((-1, 0, 1), repeat=3))) @ cell
            images = r[:, :, None, :] + shifts
            nearest = np.argmin((images ** 2).sum(-1), axis=-1)
            r = np.take_along_axis(images, nearest[:, :, None, None], axis=2)[:, :, 0]
    with np.errstate(invalid="ignore"):
        d = np.sqrt((r ** 2).sum(-1))
        visible = d <= CUTOFF
        u = np.minimum(d * (C - 1) / R_MAX, C - 1)
    k = np.minimum(np.floor(np.nan_to_num(u)), C - 2)
    pair = bias.types[b][:, None] * T + bias.key_types[b][None, :]
    a = np.pi / (2 * CUTOFF)
    with np.errstate(invalid="ignore", divide="ignore"):
        envelope = 2 * np.log(np.cos(a * d)) if bias.smooth_cutoff else np.zeros_like(d)
        envelope_slope = -2 * a * np.tan(a * d) / d if bias.smooth_cutoff else np.zeros_like(d)
        table_slope = np.where(d * (C - 1) / R_MAX < C - 1, (C - 1) / R_MAX / d, 0)
    return dict(visible=visible, entry=(pair * C + k).astype(int), weight=u - k,
                envelope=envelope, envelope_slope=envelope_slope, table_slope=table_slope,
                r=r)


def _one_batch(dtype):
    """Unfilled buffers of one batch's geometry, as batch_geometry.py hands a batch's part to
    the functions of distance_geometry.py."""
    buffers = batch_geometry._buffers(1, N, M, np.dtype(dtype))
    return distance_geometry.DistanceGeometry(*(field[0] for field in buffers))


@pytest.mark.parametrize("smooth", [True, False], ids=["smooth", "sharp"])
@pytest.mark.parametrize("cell", CELLS, ids=str)
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=lambda d: d.__name__)
def test_geometry_equals_numpy(cell, smooth, dtype):
    bias = _bias(CELLS[cell], smooth, dtype)
    dist = distance_args(prepare_distance_bias(bias, CPU, np.dtype(dtype), B, H, N, M), dtype)
    geometry = _one_batch(dist.x.dtype)
    tol = 2e-5 if dtype == np.float32 else 1e-12
    for b in range(B):
        distance_geometry._fill(geometry, b, dist)
        want = _reference(bias, b)
        seen = want["visible"]
        assert geometry.batch[0] == b
        assert np.array_equal(geometry.entry >= 0, seen), "hidden pairs differ"
        assert np.array_equal(geometry.entry[seen], want["entry"][seen])
        np.testing.assert_allclose(geometry.weight[seen], want["weight"][seen], atol=tol * C)
        for field in ("envelope", "envelope_slope", "table_slope"):
            np.testing.assert_allclose(getattr(geometry, field)[seen], want[field][seen],
                                       rtol=tol * 10, atol=tol, err_msg=field)
        for axis, name in enumerate(("rx", "ry", "rz")):
            got = getattr(geometry, name)
            np.testing.assert_allclose(got[seen], want["r"][..., axis][seen], atol=tol * 10)
            assert np.all(got[~seen] == 0), "a hidden pair's displacement must not reach forces"
        for field in ("weight", "envelope", "envelope_slope", "table_slope"):
            assert np.all(getattr(geometry, field)[~seen] == 0), field


@njit
def _add_for(s, b, h, dist, geometry):
    distance_geometry.add_shared_distance_bias(s, b, h, dist, geometry)


def test_a_geometry_is_filled_again_for_another_batch():
    bias = _bias(CELLS["orthorhombic"], True)
    dist = distance_args(prepare_distance_bias(bias, CPU, np.dtype(np.float32), B, H, N, M),
                         np.float32)
    shared = _one_batch(dist.x.dtype)
    after_batch_0 = np.zeros((N, M), np.float32)
    _add_for(after_batch_0, 0, 1, dist, shared)
    _add_for(after_batch_0, 1, 1, dist, shared)
    assert shared.batch[0] == 1
    fresh = np.zeros((N, M), np.float32)
    _add_for(fresh, 1, 1, dist, _one_batch(dist.x.dtype))
    want = np.zeros((N, M), np.float32)
    _add_for(want, 0, 1, dist, _one_batch(dist.x.dtype))
    np.testing.assert_allclose(after_batch_0, want + fresh, rtol=1e-6)


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=lambda d: d.__name__)
def test_a_caller_calls_the_fill_by_name_and_holds_none_of_its_code(dtype):
    dist = distance_args(prepare_distance_bias(_bias(CELLS["triclinic"], True, dtype), CPU,
                                               np.dtype(dtype), B, H, N, M), dtype)
    by_name = np.zeros((N, M), dtype)
    _add_for(by_name, 1, 2, dist, _one_batch(dist.x.dtype))
    # the same scores from a geometry filled by the loops themselves, compiled here
    geometry = _one_batch(dist.x.dtype)
    distance_geometry._fill(geometry, 1, dist)
    inline = np.zeros((N, M), dtype)
    distance_geometry._add_from_geometry(inline, dist.table[2].ravel(), geometry.entry,
                                         geometry.weight, geometry.envelope)
    np.testing.assert_array_equal(by_name, inline)
    ir = _add_for.inspect_llvm(_add_for.signatures[-1])
    assert f"seqattn_distance_geometry_fill_{np.dtype(dtype).name}" in ir
    defined = [line for line in ir.splitlines() if line.startswith("define")]
    assert not any("distance_geometry5_fill" in line or "_fill_fields" in line
                   for line in defined)


_CHILD = textwrap.dedent("""
    import json
    import numpy as np
    from seqattn import ops
    from seqattn.kernels.cpu import attention_small
    rng = np.random.default_rng(3)
    q, k, v = (rng.normal(size=(2, 2, 6, 8)).astype(np.float32) for _ in range(3))
    bias = ops.DistanceBias(rng.uniform(0, 3, (2, 6, 3)),
                            rng.normal(size=(2, 2, 2, 9)).astype(np.float32),
                            3.0, types=rng.integers(0, 2, (2, 6)), cutoff=2.5,
                            smooth_cutoff=True)
    out = ops.attention(q, k, v, distance_bias=bias)
    kernel = attention_small._forward_tasks.serial
    print(json.dumps({"out": out.tolist(),
                      "misses": sum(kernel.stats.cache_misses.values()),
                      "hits": sum(kernel.stats.cache_hits.values())}))
""")


def test_attention_calling_the_fill_by_name_runs_from_the_cache_in_a_new_process(tmp_path):
    compiled, loaded = run_on_cache(_CHILD, tmp_path), run_on_cache(_CHILD, tmp_path)
    assert compiled["misses"] == 1 and loaded["misses"] == 0 and loaded["hits"] == 1
    assert np.isfinite(compiled["out"]).all()
    assert loaded["out"] == compiled["out"]
