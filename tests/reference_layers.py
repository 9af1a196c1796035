"""Plain NumPy references for the layer ops (linear, norms, activations, RoPE, ...).

They compute in the dtype of their inputs: given float64 they are the reference the kernels must
match; given float32 they are the naive float32 computation that float32 tolerances are derived
from. Forward only: each backward is checked against finite differences of the op itself.
"""
import numpy as np
from scipy.special import erf


def linear(x, weight, bias=None):
    out = x @ weight.T
    return out if bias is None else out + bias


def layer_norm(x, weight, bias, eps=1e-5):
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * weight + bias


def rms_norm(x, weight, eps=1e-6):
    return x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + eps) * weight


def gelu(x, approximate="none"):
    if approximate == "tanh":
        return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3)))
    return 0.5 * x * (1 + erf(x / np.sqrt(2)))


def relu(x):
    return np.maximum(x, 0.0)


def silu(x):
    return x / (1 + np.exp(-x))


def swiglu(gate, up):
    return silu(gate) * up


def rope(x, cos, sin):
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    return np.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], axis=-1)


def embedding(ids, weight):
    return weight[ids]


def split_heads(x, num_heads):
    B, N, E = x.shape
    return x.reshape(B, N, num_heads, E // num_heads).transpose(0, 2, 1, 3)


def additive_scores(qp, kp, v):
    return np.tanh(qp[:, :, None, :] + kp[:, None, :, :]) @ v
