"""The checks that tests/ops/test_layer_ops_table.py applies to every case of tests/helpers/op_cases.py:
the forward (and backward) against the NumPy reference, the backward against finite
differences, float32 accuracy within a derived tolerance, the CUDA kernels against the CPU ones,
the reference against torch; which ``seqattn.ops`` functions the table calls at all, and which
launchers a kernel module offers.
"""
import inspect
import os
import sys

import numpy as np

from gradcheck import assert_float32_close, assert_gradient, numerical_gradient, on_cuda, to_host
from seqattn import ops

EXACT = dict(rtol=1e-12, atol=1e-12)  # float64 results of one formula written two ways


def _host(result):
    """A result as one NumPy array: device arrays copied back, a tuple of outputs stacked."""
    if isinstance(result, tuple):
        return np.stack([np.asarray(to_host(r)) for r in result])
    return np.asarray(to_host(result))


def _inputs(case, seed=0):
    return case.make_inputs(np.random.default_rng(seed))


def _dout(case, inputs, seed=1):
    out = _host(case.forward(**inputs))
    return np.random.default_rng(seed).normal(size=out.shape)


def _cast(case, inputs, dtype):
    return {k: v.astype(dtype) if k in case.float_inputs else v for k, v in inputs.items()}


def check_forward(case):
    inputs = _inputs(case)
    np.testing.assert_allclose(_host(case.forward(**inputs)), case.reference(**inputs), **EXACT,
                               err_msg=f"{case.name} forward")


def check_backward(case):
    """The backward against central differences of the forward, one assertion per input, and
    against the reference's backward where the table has one."""
    inputs = _inputs(case)
    dout = _dout(case, inputs)
    grads = case.backward(dout, **inputs)
    for name, grad in grads.items():
        numeric = numerical_gradient(lambda: float((_host(case.forward(**inputs)) * dout).sum()),
                                     inputs[name])
        assert_gradient(f"{case.name}: d{name}", grad, numeric)
    if case.reference_backward is not None:
        expected = case.reference_backward(dout, **inputs)
        assert grads.keys() == expected.keys(), f"{case.name}: gradients of {list(expected)}"
        for name, grad in grads.items():
            np.testing.assert_allclose(to_host(grad), expected[name], **EXACT,
                                       err_msg=f"{case.name}: d{name} against the reference")


def check_differentiable(case):
    """The op recorded by seqattn.autodiff: the same output, and Tensor.backward() gives the
    gradients of the op's own backward for every input in ``case.backward``."""
    from seqattn.autodiff import Tensor

    inputs = _inputs(case)
    dout = _dout(case, inputs)
    expected = case.backward(dout, **inputs)
    tensors = {name: Tensor(x, requires_grad=True) if name in expected else x
               for name, x in inputs.items()}
    out = case.differentiable(**tensors)
    np.testing.assert_allclose(to_host(out.data), _host(case.forward(**inputs)), **EXACT,
                               err_msg=f"{case.name}: recorded forward")
    out.backward(dout)
    for name, grad in expected.items():
        np.testing.assert_allclose(to_host(tensors[name].grad), to_host(grad), **EXACT,
                                   err_msg=f"{case.name}: recorded d{name}")


def check_float32(case):
    """The float32 forward (and backward, where the table has a reference backward) within a
    small multiple of the error of the reference computed naively in float32."""
    inputs32 = _cast(case, _inputs(case), np.float32)
    inputs64 = _cast(case, inputs32, np.float64)
    exact = case.reference(**inputs64)
    naive = case.reference(**inputs32)
    assert_float32_close(f"{case.name} float32", _host(case.forward(**inputs32)), exact, naive)
    if case.reference_backward is None:
        return
    dout32 = _dout(case, inputs32).astype(np.float32)
    exact = case.reference_backward(dout32.astype(np.float64), **inputs64)
    naive = case.reference_backward(dout32, **inputs32)
    for name, grad in case.backward(dout32, **inputs32).items():
        assert_float32_close(f"{case.name} float32 d{name}", to_host(grad), exact[name],
                             naive[name])


def check_cuda_matches_cpu(case):
    """The CUDA kernels (under the simulator in CI) give the CPU's results, forward and backward."""
    inputs = _inputs(case)
    np.testing.assert_allclose(_host(on_cuda(case.forward, **inputs)),
                               _host(case.forward(**inputs)), **EXACT,
                               err_msg=f"{case.name} forward on CUDA")
    if case.backward is None:
        return
    dout = _dout(case, inputs)
    cpu = case.backward(dout, **inputs)
    gpu = on_cuda(lambda d, **kw: tuple(case.backward(d, **kw).values()), dout, **inputs)
    for (name, want), got in zip(cpu.items(), gpu):
        np.testing.assert_allclose(got, want, **EXACT, err_msg=f"{case.name}: d{name} on CUDA")


def check_reference_matches_torch(case, torch):
    """The NumPy reference gives torch's output, and the op's backward torch's gradients."""
    inputs = _inputs(case)
    dout = _dout(case, inputs)
    grads = {} if case.backward is None else case.backward(dout, **inputs)
    tensors = {k: torch.tensor(v, requires_grad=k in grads) if isinstance(v, np.ndarray) else v
               for k, v in inputs.items()}
    out = case.torch_reference(**tensors)
    np.testing.assert_allclose(case.reference(**inputs), out.detach().numpy(), **EXACT,
                               err_msg=f"{case.name}: reference against torch")
    if grads:
        (out * torch.tensor(dout)).sum().backward()
    for name, grad in grads.items():
        np.testing.assert_allclose(to_host(grad), tensors[name].grad.numpy(), **EXACT,
                                   err_msg=f"{case.name}: d{name} against torch")


def public_ops():
    """{name: function} of the ops ``seqattn.ops`` exports."""
    return {name: f for name, f in vars(ops).items()
            if inspect.isfunction(f) and f.__module__.startswith("seqattn.ops.")}


def ops_called(cases):
    """Names of the ``seqattn.ops`` functions that the cases' forward and backward call
    directly (from the tests, not from inside seqattn as one op calls another), on the CPU."""
    package = os.path.dirname(os.path.dirname(ops.__file__)) + os.sep  # .../seqattn/
    names = {f.__code__: name for name, f in public_ops().items()}
    called = set()

    def record(frame, event, arg):
        if (event == "call" and frame.f_code in names
                and not frame.f_back.f_code.co_filename.startswith(package)):
            called.add(names[frame.f_code])

    sys.setprofile(record)
    try:
        for case in cases:
            inputs = _inputs(case)
            case.forward(**inputs)
            if case.backward is not None:
                case.backward(_dout(case, inputs), **inputs)
    finally:
        sys.setprofile(None)
    return called


def launchers(module):
    """{name: parameter names} of a kernel module's launchers: the public functions it defines,
    less the @cuda.jit bodies (named ``*_kernel``) that CUDA launchers start."""
    return {name: list(inspect.signature(f).parameters) for name, f in vars(module).items()
            if callable(f) and getattr(f, "__module__", None) == module.__name__
            and not name.startswith("_") and not name.endswith("_kernel")
            and not isinstance(f, type)}
