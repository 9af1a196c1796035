"""The squared gradient norm sums in float64 whatever the gradients' dtype, as its docstring
promises. The op table checks its value at tiny shapes, where float32 arithmetic would still
pass; these take float32 arrays large enough for float32 rounding to show."""
import numpy as np

from seqattn import ops


def _float32_arrays_and_exact_sum():
    rng = np.random.default_rng(0)
    arrays = [rng.normal(size=100_000).astype(np.float32), rng.normal(size=7).astype(np.float32)]
    return arrays, sum((x.astype(np.float64) ** 2).sum() for x in arrays)


def test_sum_of_squares_of_float32_arrays_accumulates_in_float64():
    # float32 accumulation errs by ~1e-5 relative here; float32-rounded squares by ~1e-10
    arrays, exact = _float32_arrays_and_exact_sum()
    np.testing.assert_allclose(ops.sum_of_squares(arrays), exact, rtol=1e-8)


def test_sum_of_squares_of_float32_arrays_squares_in_float64():
    arrays, exact = _float32_arrays_and_exact_sum()
    np.testing.assert_allclose(ops.sum_of_squares(arrays), exact, rtol=1e-12)
