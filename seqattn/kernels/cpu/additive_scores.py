"""Additive (Bahdanau) attention scores on the CPU: s[b, n, m] = v . tanh(qp[b, n] + kp[b, m]).

Shapes: qp (B, N, A) projected queries, kp (B, M, A) projected keys, v (A,), scores (B, N, M).
The tanh is recomputed in backward rather than storing the (B, N, M, A) tensor.
"""
import math

import numpy as np
from numba import prange

from .threads import sized_kernel

# (query, key, feature) terms a thread must have before a launch takes it: a tanh each, more
# than a GELU element costs (benchmarks/small_launches.py).
GRAIN = 1 << 13


def _pair_terms(scores, qp, *rest):
    """Work of a launch: one tanh per (query, key, feature)."""
    return scores.size * qp.shape[2]


@sized_kernel(GRAIN, work=_pair_terms)
def additive_scores_forward(scores, qp, kp, v):
    B, N, A = qp.shape
    M = kp.shape[1]
    for bn in prange(B * N):
        b = bn // N
        n = bn % N
        for m in range(M):
            s = 0.0
            for a in range(A):
                s += v[a] * math.tanh(qp[b, n, a] + kp[b, m, a])
            scores[b, n, m] = s


@sized_kernel(GRAIN)
def _additive_scores_backward(dqp, dkp, dv, dscores, qp, kp, v, threads):
    B, N, A = qp.shape
    M = kp.shape[1]
    # s = sum_a v_a t_a, t = tanh(qp + kp)  ->  dqp_a = sum_m ds v_a (1 - t_a^2); dv_a = sum ds t_a
    chunks = min(B * N, threads)
    partial_v = np.zeros((chunks, A), dtype=np.float64)
    for c in prange(chunks):
        for bn in range(c * B * N // chunks, (c + 1) * B * N // chunks):
            b = bn // N
            n = bn % N
            for a in range(A):
                dqp[b, n, a] = 0.0
            for m in range(M):
                ds = dscores[b, n, m]
                for a in range(A):
                    t = math.tanh(qp[b, n, a] + kp[b, m, a])
                    dqp[b, n, a] += ds * v[a] * (1.0 - t * t)
                    partial_v[c, a] += ds * t
    # dkp_a = sum_n ds v_a (1 - t_a^2), parallel over keys so that no two threads write one row
    for bm in prange(B * M):
        b = bm // M
        m = bm % M
        for a in range(A):
            dkp[b, m, a] = 0.0
        for n in range(N):
            ds = dscores[b, n, m]
            for a in range(A):
                t = math.tanh(qp[b, n, a] + kp[b, m, a])
                dkp[b, m, a] += ds * v[a] * (1.0 - t * t)
    for a in range(A):
        total = 0.0
        for c in range(chunks):
            total += partial_v[c, a]
        dv[a] += total


def additive_scores_backward(dqp, dkp, dv, dscores, qp, kp, v):
    """dqp and dkp are overwritten; dv is accumulated (+=)."""
    # The thread count is passed in: a kernel that reads it cannot be cached.
    threads = _additive_scores_backward.threads(dscores.size * qp.shape[2])
    _additive_scores_backward.run(threads, dqp, dkp, dv, dscores, qp, kp, v, threads)
