"""Linear map y = x W^T + b on the CPU.

Shapes: x (R, K) with R = B * N token rows, weight (O, K), bias (O,), y (R, O).
The GEMMs go to NumPy's BLAS (multi-threaded OpenBLAS): no loop Numba compiles beats it.
"""
import numpy as np

from .reductions import sum_over_rows


def linear_forward(out, x, weight, bias, has_bias):
    """out (R, O) = x (R, K) @ weight (O, K)^T (+ bias (O,))."""
    np.matmul(x, weight.T, out=out)
    if has_bias:
        np.add(out, bias, out=out)


def linear_backward(dx, dweight, dbias, dout, x, weight, need_dx, has_bias):
    """Gradients of linear_forward; dweight and dbias are accumulated (+=), dx is overwritten.

    dx (R, K) is written only when ``need_dx`` (the first layer of a model has no input gradient).
    """
    # out = x W^T  ->  dx = dout W
    if need_dx:
        np.matmul(dout, weight, out=dx)
    # out = x W^T  ->  dW = dout^T x, summed over all token rows
    dweight += dout.T @ x
    # out += b  ->  db = sum of dout over rows
    if has_bias:
        sum_over_rows(dbias, dout, True)
