"""The distance bias's geometry of a whole batch (kernels/cpu/batch_geometry.py): every batch
filled as distance_geometry.py fills it alone, and kept for the calls that bring the same
values (a model's next layer, the backward passes), not for other positions; both versions of
the fill call distance_geometry's C function by name."""
import numpy as np
import pytest
from numba import njit

from seqattn.backend import CPU
from seqattn.kernels.cpu import batch_geometry, distance_geometry
from seqattn.kernels.cpu.attention_bias import distance_args
from seqattn.ops import DistanceBias
from seqattn.ops.structured_bias import prepare_distance_bias

B, H, N, M, T, C = 3, 2, 5, 7, 3, 9


def _dist(shift=0.0, cell=None):
    rng = np.random.default_rng(11)
    bias = DistanceBias(rng.uniform(0, 3, (B, N, 3)) + shift,
                        rng.normal(size=(T, T, H, C)).astype(np.float32), 3.0,
                        y=rng.uniform(0, 3, (B, M, 3)), types=rng.integers(0, T, (B, N)),
                        key_types=rng.integers(0, T, (B, M)), cell=cell, cutoff=2.5,
                        smooth_cutoff=True)
    return distance_args(prepare_distance_bias(bias, CPU, np.dtype(np.float32), B, H, N, M),
                         np.float32)


@pytest.mark.parametrize("cell", [None, np.diag([3.1, 2.7, 3.4])], ids=["open", "cell"])
def test_every_batch_is_filled_as_alone(cell):
    dist = _dist(cell=cell)
    shared = batch_geometry.shared_geometry(dist, B, N, M, np.float32)
    for b in range(B):
        alone = distance_geometry.DistanceGeometry(
            *(field[0] for field in batch_geometry._buffers(1, N, M, np.dtype(np.float32))))
        distance_geometry._fill(alone, b, dist)
        assert shared.batch[b, 0] == b, f"batch {b} was not filled"
        for field in alone._fields[1:]:
            assert np.array_equal(getattr(shared, field)[b], getattr(alone, field)), field


def test_the_same_values_find_the_kept_geometry_and_others_do_not():
    first = batch_geometry.shared_geometry(_dist(), B, N, M, np.float32)
    assert batch_geometry.shared_geometry(_dist(), B, N, M, np.float32) is first
    moved = batch_geometry.shared_geometry(_dist(shift=0.1), B, N, M, np.float32)
    assert moved is not first
    assert not np.array_equal(moved.weight, first.weight), "moved positions, same geometry"


@pytest.mark.parametrize("parallel", [False, True], ids=["serial", "parallel"])
def test_both_versions_of_the_batch_fill_call_the_c_function_by_name(parallel):
    """A parallel loop's batch index is unsigned: the C function (intp) must still be the one
    called, not the fill compiled into the kernel once more (a second fill per first run)."""
    # compiled here, uncached: the IR of a kernel loaded from the cache is not at hand
    fill = njit(parallel=parallel)(batch_geometry._fill_batches.__wrapped__)
    geometry = batch_geometry._buffers(B, N, M, np.dtype(np.float32))
    fill(geometry, _dist())
    assert list(geometry.batch[:, 0]) == list(range(B))
    ir = "".join(fill.inspect_llvm().values())
    assert "seqattn_distance_geometry_fill_float32" in ir
    defined = [line for line in ir.splitlines() if line.startswith("define")]
    # Numba's mangled name of distance_geometry._fill
    assert not any("distance_geometry5_fill" in line for line in defined), \
        "the fill compiled into the kernel"
