"""A structured bias's code compiles only into the kernels of calls that have that bias.

The kernel forms carry None in an absent bias's flag (attention_bias.distance_args and
pair_args), and attention_bias's entry points then compile to nothing: the bias's functions are
never typed for that signature. A pair bias's two forms (codes from an array, relative
positions) compile only their own functions. A probe compiled here (not cached, so its callees are typed in
this process whatever the disk cache holds) records which signatures each bias function gets.
"""
import numpy as np
import pytest
from numba import njit, typeof

from seqattn.backend import CPU
from seqattn.kernels.cpu import attention_bias as ab
from seqattn.ops.structured_bias import (DistanceBias, PairBias, prepare_distance_bias,
                                         prepare_pair_bias)

B, H, N = 1, 2, 6


@njit
def _probe(s, dist, pair):
    """What _modify_scores does with the structured biases of one tile."""
    ab.add_distance_bias(s, 0, 1, 0, 0, dist)
    ab.add_pair_bias(s, 0, 1, 0, 0, pair)
    return ab.has_distance(dist), ab.has_pair(pair)


@njit
def _probe_grads(ds, dist, pair, dtab, dx, dy, dpair):
    """What _structured_grads does with them."""
    ab.distance_bias_grads(ds, 0, 1, 0, 0, dist, dtab, dx, dy)
    ab.pair_bias_grads(ds, 0, 0, 0, pair, dpair)


def _kernel_forms(with_distance, pair_form):
    rng = np.random.default_rng(0)
    distance = DistanceBias(x=rng.standard_normal((B, N, 3)).astype(np.float32),
                            table=rng.standard_normal((H, 8)).astype(np.float32),
                            r_max=4.0) if with_distance else None
    table = rng.standard_normal((H, 3)).astype(np.float32)
    pair = {None: None,
            "codes": PairBias(table=table, codes=rng.integers(0, 3, (B, N, N), dtype=np.int32)),
            "relative": PairBias.relative(table)}[pair_form]
    dist = ab.distance_args(prepare_distance_bias(distance, CPU, np.float32, B, H, N, N),
                            np.float32)
    return dist, ab.pair_args(prepare_pair_bias(pair, CPU, np.float32, B, H, N, N))


def _typed_for(function, form):
    """Whether ``function`` (a bias's @njit function) has a signature for the form's type."""
    return any(typeof(form) in signature for signature in function.overloads)


PAIR_FUNCTIONS = {"codes": (ab._add_pair_codes, ab._pair_codes_grads),
                  "relative": (ab._add_relative_pair, ab._relative_pair_grads)}


@pytest.mark.parametrize("with_distance, pair_form",
                         [(False, None), (True, None), (False, "codes"), (True, "codes"),
                          (False, "relative"), (True, "relative")])
def test_only_the_biases_a_call_has_compile(with_distance, pair_form):
    with_pair = pair_form is not None
    dist, pair = _kernel_forms(with_distance, pair_form)
    s = np.zeros((N, N), np.float32)
    assert _probe(s, dist, pair) == (with_distance, with_pair)
    assert (s != 0).any() == (with_distance or with_pair), "a present bias added nothing"
    ds = np.ones((N, N), np.float32)
    dtab = np.zeros((ab.LANES,) + dist.table.shape[1:], np.float32)
    dx, dy = np.zeros((3, N), np.float32), np.zeros((3, N), np.float32)
    dpair = np.zeros((ab.LANES, pair.table.shape[1]), np.float32)
    _probe_grads(ds, dist, pair, dtab, dx, dy, dpair)
    assert dtab.any() == with_distance and dpair.any() == with_pair
    for function in (ab._add_distance_bias, ab._distance_bias_grads):
        assert _typed_for(function, dist) == with_distance, function.__name__
    for form, functions in PAIR_FUNCTIONS.items():
        for function in functions:
            assert _typed_for(function, pair) == (form == pair_form), function.__name__
