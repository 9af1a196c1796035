"""A tiny regression task for the distributed-training tests: a linear model over padded token
batches of different lengths, with missing targets, so that the weighting of each rank's
gradients by its number of targets matters."""
import numpy as np

import seqattn.nn as nn
from seqattn.train import TrainingBatch

N_BATCHES = 5  # odd, so the last step of two ranks has one batch only


def batch(i):
    rng = np.random.default_rng([7, i])
    n = 3 + i  # every batch has its own number of tokens
    inputs = rng.standard_normal((2, n, 4)).astype(np.float32)
    targets = inputs @ np.arange(1, 5, dtype=np.float32)[:, None]
    mask = np.zeros((2, n), bool)
    mask[1, n - 1 - i % 2:] = True  # padded tokens
    targets[mask] = np.nan
    targets[0, 0] = np.nan if i % 2 else targets[0, 0]  # a missing target now and then
    return TrainingBatch(inputs, targets.astype(np.float32), mask)


class TokenLinear(nn.Module):
    def __init__(self, seed):
        super().__init__()
        self.linear = nn.Linear(4, 1, seed=seed)

    def forward(self, inputs, key_padding_mask=None):
        return self.linear(inputs)


def model_and_batches(seed=0):
    """A model (its weights from `seed`: distributed fit must broadcast rank 0's), the training
    batches and the validation batches."""
    return TokenLinear(seed), [batch(i) for i in range(N_BATCHES)], [batch(10 + i)
                                                                      for i in range(3)]


def union(batches):
    """One batch holding `batches` together (padded to the longest), as one process would see
    a distributed step's batches."""
    n = max(b.inputs.shape[1] for b in batches)

    def pad(a, fill):
        extra = np.full((a.shape[0], n - a.shape[1], *a.shape[2:]), fill, a.dtype)
        return np.concatenate([a, extra], axis=1)

    return TrainingBatch(np.concatenate([pad(b.inputs, 0) for b in batches]),
                         np.concatenate([pad(b.targets, np.nan) for b in batches]),
                         np.concatenate([pad(b.key_padding_mask, True) for b in batches]))
