"""Plain NumPy references for the array ops: broadcast adds and products, their reductions,
in-place sums, fills and moving-average steps (the in-place ones return the updated copy), affine maps, reciprocals,
concatenation and sums along an axis."""
import numpy as np


def add(a, b):
    return a + b


def sum_leading(x, shape):
    return x.reshape((-1,) + tuple(shape)).sum(axis=0)


def sum_leading_into(x, out):
    return out + sum_leading(x, out.shape)


def add_into(dst, src):
    return dst + src


def move_toward(dst, src, weight):
    return dst + weight * (src - dst)


def fill(x, value):
    return np.full_like(x, value)


def multiply(a, b):
    return a * b


def affine(x, scale, shift):
    return x * scale + shift


def reciprocal(x):
    return 1 / x


def concat(a, b, c, axis):
    return np.concatenate([a, b, c], axis=axis)


def mean_along(x, axis, scale):
    return x.sum(axis=axis) * scale
