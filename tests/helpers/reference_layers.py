"""Plain NumPy references for the layer ops (linear, norms, activations, dropout, RoPE, ...).

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


def merge_heads(x):
    B, H, N, D = x.shape
    return x.transpose(0, 2, 1, 3).reshape(B, N, H * D)


def additive_scores(qp, kp, v):
    return np.tanh(qp[:, :, None, :] + kp[:, None, :, :]) @ v


def _splitmix64_uniform(seed, i):
    """SplitMix64 of the counter seed + (i + 1) * golden ratio, its top 53 bits as [0, 1)."""
    z = np.uint64(seed) + (i.astype(np.uint64) + np.uint64(1)) * np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    z = z ^ (z >> np.uint64(31))
    return (z >> np.uint64(11)).astype(np.float64) * 2.0**-53


def dropout(x, p, seed):
    """Element i (in C order) is kept when the counter-based uniform(seed, i) >= p, then scaled
    by 1 / (1 - p): the mask is a function of (seed, i) alone."""
    keep = _splitmix64_uniform(seed, np.arange(x.size)).reshape(x.shape) >= p
    return np.where(keep, x * (1 / (1 - p)), 0).astype(x.dtype)
