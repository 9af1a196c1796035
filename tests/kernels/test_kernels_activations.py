"""The activations kernels beyond the shared table (tests/ops/test_layer_ops_table.py): GELU's
float32 fast path."""
import numpy as np
from scipy.special import erf, ndtr

import reference_layers as ref
from gradcheck import assert_float32_close
from seqattn import ops


def _gelu_grad(x):
    """d/dx [x Phi(x)] = Phi(x) + x phi(x), computed in x's dtype."""
    return 0.5 * (1 + erf(x / np.sqrt(2))) + x * np.exp(-0.5 * x * x) / np.sqrt(2 * np.pi)


def test_gelu_float32_fast_path():
    """Exact GELU on float32 runs the vectorised exp and Gaussian tail of
    kernels/cpu/float32_math; over the whole float32 range of interest (both tails included) it
    must be as accurate as a naive float32 computation with libm's erf, forward and backward."""
    x = np.linspace(-30, 30, 600_001).astype(np.float32)
    x64 = x.astype(np.float64)
    assert_float32_close("gelu float32", ops.gelu(x), ref.gelu(x64), ref.gelu(x))
    dout = np.ones_like(x)
    assert_float32_close("gelu_backward float32", ops.gelu_backward(dout, x), _gelu_grad(x64),
                         _gelu_grad(x))
    # Deep in the negative tail the result keeps its relative accuracy (1 + erf(x) would cancel).
    tail = np.array([-5.0, -8.0, -12.0], np.float32)
    np.testing.assert_allclose(ops.gelu(tail), tail * ndtr(tail.astype(np.float64)), rtol=1e-5)
