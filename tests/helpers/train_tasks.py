"""Synthetic problems with known answers for the training tests, and small model configs."""
import numba
import numpy as np
import pytest

from seqattn.models.token_model import TokenModel, TokenModelConfig

COPY_LENGTH, COPY_DELAY = 12, 3


def delayed_copy(samples, seed):
    """N -> N: y_t = x_{t - 3} (0 before the delay). Only attention to a token 3 steps back
    solves it; predicting 0 scores the variance, about 0.75."""
    x = np.random.default_rng(seed).normal(size=(samples, COPY_LENGTH, 1)).astype(np.float32)
    y = np.zeros_like(x)
    y[:, COPY_DELAY:] = x[:, :-COPY_DELAY]
    return x, y


def small_token_model(seed=0, dropout=0.0, **overrides):
    config = dict(in_features=1, out_features=1, d_model=32, nhead=4, num_layers=1,
                  dim_feedforward=64, max_len=COPY_LENGTH, dropout=dropout, seed=seed)
    config.update(overrides)
    return TokenModel(TokenModelConfig(**config))


@pytest.fixture(autouse=True)
def one_numba_thread():
    """The training tests run tiny shapes, where a step is dozens of small kernels: waking a
    second thread for each costs more than it gives, and on a shared 2-core machine it stalls
    (a learning test took 80 s with two threads, 9 s with one)."""
    threads = numba.get_num_threads()
    numba.set_num_threads(1)
    yield
    numba.set_num_threads(threads)


SUM_LENGTH = 16


def sign_of_sum(samples, seed):
    """N -> 1: is the sum over a sequence's valid tokens positive? Sequences have 8 to 16
    tokens (the rest padded with noise that must be ignored); no window of a few tokens can
    tell, and guessing scores 50%."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(samples, SUM_LENGTH, 1)).astype(np.float32)
    lengths = rng.integers(8, SUM_LENGTH + 1, size=samples)
    padding = np.arange(SUM_LENGTH)[None, :] >= lengths[:, None]
    total = np.where(padding, 0.0, x[..., 0]).sum(axis=1)
    return x, (total > 0).astype(np.float32)[:, None], padding


def binary_accuracy(logits, targets):
    return float(((logits > 0) == (targets > 0.5)).mean())


REVERSE_LENGTH, REVERSE_SYMBOLS = 6, 8


def reversal(samples, seed):
    """N -> N': the source ids reversed. Symbols are 1..8; 0 is the decoder's start id."""
    src = np.random.default_rng(seed).integers(1, REVERSE_SYMBOLS + 1,
                                               size=(samples, REVERSE_LENGTH))
    return src, src[:, ::-1].copy()
