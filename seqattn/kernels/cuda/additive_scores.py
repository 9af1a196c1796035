"""Additive attention scores on the GPU; same launchers and semantics as
``kernels/cpu/additive_scores``. Shapes: qp (B, N, A), kp (B, M, A), v (A,), scores (B, N, M).
The gradient of v is summed over (b, m) in a fixed order (no atomics: see ``reductions``).
"""
import math

from numba import cuda

from .grid import THREADS, blocks_for
from .reductions import add_strip_sums, strip_partials


@cuda.jit(cache=True)
def additive_scores_forward_kernel(scores, qp, kp, v):
    B, N, A = qp.shape
    M = kp.shape[1]
    i = cuda.grid(1)
    if i >= B * N * M:
        return
    m = i % M
    n = (i // M) % N
    b = i // (M * N)
    s = 0.0
    for a in range(A):
        s += v[a] * math.tanh(qp[b, n, a] + kp[b, m, a])
    scores[b, n, m] = s


@cuda.jit(cache=True)
def additive_query_grad_kernel(dqp, dscores, qp, kp, v):
    # s = sum_a v_a tanh(qp_a + kp_a)  ->  dqp_a = sum_m ds v_a (1 - t_a^2)
    B, N, A = qp.shape
    M = kp.shape[1]
    i = cuda.grid(1)
    if i >= B * N * A:
        return
    a = i % A
    n = (i // A) % N
    b = i // (A * N)
    total = 0.0
    for m in range(M):
        t = math.tanh(qp[b, n, a] + kp[b, m, a])
        total += dscores[b, n, m] * (1.0 - t * t)
    dqp[b, n, a] = total * v[a]


@cuda.jit(cache=True)
def additive_key_grad_kernel(dkp, partial_v, dscores, qp, kp, v):
    # dkp_a = sum_n ds v_a (1 - t_a^2); dv_a = sum_{n, m} ds t_a
    B, N, A = qp.shape
    M = kp.shape[1]
    i = cuda.grid(1)
    if i >= B * M * A:
        return
    a = i % A
    m = (i // A) % M
    b = i // (A * M)
    total = 0.0
    total_v = 0.0
    for n in range(N):
        t = math.tanh(qp[b, n, a] + kp[b, m, a])
        total += dscores[b, n, m] * (1.0 - t * t)
        total_v += dscores[b, n, m] * t
    dkp[b, m, a] = total * v[a]
    partial_v[b * M + m, a] = total_v  # summed over (b, m) in order by add_strip_sums


def additive_scores_forward(scores, qp, kp, v):
    additive_scores_forward_kernel[blocks_for(scores.size), THREADS](scores, qp, kp, v)


def additive_scores_backward(dqp, dkp, dv, dscores, qp, kp, v):
    """dqp and dkp are overwritten; dv is accumulated (+=)."""
    additive_query_grad_kernel[blocks_for(qp.size), THREADS](dqp, dscores, qp, kp, v)
    B, M, A = kp.shape
    partial_v = strip_partials(B * M, A)
    additive_key_grad_kernel[blocks_for(kp.size), THREADS](dkp, partial_v, dscores, qp, kp, v)
    add_strip_sums(dv, partial_v)
