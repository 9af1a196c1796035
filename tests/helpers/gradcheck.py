"""Shared helpers for gradient and device checks: finite differences, tolerances, CUDA runs.

Every backward in seqattn is checked the same way: a scalar loss L = sum(f(inputs) * dout) with a
fixed random ``dout``, its analytic gradient from the backward pass, and central differences of L
in float64, compared with one named assertion per gradient.
"""
import dataclasses

import numpy as np

FD_STEP = 1e-6


def numerical_gradient(loss, x, samples=None, rng=None, step=FD_STEP):
    """Central differences of the scalar ``loss()`` with respect to array ``x`` (float64).

    ``x`` is perturbed in place and restored. With ``samples``, only that many randomly chosen
    entries are differenced (the rest stay NaN), which keeps checks of large parameters cheap.
    """
    grad = np.full(x.shape, np.nan)
    flat_x = x.reshape(-1)
    indices = np.arange(x.size)
    if samples is not None and samples < x.size:
        indices = (rng or np.random.default_rng(0)).choice(x.size, samples, replace=False)
    for i in indices:
        original = flat_x[i]
        flat_x[i] = original + step
        up = loss()
        flat_x[i] = original - step
        down = loss()
        flat_x[i] = original
        grad.reshape(-1)[i] = (up - down) / (2 * step)
    return grad


def assert_gradient(name, analytic, numeric, rtol=1e-6, atol=1e-8):
    """One named assertion: analytic matches numeric wherever numeric was computed."""
    analytic = np.asarray(analytic, dtype=np.float64)
    assert analytic.shape == numeric.shape, f"{name}: shape {analytic.shape} != {numeric.shape}"
    checked = ~np.isnan(numeric)
    err = np.abs(analytic[checked] - numeric[checked])
    bound = atol + rtol * np.abs(numeric[checked]).max(initial=0.0)
    assert err.max(initial=0.0) <= bound, (
        f"gradient {name}: max error {err.max():.3e} exceeds {bound:.3e}")


def assert_directional_derivatives(loss_at, point, gradients, rng, step=FD_STEP, rtol=1e-6,
                                   atol=1e-8):
    """Each gradient against central differences along one random direction, in float64.

    For each ``name, x`` of ``point``: a random unit direction u of x's shape, and
    (loss_at(name, x + step u) - loss_at(name, x - step u)) / (2 step) against the analytic
    directional derivative sum(gradients[name] * u), within atol + rtol |gradients[name]|; one
    named assertion per gradient and two loss calls per array (against two per element for
    :func:`numerical_gradient`). A gradient that is wrong anywhere moves sum(g * u) for almost
    every u; comparing every element with an independently checked gradient as well (the CPU
    kernels', say) pins where.
    """
    for name, x in point.items():
        direction = rng.standard_normal(x.shape)
        direction /= np.linalg.norm(direction)
        up, down = loss_at(name, x + step * direction), loss_at(name, x - step * direction)
        numeric = (up - down) / (2 * step)
        grad = np.asarray(gradients[name], np.float64)
        analytic = float((grad * direction).sum())
        bound = atol + rtol * float(np.linalg.norm(grad))
        assert abs(numeric - analytic) <= bound, (
            f"gradient {name} along a random direction: analytic {analytic:.10g} vs finite "
            f"difference {numeric:.10g} (allowed {bound:.2e})")


def assert_same_gradient(name, got, want, rtol=1e-12):
    """Every element of a float64 gradient equal to an independently computed one (another
    kernel's) up to rounding: within rtol of the largest magnitude."""
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    assert got.shape == want.shape, f"{name}: shape {got.shape} != {want.shape}"
    err = float(np.abs(got - want).max(initial=0.0))
    bound = rtol * max(1.0, float(np.abs(want).max(initial=0.0)))
    assert err <= bound, f"gradient {name}: differs by up to {err:.3e} (allowed {bound:.1e})"


def assert_float32_close(name, got, reference, naive32):
    """A float32 result may err from the float64 reference by at most a small multiple of what a
    naive NumPy float32 computation of the same thing errs (plus a few ulps of the scale)."""
    reference = np.asarray(reference, np.float64)
    scale = np.abs(reference).max(initial=0.0)
    naive_err = np.abs(np.asarray(naive32, np.float64) - reference).max(initial=0.0)
    bound = 8 * naive_err + 8 * np.finfo(np.float32).eps * scale
    err = np.abs(np.asarray(got, np.float64) - reference).max(initial=0.0)
    assert err <= bound, f"{name}: float32 error {err:.3e} exceeds {bound:.3e}"


def to_host(x):
    """A NumPy copy of a device array (NumPy arrays and None pass through)."""
    return x.copy_to_host() if hasattr(x, "copy_to_host") else x


def _fingerprint(value):
    """A hashable stand-in for an argument, equal for equal contents."""
    if isinstance(value, np.ndarray):
        return value.dtype.str, value.shape, value.tobytes()
    if dataclasses.is_dataclass(value):
        return type(value).__name__, tuple((f.name, _fingerprint(getattr(value, f.name)))
                                           for f in dataclasses.fields(value))
    if isinstance(value, (tuple, list)):
        return tuple(map(_fingerprint, value))
    return repr(value)


def shared_runs(op):
    """``op`` with its results kept per argument contents, for tests that need the same slow
    run (a CUDA-simulator forward, say) more than once. Callers must not modify the results."""
    results = {}

    def run(*args, **options):
        key = (_fingerprint(args), tuple(sorted((n, _fingerprint(x)) for n, x in options.items())))
        if key not in results:
            results[key] = op(*args, **options)
        return results[key]
    return run


def on_cuda(fn, *args, **kwargs):
    """Run ``fn`` with every NumPy array argument moved to the GPU (or the CUDA simulator) and
    return its results on the host, so they can be compared with the CPU run."""
    from numba import cuda

    def move(a):
        return cuda.to_device(a) if isinstance(a, np.ndarray) else a

    result = fn(*(move(a) for a in args), **{k: move(v) for k, v in kwargs.items()})
    if isinstance(result, tuple):
        return tuple(to_host(r) for r in result)
    return to_host(result)


def check_module_gradients(module, call, backward, inputs, samples=6, seed=0):
    """Every gradient a module's backward produces against finite differences (float64).

    ``call(**inputs)`` runs the forward, ``backward(dout)`` returns {input name: gradient}. Each
    input gradient and each parameter gradient gets its own named assertion; ``samples`` entries
    per array are differenced.
    """
    rng = np.random.default_rng(seed)
    module.train()
    module.zero_grad()
    dout = rng.normal(size=call(**inputs).shape)
    grads = backward(dout)

    def loss():
        return float((call(**inputs) * dout).sum())

    for name, grad in grads.items():
        assert_gradient(f"d{name}", grad, numerical_gradient(loss, inputs[name], samples, rng))
    for name, param in module.named_parameters():
        assert_gradient(f"d{name}", param.grad,
                        numerical_gradient(loss, param.data, samples, rng))
