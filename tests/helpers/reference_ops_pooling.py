"""Plain NumPy references for pooling tokens (B, N, E) into vectors, class tokens and key/value
cache writes, forward and backward (d(sum(out * dout))/dinput)."""
import numpy as np


def masked_mean(x, key_padding_mask=None):
    kept = np.ones(x.shape[:2], bool) if key_padding_mask is None else ~key_padding_mask
    count = kept.sum(axis=1)[:, None]
    # a sequence that is all padding pools to zeros
    return np.where(count > 0, (x * kept[..., None]).sum(axis=1) / np.maximum(count, 1), 0)


def masked_mean_backward(dout, x, key_padding_mask=None):
    kept = np.ones(x.shape[:2], bool) if key_padding_mask is None else ~key_padding_mask
    count = np.maximum(kept.sum(axis=1), 1)[:, None, None]
    return {"x": dout[:, None, :] * kept[..., None] / count}


def prepend_token(x, token, length=None):
    B, N, E = x.shape
    length = N + 1 if length is None else length
    return np.concatenate([np.broadcast_to(token, (B, 1, E)), x], axis=1)[:, :length]


def prepend_token_backward(dout, x, token, length=None):
    dx = np.zeros_like(x)
    shifted = dout[:, 1:]
    dx[:, :shifted.shape[1]] = shifted
    return {"x": dx, "token": dout[:, 0].sum(axis=0)}


def first_token(x):
    return x[:, 0]


def first_token_backward(dout, x):
    dx = np.zeros_like(x)
    dx[:, 0] = dout
    return {"x": dx}


def write_positions(cache, new, start):
    out = cache.copy()
    out[:, :, start:start + new.shape[2]] = new
    return out
