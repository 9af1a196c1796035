"""The squared gradient norm of many CPU arrays in one launch (ops.optimizers.SumOfSquaresPlan):
the bits of one launch per array where each array fits a piece, the new values of arrays
changed in place or replaced, and the general path for what one launch does not take."""
import numpy as np
import pytest

from seqattn import ops
from seqattn.kernels.cpu import optimizers as cpu_optimizers
from seqattn.kernels.cpu import sums_of_squares as cpu_sums
from seqattn.ops.optimizers import SumOfSquaresPlan

SHAPES = [(3, 5), (0, 4), (cpu_sums.PIECE,), (7,), (2, 3, 4)]


def _arrays(dtype, shapes=SHAPES, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s).astype(dtype) for s in shapes]


def _one_launch_per_array(arrays):
    total = np.zeros(1)
    for x in arrays:
        if x.size:
            cpu_optimizers.add_sum_of_squares(total, x.reshape(-1))
    return float(total[0])


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=lambda d: d.__name__)
def test_one_launch_gives_the_bits_of_one_launch_per_array(dtype):
    arrays = _arrays(dtype)
    assert SumOfSquaresPlan.takes(arrays), "the one-launch path was not taken"
    assert ops.sum_of_squares(arrays) == _one_launch_per_array(arrays)


def test_an_array_longer_than_a_piece_is_summed_by_pieces_in_float64():
    arrays = _arrays(np.float32, [(3 * cpu_sums.PIECE + 11,), (5,)])
    exact = sum(float(np.sum(x.astype(np.float64) ** 2)) for x in arrays)
    np.testing.assert_allclose(ops.sum_of_squares(arrays), exact, rtol=1e-12)


def test_values_changed_in_place_and_replaced_arrays_are_read():
    arrays = _arrays(np.float32)
    first = ops.sum_of_squares(arrays)
    arrays[0] *= 2.0  # the same array: the kept plan must read its new values
    assert ops.sum_of_squares(arrays) == _one_launch_per_array(arrays) != first
    arrays[3] = arrays[3] + 1.0  # a new array in the same place
    assert ops.sum_of_squares(arrays) == _one_launch_per_array(arrays)


def test_what_one_launch_does_not_take_goes_array_by_array():
    arrays = _arrays(np.float32)
    mixed = arrays[:2] + [arrays[2].astype(np.float64)]
    strided = [np.ones((4, 6), np.float32)[:, ::2]]
    for case in (mixed, strided, []):
        assert not SumOfSquaresPlan.takes(case)
    assert ops.sum_of_squares(mixed) == _one_launch_per_array(mixed)
    assert ops.sum_of_squares(strided) == 12.0
    assert ops.sum_of_squares([]) == 0.0
    assert ops.sum_of_squares([np.zeros((0, 3), np.float32)]) == 0.0


def test_the_parallel_version_gives_the_serial_bits():
    """Each piece is summed on one thread and the pieces are added in order by the caller."""
    arrays = _arrays(np.float32, [(2 * cpu_sums.PIECE + 5,), (9,), (40,)])
    plan = SumOfSquaresPlan(arrays)  # the arrays stay alive while the kernel reads them
    results = []
    for version in (cpu_sums.sums_of_squares.serial, cpu_sums.sums_of_squares.parallel):
        sums = np.empty(len(plan.pieces))
        version(sums, plan.pieces, plan.addresses, plan.sizes, plan.like, plan.elements)
        results.append(sums)
    assert np.array_equal(*results)


def test_the_kept_plan_does_not_keep_the_arrays_alive():
    import gc
    import weakref

    arrays = [np.ones(5, np.float32), np.ones((3, 4), np.float32)]
    assert ops.sum_of_squares(arrays) == 17.0
    gone = weakref.ref(arrays[0])
    del arrays
    gc.collect()
    assert gone() is None, "the plan kept for the next step still holds a gradient"
