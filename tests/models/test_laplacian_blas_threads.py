"""Laplacian positions do not depend on how many threads the caller's BLAS runs: the
eigenproblem is solved on one BLAS thread (faster at these sizes, and the same bits
whatever the caller set)."""
import numpy as np
from threadpoolctl import threadpool_limits

from seqattn import graphs


def test_laplacian_positions_are_the_same_bits_on_one_or_two_blas_threads():
    rng = np.random.default_rng(0)
    n = 250  # the dense solver's blocked path; 2-threaded OpenBLAS changed the last bits here
    weights = (rng.random((n, n)) < 0.1) * rng.random((n, n))
    adjacency = weights + weights.T
    with threadpool_limits(1, user_api="blas"):
        one = graphs.laplacian_positions(adjacency, 8)
    with threadpool_limits(2, user_api="blas"):
        two = graphs.laplacian_positions(adjacency, 8)
    np.testing.assert_array_equal(one, two)
