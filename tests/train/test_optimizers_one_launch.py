"""Adam and AdamW update all CPU parameters in one launch (ops.optimizers.AdamManyParameters):
the same bits as the update of each parameter on its own, also where parameters are split into
several pieces, are empty, or are replaced between steps."""
import numpy as np
import pytest

from seqattn.kernels.cpu import optimizers as cpu_optimizers
from seqattn.ops.optimizers import AdamManyParameters
from seqattn.train import Adam, AdamW
from seqattn.train.optimizers import Optimizer

# one parameter longer than a piece (split), one empty, the others small
SHAPES = [(3, 5), (cpu_optimizers.PIECE + 37,), (0, 4), (7,), (2, 3, 4)]


def _params(dtype, seed=0):
    rng = np.random.default_rng(seed)
    return [(f"p{i}", _Parameter(rng.standard_normal(s).astype(dtype)))
            for i, s in enumerate(SHAPES)]


class _Parameter:
    def __init__(self, data):
        self.data = data
        self.grad = np.zeros_like(data)
        self.shape, self.dtype = data.shape, data.dtype


def _twins(cls, dtype, **options):
    """Two optimizers on equal copies of the parameters."""
    ours, theirs = _params(dtype), _params(dtype)
    return (ours, cls(ours, **options)), (theirs, cls(theirs, **options))


def _set_gradients(params_pairs, step):
    rng = np.random.default_rng(100 + step)
    for (_, a), (_, b) in params_pairs:
        g = rng.standard_normal(a.shape).astype(a.dtype)
        a.grad, b.grad = g.copy(), g.copy()  # new arrays every step, as backward makes them


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=lambda d: d.__name__)
@pytest.mark.parametrize("cls, options", [(AdamW, dict(lr=1e-2, weight_decay=0.1)),
                                          (Adam, dict(lr=1e-2, betas=(0.8, 0.99),
                                                      weight_decay=0.05))],
                         ids=["adamw", "adam"])
def test_one_launch_gives_the_bits_of_one_launch_per_parameter(cls, options, dtype):
    (ours, one_launch), (theirs, per_parameter) = _twins(cls, dtype, **options)
    for step in range(4):
        _set_gradients(zip(ours, theirs), step)
        one_launch.step(0.5 + 0.1 * step)
        Optimizer.step(per_parameter, 0.5 + 0.1 * step)  # the loop over adam_step
        assert one_launch._many is not None, "the one-launch path was not taken"
        for (name, a), (_, b) in zip(ours, theirs):
            assert np.array_equal(a.data, b.data), f"step {step}: {name} differs"
            for slot in ("exp_avg", "exp_avg_sq"):
                assert np.array_equal(one_launch.state[name][slot],
                                      per_parameter.state[name][slot]), (
                    f"step {step}: {name}.{slot} differs")
    assert one_launch.steps == per_parameter.steps == 4


def test_a_loaded_state_is_taken_up():
    """Replaced state arrays (load_state_dict) are read, not the ones the table was built
    with."""
    (ours, optimizer), (theirs, reference) = _twins(AdamW, np.float32, lr=1e-2)
    _set_gradients(zip(ours, theirs), 0)
    optimizer.step()
    Optimizer.step(reference, 1.0)
    saved = reference.state_dict()
    (fresh, resumed), _ = _twins(AdamW, np.float32, lr=1e-2)
    _set_gradients(zip(fresh, _params(np.float32)), 5)
    resumed.step()  # builds the table on the fresh state, which loading then replaces
    for (_, a), (_, b) in zip(fresh, theirs):
        a.data[...] = b.data  # in place: the parameters stay the table's
    resumed.load_state_dict(saved)
    _set_gradients(zip(fresh, theirs), 1)
    resumed.step()
    Optimizer.step(reference, 1.0)
    for (name, a), (_, b) in zip(fresh, theirs):
        assert np.array_equal(a.data, b.data), f"{name} differs after resuming"


def test_mixed_dtypes_fall_back_to_one_launch_per_parameter():
    params = _params(np.float32)
    params[0] = ("p0", _Parameter(params[0][1].data.astype(np.float64)))
    optimizer = AdamW(params, lr=1e-2)
    before = [p.data.copy() for _, p in params]
    _set_gradients(zip(params, _params(np.float32)), 0)
    params[0][1].grad = params[0][1].grad.astype(np.float64)
    optimizer.step()
    assert optimizer._many is None, "mixed dtypes cannot share one launch"
    changed = [not np.array_equal(b, p.data) for b, (_, p) in zip(before, params) if p.data.size]
    assert all(changed), "every non-empty parameter must be updated"


def test_bad_gradients_are_named():
    params = [p.data for _, p in _params(np.float32)]
    many = AdamManyParameters(params, [np.zeros_like(p) for p in params],
                              [np.zeros_like(p) for p in params])
    grads = [np.zeros_like(p) for p in params]
    grads[3] = np.zeros(8, np.float32)
    with pytest.raises(ValueError, match=r"grads\[3\] has shape \(8,\); expected .*\(7,\)"):
        many.step(grads, step=1, lr=1e-3)
    grads[3] = np.zeros(7, np.float32)
    with pytest.raises(ValueError, match="step must be the step number"):
        many.step(grads, step=0, lr=1e-3)
    with pytest.raises(TypeError, match=r"exp_avgs\[0\] has dtype float64"):
        AdamManyParameters(params, [p.astype(np.float64) for p in params], params)


def test_the_parallel_version_gives_the_serial_bits():
    """Each piece of work updates elements no other piece touches, so the kernel compiled
    with prange gives the bits of its serial copy (which the small tests above run)."""
    results = []
    for version in ("serial", "parallel"):
        params = [p.data.copy() for _, p in _params(np.float32)]
        many = AdamManyParameters(params, [np.zeros_like(p) for p in params],
                                  [np.zeros_like(p) for p in params])
        grads = [np.random.default_rng(4).standard_normal(p.shape).astype(np.float32)
                 for p in params]
        many.addresses[:, cpu_optimizers.GRAD] = [grads[i].__array_interface__["data"][0]
                                                  for i in many.rows]
        getattr(cpu_optimizers._adam_update_many, version)(
            many.pieces, many.addresses, many.sizes, many.like, many.elements, 1e-2, 0.9, 0.999,
            1e-8, 0.01, True, 0.1, 0.001, 0.5)
        results.append(params)
    start = [p.data for _, p in _params(np.float32)]
    for i, (a, b, before) in enumerate(zip(*results, start)):
        assert np.array_equal(a, b), f"params[{i}]: the parallel version differs"
        assert before.size == 0 or not np.array_equal(a, before), f"params[{i}] not updated"
