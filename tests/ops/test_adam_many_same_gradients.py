"""The one-launch Adam keeps its address table when the gradients are the same arrays as at the
last step (a model's .grad arrays), reads their new values, and takes up a replaced array."""
import numpy as np

from seqattn import ops
from seqattn.ops.optimizers import AdamManyParameters

SHAPES = [(3, 5), (7,), (0, 2), (2, 3, 4)]
OPTIONS = dict(lr=1e-2, weight_decay=0.1, decoupled_weight_decay=True)


def _state(seed=0):
    rng = np.random.default_rng(seed)
    params = [rng.standard_normal(s).astype(np.float32) for s in SHAPES]
    return params, [np.zeros_like(p) for p in params], [np.zeros_like(p) for p in params]


def test_gradients_reused_in_place_and_replaced_give_the_per_parameter_bits():
    ours, theirs = _state(), _state()
    many = AdamManyParameters(*ours)
    grads = [np.zeros_like(p) for p in ours[0]]
    rng = np.random.default_rng(1)
    for step in range(1, 5):
        if step == 3:
            grads[1] = np.zeros_like(grads[1])  # a new array in one place
        for g in grads:
            g[...] = rng.standard_normal(g.shape)  # in place, as backward accumulates
        assert many.takes(grads)
        many.step(grads, step=step, **OPTIONS)
        for i, g in enumerate(grads):
            ops.adam_step(theirs[0][i], g, theirs[1][i], theirs[2][i], step=step, **OPTIONS)
        for i, (a, b) in enumerate(zip(ours[0], theirs[0])):
            assert np.array_equal(a, b), f"step {step}: parameter {i} differs"


def test_gradients_that_do_not_fit_are_still_refused_after_a_step():
    params, exp_avgs, exp_avg_sqs = _state()
    many = AdamManyParameters(params, exp_avgs, exp_avg_sqs)
    grads = [np.zeros_like(p) for p in params]
    many.step(grads, step=1, **OPTIONS)
    grads = grads[:1] + [np.zeros(8, np.float32)] + grads[2:]
    assert not many.takes(grads)
